"""The judge's hold kernel (judge_kernels/hold.cu): built once per build root with nvcc, loaded
with ctypes in each evaluation child.

Before each timed call the timer queues the hold (every SM's thread slots filled, spinning for
`hold_ms`) and then the start event: the GPU is busy while the host launches the call, so the
event time holds no host launch latency, and a side stream the submission uses cannot start
work before the hold ends. A GPU spin of one thread (torch._C._cuda_sleep) would not do: a
side stream's kernels would run beside it, before the start event, unseen.
"""
from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "judge_kernels", "hold.cu")
ENV_LIB = "CAF_EVAL_HOLD_LIB"  # the worker tells its children where the built library is
# Rationale: a tiny .cu compiles in ~1-2 s; a minute covers a loaded host.
BUILD_TIMEOUT_S = 120.0


def build(build_root: str) -> tuple[str | None, str]:
    """Builds (or finds built) the hold library under build_root; (path or None, log)."""
    from . import build as b
    try:
        tc = b.Toolchain("cuda", True)
    except Exception as e:  # no CUDA toolkit, a malformed TORCH_CUDA_ARCH_LIST
        return None, f"hold kernel not built: {e}"
    with open(SOURCE, "rb") as f:
        src = f.read()
    cmd_tail = ["-O2", "-shared", "-Xcompiler", "-fPIC", *tc.arch]
    key = hashlib.sha256(src + "|".join([*tc.nvcc, *cmd_tail]).encode()).hexdigest()[:16]
    out_dir = os.path.join(build_root, "judge-hold", key)
    lib = os.path.join(out_dir, "libcaf_hold.so")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(os.path.join(out_dir, "ok")):
            return lib, "cached"
        import time
        ok, log, _ = b._run([*tc.nvcc, *cmd_tail, SOURCE, "-o", lib], out_dir,
                            time.monotonic() + BUILD_TIMEOUT_S)
        if not ok:
            return None, f"hold kernel failed to build:\n{log[-4000:]}"
        with open(os.path.join(out_dir, "ok"), "w") as f:
            f.write(key)
        return lib, "built"


class Hold:
    """The loaded hold for one device. Raises RuntimeError when it cannot fill the SMs."""

    def __init__(self, library: str, device_index: int):
        lib = ctypes.CDLL(library)
        self._geometry = lib.caf_hold_geometry
        self._geometry.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
        self._geometry.restype = ctypes.c_int
        self._hold = lib.caf_hold
        self._hold.argtypes = [ctypes.c_int, ctypes.c_ulonglong, ctypes.c_int, ctypes.c_int,
                               ctypes.c_ulonglong]
        self._hold.restype = ctypes.c_int
        self.device = device_index
        threads, blocks = ctypes.c_int(0), ctypes.c_int(0)
        rc = self._geometry(device_index, ctypes.byref(threads), ctypes.byref(blocks))
        if rc != 0:
            raise RuntimeError(f"hold kernel: no geometry that fills every SM (code {rc})")
        self.threads, self.blocks = threads.value, blocks.value

    def __call__(self, ms: float, stream: int) -> None:
        rc = self._hold(self.device, max(1, int(ms * 1e6)), self.threads, self.blocks, stream)
        if rc != 0:
            raise RuntimeError(f"hold kernel launch failed (CUDA error {rc})")
