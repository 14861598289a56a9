"""Frames and values exchanged by the worker, its owner, and its child.

A frame is a 4-byte big-endian length followed by a msgpack map. Tensors travel as
maps {"__tensor__": 1, "dtype", "shape", "data"} holding the raw bytes of a
contiguous CPU copy, so any dtype (bf16 included) round-trips exactly. Between the worker
and its child (an fd socket given to write_frame/read_frame), large tensors' bytes travel
out of band in a sealed memfd instead (shm_transport.py) and every tensor map is checked.
"""
from __future__ import annotations

import fcntl
import mmap
import os
import select
import struct
import time
import warnings

import msgpack

# Rationale: 4 GiB is the 4-byte length's limit; a frame near it means a runaway output.
MAX_FRAME_BYTES = (1 << 32) - 1
# Rationale: Linux's default unprivileged maximum (/proc/sys/fs/pipe-max-size); 16x the
# 64 KiB default, so a tensor frame crosses in fewer context switches.
PIPE_BYTES = 1 << 20
# Rationale: one read syscall moves at most this much; large enough to drain a full pipe.
READ_CHUNK = 4 << 20
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


class FrameError(Exception):
    """The peer closed the stream, sent garbage, or missed a deadline."""


class FrameTimeout(FrameError):
    """No complete frame arrived before the deadline."""


class FrameEOF(FrameError):
    """The peer closed its end (it exited or crashed)."""


class FrameInvalid(FrameError):
    """The peer sent a malformed frame, a lying tensor header or a bad arena descriptor."""


class StageFailed(Exception):
    """The sender could not put its own frame's tensors into an arena (memfd_create, its
    writes or its seals failed): the sender's failure, never the peer's. Not an OSError, so
    that a caller which takes an OSError from writing for the peer having gone does not take
    this for it."""


def pack(obj) -> bytes:
    """Encodes obj as one frame."""
    payload = msgpack.packb(obj, use_bin_type=True)
    if len(payload) > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {len(payload)} bytes exceeds the limit")
    return struct.pack(">I", len(payload)) + payload


def grow_pipe(fd: int) -> None:
    """Enlarges a pipe's kernel buffer (best effort; not every fd is a pipe)."""
    try:
        fcntl.fcntl(fd, F_SETPIPE_SZ, PIPE_BYTES)
    except OSError:
        pass


def write_frame(fd: int, obj, fd_sock=None) -> None:
    """Writes one frame to a raw file descriptor (header and payload without joining them).
    With fd_sock (a Unix socket), large tensors go out of band: their arena's descriptor is
    queued on fd_sock before the frame is written."""
    if fd_sock is not None:
        from . import shm_transport
        try:
            obj, arena_fd = shm_transport.stage(obj)
        except OSError as e:
            raise StageFailed(f"staging a frame's tensors in a memory file: {e}") from e
        if arena_fd is not None:
            try:
                shm_transport.send_fd(fd_sock, arena_fd)
            finally:
                os.close(arena_fd)
    payload = msgpack.packb(obj, use_bin_type=True)
    if len(payload) > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {len(payload)} bytes exceeds the limit")
    for data in (memoryview(struct.pack(">I", len(payload))), memoryview(payload)):
        while data:
            n = os.write(fd, data)
            data = data[n:]


def _read_exact(fd: int, n: int, deadline: float | None):
    # Rationale: a large frame lands in an anonymous mapping, whose pages the kernel commits
    # only as data arrives, so a peer that announces 4 GiB and sends nothing costs no memory.
    buf = bytearray(n) if n <= (1 << 20) else mmap.mmap(-1, n)
    view, got = memoryview(buf), 0
    while got < n:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0:
                raise FrameTimeout("deadline passed while waiting for a frame")
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                raise FrameTimeout("deadline passed while waiting for a frame")
        k = os.readv(fd, [view[got:got + READ_CHUNK]])
        if not k:
            raise FrameEOF("peer closed the stream")
        got += k
    view.release()
    return buf


