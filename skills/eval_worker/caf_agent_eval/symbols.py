"""The native-code check: what a built extension may call, read from its dynamic symbols.

The source checks (static_checks.py) read text, and text can be aliased (`namespace A = at;`,
a function pointer to `std::system`, a hand-written prototype of the CPython API). The
linker cannot be fooled that way: every function the library calls in another library is an
undefined symbol in its dynamic symbol table. After the link, the judge lists them (what
`nm -D --undefined-only` prints, read from the ELF file in-process; demangled with
libstdc++'s __cxa_demangle) and allows only the families below; anything else fails the
build, naming the symbol. docs/JUDGE.md has the list and what it leaves open.

Allowed families (each with the reason it is needed):
- C runtime support the compiler emits (`__cxa_*`, `__gxx_personality_v0`, `_Unwind_*`,
  `__stack_chk_fail`, start-up/tear-down hooks), memory and string functions (memcpy,
  malloc, strlen, ...), libm math (sin, expf, ...), OpenMP (`GOMP_*`, `omp_get_*`: the CPU
  flavour's sanctioned parallelism), the CUDA runtime calls a kernel launch and its
  launcher need, cuBLAS and cuDNN (the two sanctioned libraries).
- libstdc++ (`std::`, `__gnu_cxx::`, `__cxxabiv1::`), except the parts that reach the OS:
  threads, async/futures, file streams, filesystem, random_device, clocks, sleeps.
- torch: the registration path for defining ops (`torch::Library` construction and
  `_def`, not `_impl`/`_fallback`: no replacing torch's own kernels; schema inference and
  parsing), tensor metadata and data pointers, error reporting (TORCH_CHECK), the
  sanctioned allocation path (`at::detail::empty_*`), CUDA device plumbing (current stream,
  device properties, cuBLAS/cuDNN handles), and `at::_ops::<op>::call` only for the ops the
  dispatcher guard allows (dispatch_guard.ALLOWED_OPS and, for the GEMM/convolution entry
  points such as `at::addmm`, EXTENSION_ONLY_OPS: the guard still limits those to calls
  made inside an extension op). Every other `at::`/`torch::`/`c10::` symbol is refused:
  `at::cpu::relu`, `at::native::*` and friends run torch's kernels without dispatching
  (the guard would not see them); `c10::impl::` TLS setters turn the guard off;
  `c10::ThreadPool` starts threads; `c10::Dispatcher` calls any op by name.
- Nothing of Python: a `Py*`/`_Py*` symbol (a hand-declared CPython prototype), pybind11 or
  torch's Python bindings (`THP*`, `torch::python`) fail the check.
"""
from __future__ import annotations

import functools
import re

