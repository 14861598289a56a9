# LibTorch comes from the PyPI torch wheel in the venv (or any python with torch):
# torch.utils.cmake_prefix_path points at its TorchConfig.cmake. CAF_AGENT_TORCH_PREFIX names that
# folder (a wheel's torch/share/cmake) instead: bench/policy/prebuild_tool.py builds against the
# GPU machine's torch, unpacked here, whose libraries this machine cannot import.
set(CAF_AGENT_TORCH_PREFIX "" CACHE PATH "torch's share/cmake folder (default: ask the Python's torch)")
if(CAF_AGENT_TORCH_PREFIX)
  if(NOT EXISTS "${CAF_AGENT_TORCH_PREFIX}/Torch/TorchConfig.cmake")
    message(FATAL_ERROR "CAF_AGENT_TORCH_PREFIX ${CAF_AGENT_TORCH_PREFIX} holds no Torch/TorchConfig.cmake")
  endif()
  set(_torch_prefix "${CAF_AGENT_TORCH_PREFIX}")
else()
  if(NOT Python3_EXECUTABLE)
    find_program(Python3_EXECUTABLE NAMES python3 python REQUIRED)
  endif()
  execute_process(
    COMMAND "${Python3_EXECUTABLE}" -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE _torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _torch_rc)
  if(NOT _torch_rc EQUAL 0)
    message(FATAL_ERROR "torch is not importable by ${Python3_EXECUTABLE}; run ./x setup")
  endif()
endif()
list(APPEND CMAKE_PREFIX_PATH "${_torch_prefix}")
# Rationale: the CPU build machine has the CUDA toolkit but the policy code only
# needs the headers and libs; silence Caffe2's warnings about missing kineto etc.
# Rationale: without an arch list Caffe2 probes for a GPU at configure time, which
# fails on machines without one; policy/ only links torch and compiles no CUDA.
if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST} AND NOT TORCH_CUDA_ARCH_LIST)
  set(TORCH_CUDA_ARCH_LIST "9.0")
endif()
find_package(Torch REQUIRED)
# Torch's compile flags include -D_GLIBCXX_USE_CXX11_ABI; keep them on torch targets only.
message(STATUS "LibTorch: ${_torch_prefix} (${Torch_VERSION})")
