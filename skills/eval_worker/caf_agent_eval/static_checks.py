"""Source checks run before anything of the submission is built or imported.

They are the first of two layers: the dispatcher guard (dispatch_guard.py) and the trusted
comparisons (verify.py) catch at run time what a source check misses. Each rule below names
the hack it closes; docs/JUDGE.md maps hacks to rules.
"""
from __future__ import annotations

import ast
import re

# Rationale: the only modules a kernel wrapper needs. Everything else is a way around the
# judge: os/sys/gc/inspect read the harness, threading/multiprocessing run work after
# return, numpy/scipy compute outside the dispatcher, importlib/ctypes load arbitrary code,
# time lets code behave differently while timed, `model` is the reference itself.
ALLOWED_IMPORTS = {"torch", "torch.nn", "torch.nn.functional", "math", "typing",
                   "caf_ext", "functools", "dataclasses", "__future__"}

# Rationale: torch entry points that run compute without dispatching aten ops to the guard
# (compile/jit/fx/export generate their own kernels), switch the guard off (utils, library,
# overrides, _C), load native code (classes.load_library, like ops.load_library), or reach
# other processes (multiprocessing, distributed, hub).
BANNED_TORCH_ATTRS = {"compile", "jit", "fx", "export", "utils", "library", "ops",
                      "overrides", "multiprocessing", "distributed", "hub", "package",
                      "testing", "backends", "_dynamo", "_inductor", "_C", "classes"}

# Rationale: builtins that read or rewrite the harness, load code, or touch files.
BANNED_CALLS = {"eval", "exec", "compile", "open", "__import__", "getattr", "setattr",
                "delattr", "globals", "locals", "vars", "breakpoint", "input", "memoryview"
                }

ALLOWED_DUNDER = {"__init__", "__name__"}

# Rationale: modules that hand out the interpreter, the process or the harness. torch's own
# modules import them (`torch.os`, `torch.sys.modules[...]`, `torch.serialization.os.system`
# are plain public attributes), so an attribute of one of these names is refused wherever it
# appears: no kernel wrapper names its own attribute `os` or `sys`.
INTERPRETER_MODULES = {
    "os", "sys", "subprocess", "socket", "builtins", "importlib", "ctypes", "gc", "inspect",
    "threading", "multiprocessing", "shutil", "pathlib", "pickle", "marshal",
    "runpy", "pty", "mmap", "fcntl", "tempfile", "posix", "sysconfig", "site",
    "traceback", "linecache", "concurrent", "asyncio", "selectors",
}  # not `select` (Tensor.select is a view) nor `signal` (torch.signal is torch's own)
# Roots through which a submission names its own members (self._make_layer(...)).
OWN_ROOTS = {"self", "cls", "super"}


def _module_internals() -> set[str]:
    """Private names of torch.nn.Module (its hooks, parameter dicts, _apply, ...): a
    submission may not use them even if it defines a member of the same name."""
    try:
        import torch
        return {n for n in dir(torch.nn.Module) if n.startswith("_")} | \
            {n for n in vars(torch.nn.Module()) if n.startswith("_")}
    except Exception:  # no torch where the checks run: every private nn.Module name refused
        return {"_parameters", "_buffers", "_modules", "_forward_hooks", "_forward_pre_hooks",
                "_backward_hooks", "_state_dict_hooks", "_apply", "_call_impl", "_version"}