# Rationale: the C functions a kernel library legitimately calls. Memory/string functions
# and libm are what compiled C++ emits for copies, formatting and math; the rest is the
# C/C++ runtime's own plumbing. Anything that reaches files, processes, sockets, threads,
# the loader, signals, the environment or clocks is absent on purpose.
_C_EXACT = {
    # C++ runtime and start-up/tear-down hooks the compiler and linker emit.
    "__cxa_atexit", "__cxa_finalize", "__gmon_start__", "_ITM_deregisterTMCloneTable",
    "_ITM_registerTMCloneTable", "__stack_chk_fail", "__libc_single_threaded",
    "__gxx_personality_v0", "__dso_handle", "__assert_fail", "abort",
    "__cxa_pure_virtual", "__cxa_deleted_virtual", "__cxa_throw", "__cxa_rethrow",
    "__cxa_allocate_exception", "__cxa_free_exception", "__cxa_begin_catch",
    "__cxa_end_catch", "__cxa_get_exception_ptr", "__cxa_current_exception_type",
    "__cxa_bad_cast", "__cxa_bad_typeid", "__cxa_guard_acquire", "__cxa_guard_release",
    "__cxa_guard_abort", "__cxa_call_unexpected", "__cxa_demangle",
    "__cxa_throw_bad_array_new_length", "__cxa_thread_atexit_impl", "__tls_get_addr",
    "__errno_location", "atexit", "_GLOBAL_OFFSET_TABLE_", "__once_proxy",
    "__cxa_thread_atexit", "__isnan", "__isnanf", "__isinf", "__isinff", "__finite",
    "__finitef", "nan", "nanf",
    # nvcc's host-side stub for every `__device__` function with external linkage is
    # `::exit(1)` (the host must never call it): a .cu with a non-static device function
    # needs it. Ending the process ends only the judge's child, whose verdict the parent
    # gives (a child that exits without its result fails the job, even with status 0).
    "exit",
    # printing to the streams the process already has (its log): what debugging needs;
    # opening a stream (fopen) is refused, and the system-call filter refuses write-opens
    "printf", "__printf_chk", "vprintf", "puts", "putchar", "fputs", "fputc", "putc",
    "fprintf", "__fprintf_chk", "vfprintf", "__vfprintf_chk", "fwrite", "fflush", "stdout",
    "stderr",
    # memory and strings
    "memcpy", "memmove", "memset", "memcmp", "memchr", "__memcpy_chk", "__memmove_chk",
    "__memset_chk", "strlen", "strnlen", "strcmp", "strncmp", "strchr", "strrchr", "strstr",
    "strcpy", "strncpy", "__strcpy_chk", "malloc", "calloc", "realloc", "free",
    "aligned_alloc", "posix_memalign", "memalign", "snprintf", "__snprintf_chk", "vsnprintf",
    "__vsnprintf_chk", "sprintf", "__sprintf_chk", "strtol", "strtoll", "strtoul", "strtod",
    "strtof", "qsort", "bsearch", "abs", "labs", "llabs",
    # locking only (no thread creation): what std::call_once and static locals use
    "pthread_once", "pthread_mutex_lock", "pthread_mutex_unlock", "pthread_mutex_trylock",
    "pthread_mutex_init", "pthread_mutex_destroy", "pthread_key_create", "pthread_key_delete",
    "pthread_getspecific", "pthread_setspecific", "pthread_cond_wait", "pthread_cond_signal",
    "pthread_cond_broadcast", "pthread_cond_destroy",
    # OpenMP: the sanctioned CPU parallelism
    "omp_get_num_threads", "omp_get_thread_num", "omp_get_max_threads", "omp_in_parallel",
    "omp_get_num_procs", "omp_set_num_threads",
}
_C_PREFIXES = ("_Unwind_", "GOMP_")
# Rationale: libm, with float/long-double variants and glibc's _finite aliases.
_MATH = {
    "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh",
    "acosh", "atanh", "exp", "exp2", "exp10", "expm1", "log", "log2", "log10", "log1p", "pow",
    "sqrt", "cbrt", "hypot", "fabs", "floor", "ceil", "round", "lround", "llround", "trunc",
    "rint", "lrint", "llrint", "nearbyint", "fmod", "remainder", "fmin", "fmax", "fma", "fdim",
    "copysign", "frexp", "ldexp", "modf", "scalbn", "ilogb", "logb", "erf", "erfc", "tgamma",
    "lgamma", "nextafter", "sincos", "significand",
}
_MATH_RE = re.compile(r"^(?:__)?(%s)[fl]?(?:_finite)?$" % "|".join(sorted(_MATH)))

