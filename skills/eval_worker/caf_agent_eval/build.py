"""Builds a submission's kernels/** into one extension library, cached by content hash.

The library registers its ops under the `caf_ext` namespace (TORCH_LIBRARY_FRAGMENT, see
skills/workspace/include/caf_kernel.h) and is loaded with torch.ops.load_library, so one
fixed name works for every submission (each child process loads exactly one).
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
from dataclasses import dataclass

from .static_checks import CPP_SUFFIXES

INFRA_INCLUDE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "workspace", "include")

# Rationale: compiler output beyond 16 KiB is noise to the agent (the first errors matter)
# and would bloat every verdict and trajectory.
LOG_CAP_BYTES = 16 * 1024

# Rationale: -O3 is what a kernel engineer would ship. nvcc's -O sets the optimisation of the
# *host* code of a .cu only (cicc and ptxas optimise device code at their defaults either way,
# see `nvcc -dryrun`); host -O1 was tried and did not shorten the compile on the H200
# (2026-11-30: host gcc phase 4.3 s at -O1 vs 4.5 s at -O3, total 14.8 vs 14.4 s), so it stays.
CUDA_FLAGS = ["-O3", "-lineinfo", "-DCAF_KERNEL_CUDA"]


@dataclass
class BuildResult:
    """ok: built and loadable; library: path of the .so; log: capped compiler output."""
    ok: bool
    library: str | None
    log: str
    cached: bool = False


def cap_log(text: str, cap: int = LOG_CAP_BYTES) -> str:
    """Keeps the head and the tail of a long log."""
    if len(text) <= cap:
        return text
    half = cap // 2
    return text[:half] + f"\n... [{len(text) - cap} bytes cut] ...\n" + text[-half:]


def kernel_sources(files: dict[str, str]) -> dict[str, str]:
    """The kernels/** entries of a submission."""
    return {p: t for p, t in files.items() if p.startswith("kernels/") and p.endswith(CPP_SUFFIXES)}


def content_hash(files: dict[str, str], flavour: str) -> str:
    """Hash of everything that determines the library (sources, infra header, torch)."""
    import torch
    h = hashlib.sha256()
    h.update(f"{flavour}|{torch.__version__}|".encode())
    with open(os.path.join(INFRA_INCLUDE, "caf_kernel.h"), "rb") as f:
        h.update(f.read())
    for path, text in sorted(kernel_sources(files).items()):
        h.update(path.encode() + b"\0" + text.encode() + b"\0")
    return h.hexdigest()[:24]


def build(files: dict[str, str], flavour: str, build_root: str, verbose: bool = False) -> BuildResult:
    """Builds (or reuses) the library for these files; never raises on a compile error."""
    sources = kernel_sources(files)
    if not any(p.endswith((".cpp", ".cc", ".cu")) for p in sources):
        return BuildResult(True, None, "no kernel sources: nothing to build")
    key = content_hash(files, flavour)
    out_dir = os.path.join(build_root, key)
    lib = os.path.join(out_dir, "caf_ext.so")
    os.makedirs(build_root, exist_ok=True)
    with open(os.path.join(build_root, key + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(os.path.join(out_dir, "ok")):
            return BuildResult(True, lib, "cached build", cached=True)
        shutil.rmtree(out_dir, ignore_errors=True)
        src_dir = os.path.join(out_dir, "src")
        for path, text in sources.items():
            dst = os.path.join(src_dir, path)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(dst, "w") as f:
                f.write(text)
        compiled = [os.path.join(src_dir, p) for p in sorted(sources)
                    if p.endswith((".cpp", ".cc", ".cu"))]
        ok, log = _compile(compiled, out_dir, flavour, verbose)
        if ok:
            with open(os.path.join(out_dir, "ok"), "w") as f:
                f.write(key)
        return BuildResult(ok, lib if ok else None, cap_log(log))


def _compile(sources: list[str], out_dir: str, flavour: str, verbose: bool):
    from torch.utils import cpp_extension
    cuda = flavour == "cuda" or any(s.endswith(".cu") for s in sources)
    # Rationale: -O3 is what a kernel engineer would ship; OpenMP is the CPU flavour's
    # sanctioned parallelism. No fast-math: it changes results beyond the tolerance silently.
    cflags = ["-O3", "-fopenmp", "-DCAF_KERNEL_CPU" if not cuda else "-DCAF_KERNEL_CUDA"]
    try:
        cpp_extension.load(
            name="caf_ext", sources=sources, build_directory=out_dir,
            extra_include_paths=[INFRA_INCLUDE, os.path.join(out_dir, "src", "kernels")],
            extra_cflags=cflags, extra_ldflags=["-fopenmp"],
            extra_cuda_cflags=CUDA_FLAGS if cuda else None,
            with_cuda=cuda, is_python_module=False, verbose=verbose)
    except Exception as e:  # the compiler's message is the agent's feedback
        return False, f"compile failed:\n{e}"
    return True, "compiled"


def load(library: str | None) -> None:
    """Loads a built library into this process (registers the caf_ext ops)."""
    if library:
        import torch
        torch.ops.load_library(library)