def _own_names(tree) -> set[str]:
    """Private names the submission itself defines: methods and class attributes of its
    classes, and attributes it assigns on self (what KernelBench's level-3 references do:
    self._make_layer(...), self._make_stage(...))."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(item.name)
                elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                    for t in (item.targets if isinstance(item, ast.Assign) else [item.target]):
                        if isinstance(t, ast.Name):
                            names.add(t.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and \
                isinstance(node.value, ast.Name) and node.value.id == "self":
            names.add(node.attr)
    own = {n for n in names if n.startswith("_") and not (n.startswith("__") and n.endswith("__"))}
    return own - _module_internals() if own else own


def check_python(source: str, filename: str = "model_new.py") -> list[str]:
    """Returns the rule violations of a model_new.py source (empty when clean)."""
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as e:
        return [f"syntax error in {filename} line {e.lineno}: {e.msg}"]
    problems: list[str] = []
    has_model_new = False
    module_aliases: set[str] = set()
    own = _own_names(tree)
    for node in ast.walk(tree):
        line = getattr(node, "lineno", "?")
        where = f"{filename}:{line}"
        if isinstance(node, ast.Import):
            for a in node.names:
                _check_import(a.name, where, problems)
                module_aliases.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            mod = "." * node.level + (node.module or "")
            _check_import(mod, where, problems)
            for a in node.names:
                if mod == "torch" and a.name in BANNED_TORCH_ATTRS:
                    problems.append(f"{where}: `from torch import {a.name}` is not allowed")
                module_aliases.add(a.asname or a.name)
        elif isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            problems.append(f"{where}: try/except is not allowed in model_new.py "
                            "(no fallbacks: a kernel either works or fails verification)")
        elif isinstance(node, ast.ClassDef):
            if node.name == "ModelNew":
                has_model_new = True
            for base in node.bases:
                if _root_name(base) in {"Model"} or _attr_tail(base) == "Model":
                    problems.append(f"{where}: class {node.name} subclasses the reference Model")
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("_") and node.attr not in ALLOWED_DUNDER and \
                    not (node.attr in own and _root_name(node.value) in OWN_ROOTS):
                problems.append(f"{where}: access to private attribute `.{node.attr}`")
            if node.attr in INTERPRETER_MODULES:
                problems.append(f"{where}: `.{node.attr}` reaches the interpreter or the "
                                "process (modules like os/sys are not allowed, however reached)")
            if _root_name(node.value) == "torch" and _first_attr(node) in BANNED_TORCH_ATTRS:
                problems.append(f"{where}: torch.{_first_attr(node)} is not allowed")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in BANNED_CALLS:
                problems.append(f"{where}: call to `{node.func.id}` is not allowed")
        elif isinstance(node, ast.Name) and node.id in {"__builtins__", "__import__"}:
            problems.append(f"{where}: use of `{node.id}`")
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for t in targets:
                for sub in ast.walk(t):
                    if isinstance(sub, ast.Attribute) and _root_name(sub) in module_aliases:
                        problems.append(f"{where}: assignment to module attribute "
                                        f"`{ast.unparse(sub)}` (monkey-patching)")
                    if isinstance(sub, ast.Name) and sub.id in module_aliases and \
                            not isinstance(node, ast.AnnAssign):
                        problems.append(f"{where}: rebinding imported module `{sub.id}`")
        if isinstance(node, ast.Global):
            problems.append(f"{where}: `global` is not allowed (state across calls)")
    if not has_model_new:
        problems.append(f"{filename}: no `class ModelNew` defined")
    return problems


def _check_import(mod: str, where: str, problems: list[str]) -> None:
    if mod not in ALLOWED_IMPORTS:
        problems.append(f"{where}: import of `{mod}` is not allowed "
                        f"(allowed: {', '.join(sorted(ALLOWED_IMPORTS - {'__future__'}))})")


def _root_name(node) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else None


def _first_attr(node: ast.Attribute) -> str:
    while isinstance(node.value, ast.Attribute):
        node = node.value
    return node.attr


def _attr_tail(node) -> str | None:
    return node.attr if isinstance(node, ast.Attribute) else None


# ---- C++ / CUDA -------------------------------------------------------------------------

# Rationale: each of these reaches outside the kernel: processes (system, popen, fork, exec,
# posix_spawn), files (fopen, open, fstream), the network (socket, connect), loaders (dlopen),
# raw syscalls (syscall, asm), and threads that outlive the call (std::thread, std::async,
# pthread_create; OpenMP is the sanctioned CPU parallelism).
CPP_BANNED_PATTERNS = [
    (r"\bsystem\s*\(", "system()"), (r"\bpopen\s*\(", "popen()"),
    (r"\bv?fork\s*\(", "fork()"), (r"\bexec[lv]p?e?\s*\(", "exec*()"),
    (r"\bposix_spawnp?\b", "posix_spawn"), (r"\bsocket\s*\(", "socket()"),
    (r"\bconnect\s*\(", "connect()"), (r"\bf?open(at)?(64)?\s*\(", "open()/fopen()"),
    (r"\bstd::[io]?fstream\b", "std::fstream"), (r"\bdlopen\s*\(|\bdlsym\s*\(", "dlopen()"),
    (r"\bsyscall\s*\(", "syscall()"), (r"\b(__)?asm(__)?\b", "inline asm"),
    (r"\bstd::(thread|jthread|async)\b", "std::thread/std::async"),
    (r"\bpthread_create\s*\(", "pthread_create()"), (r"\bkill\s*\(", "kill()"),
    (r"\bgetenv\s*\(", "getenv()"), (r"\bmmap\s*\(", "mmap()"),
]
CPP_BANNED_INCLUDES = re.compile(
    r"#\s*include\s*[<\"](fstream|thread|future|sys/socket\.h|netinet/.*|arpa/.*|unistd\.h|"
    r"dlfcn\.h|spawn\.h|sys/mman\.h|sys/syscall\.h|torch/extension\.h|pybind11/.*|Python\.h|"
    r"torch/torch\.h|ATen/ATen\.h|ATen/Functions\.h)[>\"]")

# Rationale: torch::/at:: names a kernel may use: types, allocation, accessors, device
# plumbing. GEMM and convolution entry points are allowed because they run cuBLAS/cuDNN (the
# two libraries SKILL.md permits); every other at::/torch:: function is a torch fallback.
CPP_ALLOWED_TORCH_NAMES = {
    "Tensor", "TensorOptions", "ScalarType", "Scalar", "Device", "DeviceType", "IntArrayRef",
    "Half", "BFloat16", "Layout", "MemoryFormat", "TensorAccessor", "PackedTensorAccessor32",
    "PackedTensorAccessor64", "RestrictPtrTraits", "DefaultPtrTraits", "optional", "cuda",
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "kFloat", "kHalf",
    "kBFloat16", "kDouble", "kInt", "kLong", "kByte", "kBool", "kChar", "kShort", "kFloat32",
    "kFloat16", "kFloat64", "kInt32", "kInt64", "kCUDA", "kCPU", "kStrided", "dtype", "device",
    "Library", "OptionalDeviceGuard", "DeviceGuard", "cuda_stream", "check", "irange",
    "mm", "addmm", "bmm", "baddbmm", "matmul", "convolution", "conv1d", "conv2d", "conv3d",
    "cudnn_convolution", "native", "IValue", "ArrayRef", "TensorList", "SymInt", "Dispatcher",
    "get_num_threads", "parallel_for", "c10", "detail",
}
_TORCH_NAME = re.compile(r"\b(?:torch|at)::(\w+)")
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_STRINGS = re.compile(r'"(?:\\.|[^"\\\n])*"')


def check_cpp(source: str, filename: str) -> list[str]:
    """Returns the rule violations of one C++/CUDA source (empty when clean)."""
    code = _STRINGS.sub('""', _COMMENTS.sub(" ", source))
    problems = []
    for m in CPP_BANNED_INCLUDES.finditer(code):
        problems.append(f"{filename}: #include <{m.group(1)}> is not allowed "
                        "(use \"caf_kernel.h\"; no files, threads, processes or sockets)")
    for pattern, what in CPP_BANNED_PATTERNS:
        m = re.search(pattern, code)
        if m:
            line = code.count("\n", 0, m.start()) + 1
            problems.append(f"{filename}:{line}: {what} is not allowed in kernels")
    for m in _TORCH_NAME.finditer(code):
        if m.group(1) not in CPP_ALLOWED_TORCH_NAMES:
            line = code.count("\n", 0, m.start()) + 1
            problems.append(f"{filename}:{line}: torch compute op `{m.group(0)}` in C++ "
                            "(write the kernel; only allocation, accessors, cuBLAS GEMM and "
                            "cuDNN convolution are allowed)")
    return problems


CPP_SUFFIXES = (".cpp", ".cc", ".cu", ".cuh", ".h", ".hpp")


def check_files(files: dict[str, str]) -> list[str]:
    """Checks every submitted file; paths were already validated by the caller."""
    problems = []
    if "model_new.py" not in files:
        problems.append("model_new.py is missing")
    for path, text in sorted(files.items()):
        if path == "model_new.py":
            problems += check_python(text, path)
        elif path.endswith(CPP_SUFFIXES):
            problems += check_cpp(text, path)
        elif path.endswith(".py"):
            problems.append(f"{path}: Python files in kernels/ are not allowed")
    return problems