# Rationale: the CUDA runtime entry points nvcc's generated code and a kernel's launcher
# need (registration of the fat binary, launch, errors, device attributes for occupancy,
# async copies/sets, streams and events for a kernel's own ordering). Host callbacks
# (cudaLaunchHostFunc, cudaStreamAddCallback), IPC and device resets are absent.
_CUDA_EXACT = {
    "__cudaRegisterFatBinary", "__cudaRegisterFatBinaryEnd", "__cudaUnregisterFatBinary",
    "__cudaRegisterFunction", "__cudaRegisterVar", "__cudaRegisterManagedVar",
    "__cudaRegisterTexture", "__cudaRegisterSurface", "__cudaPushCallConfiguration",
    "__cudaPopCallConfiguration", "__cudaInitModule", "__cudaGetKernel", "__cudaLaunchKernel",
    "__cudaLaunchKernel_ptsz", "cudaLaunchKernel_ptsz", "cudaLaunchKernel",
    "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel", "cudaGetLastError",
    "cudaPeekAtLastError", "cudaGetErrorString", "cudaGetErrorName", "cudaGetDevice",
    "cudaGetDeviceCount", "cudaGetDeviceProperties", "cudaGetDeviceProperties_v2",
    "cudaDeviceGetAttribute", "cudaFuncSetAttribute", "cudaFuncGetAttributes",
    "cudaFuncSetCacheConfig", "cudaFuncSetSharedMemConfig",
    "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
    "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
    "cudaOccupancyMaxPotentialBlockSize", "cudaOccupancyAvailableDynamicSMemPerBlock",
    "cudaMemcpyAsync", "cudaMemcpy", "cudaMemsetAsync", "cudaMemset", "cudaMemcpy2DAsync",
    "cudaMemcpyToSymbol", "cudaMemcpyToSymbolAsync", "cudaMemcpyFromSymbol",
    "cudaMemcpyFromSymbolAsync", "cudaGetSymbolAddress", "cudaGetSymbolSize",
    "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaStreamWaitEvent",
    "cudaStreamCreate", "cudaStreamCreateWithFlags", "cudaStreamCreateWithPriority",
    "cudaStreamDestroy", "cudaStreamQuery", "cudaEventCreate", "cudaEventCreateWithFlags",
    "cudaEventRecord", "cudaEventSynchronize", "cudaEventDestroy", "cudaEventQuery",
    "cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaFreeAsync",
    "cudaDeviceGetStreamPriorityRange", "cudaRuntimeGetVersion", "cudaDriverGetVersion",
    "cudaPointerGetAttributes",
}
# cuBLAS / cuBLASLt / cuDNN: the sanctioned libraries, every entry point.
_CUDA_PREFIXES = ("cublas", "cudnn")

