"""Device-to-device transfer of the child's CUDA tensors to the worker (CUDA IPC).

What the child sends back on a GPU (check outputs and inputs after each check, sampled
timed outputs, the sampled input sets) otherwise crosses the host: GPU -> host -> sealed
memfd -> host -> GPU, ~0.1 s per 32-64 MiB on the H200 host (2026-12-01), most of a 32 MB
task's profile. Here the child exports the allocation holding the tensor (cuIpcGetMemHandle:
a 64-byte handle) and sends the handle, the tensor's offset in the allocation and its size;
the worker maps the allocation (cuIpcOpenMemHandle), checks the region against the
allocation's real bounds (cuMemGetAddressRange), copies the bytes into its own memory on the
device and unmaps it before it reads the next frame. The child keeps the tensors alive until
its next request.

Direction and trust. Only the child exports, only the worker maps: the worker's memory (the
reference's weights and outputs) is never exported, and an export hands over a whole
allocation of the caching allocator (other tensors of the same segment come with it), so the
other direction would show the child what the judge keeps from it. What the worker maps is
the child's own memory, which the child controls anyway; the worker only copies out of it
and every claim (dtype, shape, bytes, offset, total size per frame) is checked as the memfd
path checks its regions. A handle that does not open (garbage, or IPC not available on this
host) is not held against the child: the worker asks for those tensors again over the memfd
path (`resend`) and stops asking for IPC (the child cannot make the judge accept anything
this way, only slower). The driver API is called through ctypes on libcuda (no torch
internals: torch's own CUDA sharing needs a shared-memory reference-count file, which the
child's system-call filter refuses to create).
"""
from __future__ import annotations

import ctypes
import os

from .protocol import FrameInvalid

# Rationale: the memfd path's bound (shm_transport.MAX_ARENA_BYTES): a frame whose tensors
# add up to more is a runaway or a lie, refused before any memory is allocated for it.
MAX_FRAME_BYTES = 16 << 30
HANDLE_BYTES = 64
CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1
KEY = "__ipc__"


class IpcUnavailable(Exception):
    """CUDA IPC failed for a reason that is not a lie about sizes (the tensor goes by memfd)."""


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_byte * HANDLE_BYTES)]


_api: dict = {}


def _driver():
    """libcuda's functions (the _v2 entry points where cuda.h maps the name to one)."""
    if not _api:
        lib = ctypes.CDLL("libcuda.so.1")
        for name, alts in (("get", ("cuIpcGetMemHandle",)),
                           ("open", ("cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle")),
                           ("close", ("cuIpcCloseMemHandle",)),
                           ("range", ("cuMemGetAddressRange_v2", "cuMemGetAddressRange"))):
            for a in alts:
                if hasattr(lib, a):
                    f = getattr(lib, a)
                    f.restype = ctypes.c_int
                    _api[name] = f
                    break
            else:
                raise IpcUnavailable(f"libcuda has no {alts[0]}")
        _api["get"].argtypes = [ctypes.POINTER(_Handle), ctypes.c_uint64]
        _api["open"].argtypes = [ctypes.POINTER(ctypes.c_uint64), _Handle, ctypes.c_uint]
        _api["close"].argtypes = [ctypes.c_uint64]
        _api["range"].argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t),
                                  ctypes.c_uint64]
    return _api


def wanted(device: str) -> bool:
    """IPC for this worker's children: CUDA devices, unless CAF_EVAL_IPC=0."""
    return str(device).startswith("cuda") and os.environ.get("CAF_EVAL_IPC", "1") != "0"


# ---- child (exporter) --------------------------------------------------------------------

def export(t) -> tuple[dict, object]:
    """(map, the tensor to keep alive until the next request) for a CUDA tensor; raises
    IpcUnavailable when it cannot be exported (the caller sends it by memfd instead)."""
    c = t.detach().contiguous()
    nbytes = c.numel() * c.element_size()
    if nbytes == 0:
        raise IpcUnavailable("empty tensor")
    api = _driver()
    base, size = ctypes.c_uint64(0), ctypes.c_size_t(0)
    rc = api["range"](ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(c.data_ptr()))
    if rc:
        raise IpcUnavailable(f"cuMemGetAddressRange: error {rc}")
    h = _Handle()
    rc = api["get"](ctypes.byref(h), base)
    if rc:
        raise IpcUnavailable(f"cuIpcGetMemHandle: error {rc}")
    m = {KEY: 1, "dtype": str(c.dtype).removeprefix("torch."), "shape": list(c.shape),
         "handle": ctypes.string_at(ctypes.addressof(h), HANDLE_BYTES),
         "off": c.data_ptr() - base.value, "nbytes": nbytes}
    return m, c


# ---- worker (importer) -------------------------------------------------------------------

