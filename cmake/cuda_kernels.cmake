# Our own CUDA kernels (policy/model/fused_kernels.cu, learner/fused_head_kernels.cu) where
# LibTorch has CUDA and nvcc is found. Sets CAF_AGENT_CUDA_KERNELS (ON / OFF) and, when ON,
# CAF_AGENT_CUDA_KERNEL_LIBS: what a target holding the kernels links (c10_cuda, and the wheel's
# libcudart where it has one), and CAF_AGENT_CUBLASLT: the cuBLASLt a target calling it links.
# Without a compiler every such op runs as its ATen composite (the CPU path, and CUDA builds on a
# machine without nvcc).
# Rationale: included at the top level, since enable_language(CUDA) must be called in the
# highest directory common to every target compiling CUDA (policy/ and learner/ both do).
set(CAF_AGENT_CUDA_KERNELS OFF)
set(CAF_AGENT_CUDA_KERNEL_LIBS "")
if(TORCH_CUDA_LIBRARIES AND C10_CUDA_LIBRARY)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_HOST_COMPILER)
      set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}")
    endif()
    # Rationale: one libcudart in the process, the wheel's (torch's libraries load it by RUNPATH;
    # a toolkit's older runtime found first would serve torch too). The toolkit's only without one.
    get_filename_component(_cuda_kernels_torch_site "${TORCH_INSTALL_PREFIX}/.." ABSOLUTE)
    find_library(CAF_AGENT_WHEEL_CUDART NAMES libcudart.so.13 libcudart.so.12 cudart
      HINTS "${_cuda_kernels_torch_site}/nvidia/cu13/lib" "${_cuda_kernels_torch_site}/nvidia/cuda_runtime/lib"
      NO_DEFAULT_PATH)
    if(CAF_AGENT_WHEEL_CUDART)
      set(CMAKE_CUDA_RUNTIME_LIBRARY None)
    else()
      set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    endif()
    # cuBLASLt (policy/model/cublaslt_algos.cu) the same way: the wheel's, so that the process holds
    # one cuBLASLt, the one torch loads; else the toolkit's (a prebuilt tool, whose soname then finds
    # the GPU machine's wheel library through bench/policy/prebuilt.py's library path).
    get_filename_component(_cuda_kernels_nvcc_dir "${CMAKE_CUDA_COMPILER}" DIRECTORY)
    find_library(CAF_AGENT_CUBLASLT NAMES libcublasLt.so.13 libcublasLt.so.12
      HINTS "${_cuda_kernels_torch_site}/nvidia/cu13/lib" "${_cuda_kernels_torch_site}/nvidia/cublas/lib"
      NO_DEFAULT_PATH)
    if(NOT CAF_AGENT_CUBLASLT)
      find_library(CAF_AGENT_CUBLASLT NAMES cublasLt
        HINTS "${_cuda_kernels_nvcc_dir}/../lib64" "${_cuda_kernels_nvcc_dir}/../targets/x86_64-linux/lib")
    endif()
    if(NOT CAF_AGENT_CUBLASLT)
      message(FATAL_ERROR "nvcc found but no libcublasLt beside torch (${_cuda_kernels_torch_site}/nvidia) "
                          "or nvcc (${_cuda_kernels_nvcc_dir}/../lib64)")
    endif()
    enable_language(CUDA)
    set(CAF_AGENT_CUDA_KERNELS ON)
    set(CAF_AGENT_CUDA_KERNEL_LIBS "${C10_CUDA_LIBRARY}")
    if(CAF_AGENT_WHEEL_CUDART)
      list(APPEND CAF_AGENT_CUDA_KERNEL_LIBS "${CAF_AGENT_WHEEL_CUDART}")
    endif()
    message(STATUS "CUDA kernels on (${CMAKE_CUDA_COMPILER}, sm_90)")
  else()
    message(STATUS "no CUDA compiler: fused ops run as their ATen composites")
  endif()
endif()

# caf_agent_cuda_kernels(LIBRARY OBJECTS SOURCES...): the kernels alone in an object library
# OBJECTS (plain C++17 CUDA, no torch flags, sm_90: torch's config leaves CMAKE_CUDA_ARCHITECTURES
# off), compiled into LIBRARY, which then links what they need (CAF_AGENT_CUDA_KERNEL_LIBS).
function(caf_agent_cuda_kernels library objects)
  add_library(${objects} OBJECT ${ARGN})
  target_include_directories(${objects} PRIVATE "${PROJECT_SOURCE_DIR}")
  set_target_properties(${objects} PROPERTIES CUDA_ARCHITECTURES 90 CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON
                        CUDA_EXTENSIONS OFF POSITION_INDEPENDENT_CODE ON)
  target_sources(${library} PRIVATE $<TARGET_OBJECTS:${objects}>)
  target_link_libraries(${library} PUBLIC ${CAF_AGENT_CUDA_KERNEL_LIBS})
endfunction()