# Demangled-name rules for C++ symbols (the qualified name, template arguments removed).
# Checked in order: the first match decides.
_CPP_RULES: list[tuple[str, bool, str]] = [
    # (regex on the qualified name, allowed, what it is)
    (r"^(std|__gnu_cxx)::(__cxx11::)?(thread|jthread|this_thread|async|__future_base|"
     r"future|shared_future|promise|packaged_task|__basic_file|basic_filebuf|basic_fstream|"
     r"basic_ifstream|basic_ofstream|filesystem|__fs|random_device|chrono|"
     r"__atomic_futex_unsigned_base|__shared_mutex_cv|stdio_filebuf|stdio_sync_filebuf)\b",
     False, "a libstdc++ part that reaches the OS (threads, files, clocks, devices)"),
    (r"^(std|__gnu_cxx|__cxxabiv1)::", True, ""),
    (r"^operator (new|delete)", True, ""),
    (r"^(typeinfo|typeinfo name|vtable|VTT|construction vtable) for (std|__gnu_cxx|__cxxabiv1)::",
     True, ""),
    # torch's registration path (CAF_REGISTER = TORCH_LIBRARY_FRAGMENT + m.def): defining
    # ops only. Library::_impl (TORCH_LIBRARY_IMPL, m.impl) would replace the kernels of
    # existing aten ops in the judging process, Library::_fallback (with
    # CppFunction::makeFallthrough) a whole dispatch key, e.g. the Python key the
    # dispatcher guard sits on: both refused.
    (r"^torch::Library::(Library|~Library|_def)$", True, ""),
    (r"^torch::CppFunction::(CppFunction|~CppFunction)$", True, ""),
    (r"^torch::detail::TorchLibraryInit::", True, ""),
    (r"^torch::jit::parseSchema(OrName)?$", True, ""),
    (r"^c10::detail::infer_schema::", True, ""),
    (r"^c10::(FunctionSchema|OperatorName|Argument|AliasInfo)::", True, ""),
    (r"^c10::\w*Type(Ptr)?::", True, ""),   # schema types: c10::TensorType::get(), ...
    (r"^c10::(getTypePtrCopy|getFakeTypePtrCopy|getCustomClassTypeImpl)$", True, ""),
    # errors (TORCH_CHECK, CAF_CHECK), warnings, dimension wrapping
    (r"^c10::detail::(torchCheckFail|torchInternalAssertFail|torchCheckMsgImpl|"
     r"maybe_wrap_dim_slow|check_and_update_common_device)", True, ""),
    (r"^c10::(Error|IndexError|ValueError|TypeError|NotImplementedError|"
     r"OutOfMemoryError|Warning|WarningHandler|warn)\b", True, ""),
    (r"^c10::(demangle|toString|str|detail::_str|DeviceTypeName|isValidDeviceType|"
     r"get_default_dtype|typeMetaToScalarType)", True, ""),
    # tensor metadata, storage, scalars, symbolic sizes, small vectors
    (r"^c10::(TensorImpl|UndefinedTensorImpl|StorageImpl|Storage|intrusive_ptr|"
     r"SymInt|SymBool|SymFloat|SymNodeImpl|SymbolicShapeMeta|IValue|ivalue::|Scalar|"
     r"SmallVectorBase|ArrayRef|Device|Stream|DataPtr|TensorOptions|MemoryFormat|"
     r"Half|BFloat16|Float8\w*|ScalarType|Layout|DispatchKeySet|"
     r"detail::_str_wrapper|ThreadLocalDebugInfo)\b", True, ""),
    (r"^caffe2::(TypeMeta|detail::TypeMetaData|detail::_typeMetaData)", True, ""),
    (r"^c10::(GetAllocator|GetCPUAllocator|Allocator|InefficientStdFunctionContext|"
     r"impl::device_guard_impl_registry|impl::getDeviceGuardImpl|impl::cow::)", True, ""),
    # device plumbing on CUDA: streams, guards, properties, library handles, allocation
    (r"^c10::cuda::(getCurrentCUDAStream|getDefaultCUDAStream|getStreamFromPool|"
     r"setCurrentCUDAStream|CUDAStream|c10_cuda_check_implementation|device_count|"
     r"current_device|set_device|MaybeSetDevice|ExchangeDevice|GetDevice|SetDevice|"
     r"impl::CUDAGuardImpl|CUDACachingAllocator::(get|raw_alloc|raw_delete|allocator)|"
     r"warning_state|get_cuda_check_suffix)\b", True, ""),
    (r"^at::cuda::(getCurrentCUDABlasHandle|getCurrentCUDABlasLtHandle|"
     r"getCUDABlasLtWorkspace|getCUDABlasLtWorkspaceSize|getChosenWorkspaceSize|"
     r"getCurrentDeviceProperties|getDeviceProperties|warp_size|getCurrentCUDAStream|"
     r"blas::|detail::)", True, ""),
    (r"^at::native::getCudnnHandle$", True, ""),
    # tensors: data pointers and the methods that dispatch allowed ops
    (r"^at::(TensorBase|Tensor)::(data_ptr|mutable_data_ptr|const_data_ptr|"
     r"__dispatch_contiguous|to|print|toString|fill_|zero_|enforce_invariants|name)$", True, ""),
    (r"^at::detail::(empty_cpu|empty_cuda|empty_generic|empty_strided_cpu|"
     r"empty_strided_cuda|empty_strided_generic)$", True, ""),
    (r"^at::(get_num_threads|get_thread_num|in_parallel_region|internal::invoke_parallel|"
     r"internal::lazy_init_num_threads|internal::set_thread_num|internal::init_num_threads|"
     r"internal::GRAIN_SIZE)$", True, ""),
    (r"^at::(OptionalDeviceGuard|DeviceGuard|TensorOptions)", True, ""),
    # at::_ops is decided op by op (see _aten_op_rule)
    (r"^at::_ops::", True, "aten"),
    # everything else of torch: compute that bypasses the dispatcher, guard switches,
    # thread pools, the dispatcher itself, Python bindings
    (r"^(at|c10|torch|caffe2|aten|torch_python|pybind11|THP\w*)::", False,
     "a torch function outside the allowed set (compute, thread pools, dispatcher "
     "internals or Python bindings)"),
]
_CPP_RULES_RE = [(re.compile(p), ok, what) for p, ok, what in _CPP_RULES]