def maps(obj) -> list:
    """The IPC tensor maps of a reply (anywhere in it)."""
    found, stack = [], [obj]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if KEY in v:
                found.append(v)
            else:
                stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return found


def check(ms: list) -> None:
    """Every claim of a reply's IPC maps, before anything is mapped: dtype allowlisted, shape
    a list of sizes whose bytes equal nbytes, a 64-byte handle, a non-negative offset, and all
    of them together within MAX_FRAME_BYTES. FrameInvalid otherwise."""
    from .shm_transport import _expected_bytes
    total = 0
    for m in ms:
        want = _expected_bytes(m)
        off, n, h = m.get("off"), m.get("nbytes"), m.get("handle")
        if type(off) is not int or type(n) is not int or off < 0 or n != want or n == 0:
            raise FrameInvalid(f"device tensor {str(m.get('shape'))[:80]} {str(m.get('dtype'))[:20]}: "
                               f"region ({str(off)[:20]}, {str(n)[:20]}) does not hold {want} bytes")
        if not isinstance(h, bytes) or len(h) != HANDLE_BYTES:
            raise FrameInvalid("device tensor: the handle is not 64 bytes")
        total += n
    if total > MAX_FRAME_BYTES:
        raise FrameInvalid(f"device tensors of {total} bytes in one reply exceed {MAX_FRAME_BYTES}")


class _Region:
    """__cuda_array_interface__ of a byte range (torch.as_tensor maps it without a copy)."""

    def __init__(self, ptr: int, n: int):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 2}


def import_copy(m: dict, device: str):
    """The bytes of a checked IPC map, copied into this process's memory on `device`, as a
    torch.uint8 tensor; the mapping is closed before returning. IpcUnavailable when the
    handle does not open; FrameInvalid when the region lies outside the allocation."""
    import torch
    api = _driver()
    h = _Handle.from_buffer_copy(m["handle"])
    base = ctypes.c_uint64(0)
    rc = api["open"](ctypes.byref(base), h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
    if rc:
        raise IpcUnavailable(f"cuIpcOpenMemHandle: error {rc}")
    try:
        b2, size = ctypes.c_uint64(0), ctypes.c_size_t(0)
        rc = api["range"](ctypes.byref(b2), ctypes.byref(size), base)
        if rc or b2.value != base.value:
            raise IpcUnavailable(f"cuMemGetAddressRange on the mapped handle: error {rc}")
        if m["off"] + m["nbytes"] > size.value:
            raise FrameInvalid(f"device tensor region ({m['off']}, {m['nbytes']}) outside its "
                               f"allocation of {size.value} bytes")
        with torch.cuda.device(torch.device(device)):
            view = torch.as_tensor(_Region(base.value + m["off"], m["nbytes"]), device=device)
            try:
                out = view.clone()
            except torch.OutOfMemoryError:
                raise FrameInvalid(f"device tensor of {m['nbytes']} bytes: no memory to copy it") from None
            torch.cuda.synchronize(device)  # the copy is done before the mapping goes
            del view
    finally:
        api["close"](base)
    return out


def resolve(rep: dict, device: str, resend) -> tuple[int, int]:
    """Replaces every IPC map of a reply by {"__tensor__", "dtype", "shape", "data": <uint8
    tensor on device>} (protocol.decode_tensor takes it as it is). resend(ids) asks the child
    for the tensors whose handles did not open, over memfd, and returns their tensor maps in
    that order. Returns (tensors copied device to device, tensors resent by memfd)."""
    ms = maps(rep)
    if not ms:
        return 0, 0
    check(ms)
    failed = []
    for m in ms:
        try:
            data = import_copy(m, device)
        except IpcUnavailable:
            failed.append(m)
            continue
        except (RuntimeError, TypeError, ValueError) as e:  # torch refusing the mapped pointer
            if isinstance(e, FrameInvalid):
                raise
            failed.append(m)
            continue
        _replace(m, {"__tensor__": 1, "dtype": m["dtype"], "shape": m["shape"], "data": data})
    if failed:
        if not all(type(m.get("id")) is int for m in failed):
            raise FrameInvalid("device tensor without an id")
        got = resend([m["id"] for m in failed])
        if not isinstance(got, list) or len(got) != len(failed):
            raise FrameInvalid("the evaluation process sent an invalid reply (resend)")
        for m, t in zip(failed, got):
            if not isinstance(t, dict) or "__tensor__" not in t or t.get("dtype") != m["dtype"] \
                    or t.get("shape") != m["shape"]:
                raise FrameInvalid("the evaluation process resent another tensor than it announced")
            _replace(m, t)
    return len(ms) - len(failed), len(failed)


def _replace(m: dict, new: dict) -> None:
    m.clear()
    m.update(new)