def read_frame(fd: int, deadline: float | None = None, max_bytes: int = MAX_FRAME_BYTES,
               fd_sock=None):
    """Reads one frame; deadline is a time.monotonic() value or None (block). With fd_sock
    every tensor map is checked and out-of-band bytes are copied in (shm_transport.resolve)."""
    (length,) = struct.unpack(">I", _read_exact(fd, 4, deadline))
    if length > max_bytes:
        raise FrameError(f"frame of {length} bytes exceeds the limit of {max_bytes}")
    try:
        obj = msgpack.unpackb(_read_exact(fd, length, deadline), raw=False, strict_map_key=False)
    except FrameError:
        raise
    except Exception as e:  # msgpack's errors: ExtraData, FormatError, StackError, TypeError
        raise FrameInvalid(f"malformed frame ({type(e).__name__}: {str(e)[:200]})") from None
    if fd_sock is not None:
        from . import shm_transport
        obj = shm_transport.resolve(obj, fd_sock)
    return obj


# ---- values -----------------------------------------------------------------------------

def encode_tensor(t) -> dict:
    """A CPU byte view of a plain tensor (the caller checks the type first). The bytes are
    copied when the value is packed, which the callers do before any other code runs."""
    import torch
    c = t.detach().to("cpu").contiguous()
    raw = memoryview(c.reshape(-1).view(torch.uint8).numpy()) if c.numel() else b""
    return {"__tensor__": 1, "dtype": str(c.dtype).removeprefix("torch."),
            "shape": list(c.shape), "data": raw}


def decode_tensor(m: dict, device: str | None = None):
    """Inverse of encode_tensor, placed on device (always a fresh, writable tensor). The
    bytes of an out-of-band tensor are already a fresh torch.uint8 tensor (no copy on CPU;
    a tensor the worker copied from the child's GPU memory, ipc.py, is on that GPU): with
    device None it stays where it is; inline bytes go to the CPU."""
    import torch
    from .shm_transport import dtype_of
    dtype = dtype_of(m["dtype"])
    if isinstance(m["data"], torch.Tensor):
        t = m["data"].view(dtype).reshape(m["shape"])
        return t if device is None else t.to(device)
    device = device or "cpu"
    if not m["data"]:
        return torch.empty(0, dtype=dtype).reshape(m["shape"]).to(device)
    if str(device).startswith("cpu"):
        flat = torch.frombuffer(bytearray(m["data"]), dtype=torch.uint8)
        return flat.view(dtype).reshape(m["shape"])
    with warnings.catch_warnings():  # read-only bytes: the copy to the device is the only use
        warnings.simplefilter("ignore")
        flat = torch.frombuffer(m["data"], dtype=torch.uint8)
    return flat.view(dtype).reshape(m["shape"]).to(device)


def encode_value(v):
    """Encodes tensors, numbers, strings, lists/tuples and dicts recursively."""
    import torch
    if isinstance(v, torch.Tensor):
        return encode_tensor(v)
    if isinstance(v, (list, tuple)):
        return {"__seq__": [encode_value(x) for x in v], "tuple": isinstance(v, tuple)}
    if isinstance(v, dict):
        return {"__dict__": {str(k): encode_value(x) for k, x in v.items()}}
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise TypeError(f"cannot encode value of type {type(v).__name__}")


def decode_value(v, device: str | None = None):
    """Inverse of encode_value; tensors are placed on device (decode_tensor: None keeps an
    out-of-band tensor where it is, inline bytes go to the CPU)."""
    if isinstance(v, dict):
        if "__tensor__" in v:
            return decode_tensor(v, device)
        if "__seq__" in v:
            items = [decode_value(x, device) for x in v["__seq__"]]
            return tuple(items) if v.get("tuple") else items
        if "__dict__" in v:
            return {k: decode_value(x, device) for k, x in v["__dict__"].items()}
    return v