_OPS_RE = re.compile(r"^at::_ops::(\w+)::(call|redispatch)$")


@functools.lru_cache(maxsize=None)
def allowed_aten_structs() -> frozenset:
    """The `at::_ops::<struct>` names of every overload of the ops the dispatcher guard
    allows (struct = op name, plus `_<overload>` for a non-default overload)."""
    import torch
    from .dispatch_guard import ALLOWED_OPS, EXTENSION_ONLY_OPS
    names = set()
    for op in ALLOWED_OPS | EXTENSION_ONLY_OPS:
        packet = getattr(torch.ops.aten, op, None)
        if packet is None:
            continue
        names.add(op)
        for overload in packet.overloads():
            names.add(op if overload == "default" else f"{op}_{overload}")
    return frozenset(names)


def qualified_name(demangled: str) -> str:
    """The function or object name of a demangled symbol, without parameters, return type
    or template arguments: `float* at::TensorBase::data_ptr<float>() const` ->
    `at::TensorBase::data_ptr`."""
    s = demangled.split("@")[0].strip()
    for prefix in ("typeinfo name for ", "typeinfo for ", "construction vtable for ",
                   "vtable for ", "VTT for ", "guard variable for ", "TLS init function for ",
                   "TLS wrapper function for ", "non-virtual thunk to ", "virtual thunk to "):
        if s.startswith(prefix):
            return prefix + _strip_templates(s[len(prefix):])
    # The parameter list opens at the first "(" outside template brackets, but "operator()"
    # and "operator<<" themselves contain brackets: find the operator keyword first.
    op = re.search(r"\boperator\s*(\(\)|<<=?|>>=?|<=>|<=|>=|<|>|\[\]|->\*?|[^\s(]+|\s+\w[\w:]*)", s)
    depth, cut = 0, len(s)
    for i, ch in enumerate(s):
        if op and op.start() <= i < op.end():
            continue
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            cut = i
            break
    head = s[:cut]
    # Drop the return type: the name starts after the last top-level space.
    depth, start = 0, 0
    for i in range(len(head) - 1, -1, -1):
        ch = head[i]
        if op and op.start() <= i < op.end():
            continue
        if ch == ">":
            depth += 1
        elif ch == "<":
            depth -= 1
        elif ch == " " and depth == 0:
            start = i + 1
            break
    return _strip_templates(head[start:])


def _strip_templates(name: str) -> str:
    out, depth = [], 0
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out).replace("[abi:cxx11]", "").strip()


_KNOWN_BAD = {
    "process creation": {"system", "popen", "fork", "vfork", "clone", "clone3", "execve",
                         "execv", "execvp", "execvpe", "execl", "execlp", "execle", "fexecve",
                         "posix_spawn", "posix_spawnp", "daemon", "wait", "waitpid", "kill",
                         "ptrace", "prctl"},
    "threads": {"pthread_create", "pthread_detach", "pthread_join", "pthread_kill",
                "thrd_create", "pthread_atfork", "pthread_cancel"},
    "sockets": {"socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
                "send", "sendto", "sendmsg", "recv", "recvfrom", "recvmsg", "getaddrinfo",
                "gethostbyname"},
    "files": {"open", "open64", "openat", "openat64", "creat", "fopen", "fopen64", "fdopen",
              "freopen", "read", "write", "pread", "pwrite", "unlink", "rename", "remove",
              "mkdir", "opendir", "readdir", "fread", "fgets", "fscanf", "mmap",
              "mmap64", "mprotect", "truncate", "ftruncate", "memfd_create", "dup", "dup2"},
    "the dynamic loader": {"dlopen", "dlsym", "dlmopen", "dlvsym", "dladdr", "dlinfo",
                           "dl_iterate_phdr"},
    "signals": {"signal", "sigaction", "raise", "alarm", "setitimer", "sigprocmask",
                "pthread_sigmask"},
    "raw system calls": {"syscall"},
    "the environment": {"getenv", "secure_getenv", "setenv", "putenv", "unsetenv"},
    "clocks and sleeps": {"clock_gettime", "gettimeofday", "time", "clock", "nanosleep",
                          "usleep", "sleep", "sched_yield"},
}


def classify(mangled: str, demangled: str) -> str | None:
    """None when the symbol is allowed, else the reason it is not."""
    base = mangled.split("@")[0]
    if not base.startswith("_Z"):
        if base.startswith(("Py", "_Py")):
            return "the CPython API (the judge's interpreter is off limits to native code)"
        if base.startswith("THP"):
            return "torch's Python bindings"
        if base in _C_EXACT or base.startswith(_C_PREFIXES) or _MATH_RE.match(base):
            return None
        if base in _CUDA_EXACT or base.startswith(_CUDA_PREFIXES):
            return None
        for what, names in _KNOWN_BAD.items():
            if base in names:
                return what
        return "a C function outside the allowed set (docs/JUDGE.md, native code)"
    name = qualified_name(demangled)
    for rx, ok, what in _CPP_RULES_RE:
        if rx.search(name):
            if not ok:
                return what
            if what == "aten":
                return _aten_op_rule(name)
            return None
    return "a C++ function outside the allowed set (docs/JUDGE.md, native code)"


def _aten_op_rule(name: str) -> str | None:
    m = _OPS_RE.match(name)
    if m and m.group(1) in allowed_aten_structs():
        return None
    op = m.group(1) if m else name
    return (f"torch compute (aten op `{op}`; only allocation, views and the cuBLAS/cuDNN "
            "GEMM/convolution entry points are allowed)")


class SymbolToolError(RuntimeError):
    """The library could not be read (the judge's own failure, not the submission's)."""


_SHT_DYNSYM = 11


def undefined_names(library: str) -> list[str]:
    """The mangled names of the undefined symbols in an ELF64 little-endian library's
    dynamic symbol table (.dynsym): what `nm -D --undefined-only` lists, read in-process
    (no tool to run: the child checks its library again right before loading it)."""
    import struct
    try:
        with open(library, "rb") as f:
            data = f.read()
    except OSError as e:
        raise SymbolToolError(f"cannot read the extension: {e}") from None
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise SymbolToolError("the extension is not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = []
    for sec in sections:
        if sec[1] != _SHT_DYNSYM:
            continue
        offset, size, link, entsize = sec[4], sec[5], sec[6], sec[9] or 24
        strtab_off = sections[link][4]
        for k in range(1, size // entsize):  # entry 0 is the null symbol
            st_name, _info, _other, st_shndx = struct.unpack_from("<IBBH", data, offset + k * entsize)
            if st_shndx == 0 and st_name:
                end = data.index(b"\0", strtab_off + st_name)
                names.append(data[strtab_off + st_name:end].decode("ascii", "replace"))
    return names


@functools.lru_cache(maxsize=1)
def _demangler():
    import ctypes
    try:
        lib = ctypes.CDLL("libstdc++.so.6")
    except OSError as e:
        raise SymbolToolError(f"libstdc++ (for __cxa_demangle) is not loadable: {e}") from None
    fn = lib.__cxa_demangle
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    free = ctypes.CDLL(None).free
    free.argtypes = [ctypes.c_void_p]
    return fn, free


def demangle(name: str) -> str:
    """The C++ name of a mangled symbol (libstdc++'s __cxa_demangle); the name itself when
    it is not a mangled C++ name."""
    import ctypes
    if not name.startswith("_Z"):
        return name
    fn, free = _demangler()
    status = ctypes.c_int(0)
    ptr = fn(name.encode(), None, None, ctypes.byref(status))
    if not ptr or status.value != 0:
        return name
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        free(ptr)


def undefined_symbols(library: str) -> list[tuple[str, str]]:
    """(mangled, demangled) of every undefined dynamic symbol of `library`."""
    return [(n, demangle(n)) for n in undefined_names(library)]


def check_library(library: str) -> list[str]:
    """The refused symbols of a built extension, one sentence each (empty: allowed)."""
    problems = []
    for mangled, demangled in undefined_symbols(library):
        why = classify(mangled, demangled)
        if why:
            problems.append(f"the extension calls `{demangled.split('@')[0]}`: {why}")
    return sorted(set(problems))
