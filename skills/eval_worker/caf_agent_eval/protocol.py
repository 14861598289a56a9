"""Frames and values exchanged by the worker, its owner, and its child.

A frame is a 4-byte big-endian length followed by a msgpack map. Tensors travel as
maps {"__tensor__": 1, "dtype", "shape", "data"} holding the raw bytes of a
contiguous CPU copy, so any dtype (bf16 included) round-trips exactly.
"""
from __future__ import annotations

import os
import select
import struct
import time

import msgpack

# Rationale: 4 GiB is the 4-byte length's limit; a frame near it means a runaway output.
MAX_FRAME_BYTES = (1 << 32) - 1


class FrameError(Exception):
    """The peer closed the stream, sent garbage, or missed a deadline."""


class FrameTimeout(FrameError):
    """No complete frame arrived before the deadline."""


class FrameEOF(FrameError):
    """The peer closed its end (it exited or crashed)."""


def pack(obj) -> bytes:
    """Encodes obj as one frame."""
    payload = msgpack.packb(obj, use_bin_type=True)
    if len(payload) > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {len(payload)} bytes exceeds the limit")
    return struct.pack(">I", len(payload)) + payload


def write_frame(fd: int, obj) -> None:
    """Writes one frame to a raw file descriptor."""
    data = memoryview(pack(obj))
    while data:
        n = os.write(fd, data)
        data = data[n:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, left = [], n
    while left:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0:
                raise FrameTimeout("deadline passed while waiting for a frame")
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                raise FrameTimeout("deadline passed while waiting for a frame")
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise FrameEOF("peer closed the stream")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, deadline: float | None = None, max_bytes: int = MAX_FRAME_BYTES):
    """Reads one frame; deadline is a time.monotonic() value or None (block)."""
    (length,) = struct.unpack(">I", _read_exact(fd, 4, deadline))
    if length > max_bytes:
        raise FrameError(f"frame of {length} bytes exceeds the limit of {max_bytes}")
    return msgpack.unpackb(_read_exact(fd, length, deadline), raw=False, strict_map_key=False)


# ---- values -----------------------------------------------------------------------------

def encode_tensor(t) -> dict:
    """A CPU byte copy of a plain tensor (the caller checks the type first)."""
    import torch
    c = t.detach().to("cpu").contiguous()
    raw = c.reshape(-1).view(torch.uint8).numpy().tobytes() if c.numel() else b""
    return {"__tensor__": 1, "dtype": str(c.dtype).removeprefix("torch."),
            "shape": list(c.shape), "data": raw}


def decode_tensor(m: dict, device: str = "cpu"):
    """Inverse of encode_tensor, placed on device."""
    import torch
    dtype = getattr(torch, m["dtype"])
    if m["data"]:
        flat = torch.frombuffer(bytearray(m["data"]), dtype=torch.uint8).view(dtype)
    else:
        flat = torch.empty(0, dtype=dtype)
    return flat.reshape(m["shape"]).to(device)


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


def decode_value(v, device: str = "cpu"):
    """Inverse of encode_value; tensors are placed on device."""
    if isinstance(v, dict):
        if "__tensor__" in v:
            return decode_tensor(v, device)
        if "__seq__" in v:
            items = [decode_value(x, device) for x in v["__seq__"]]
            return tuple(items) if v.get("tuple") else items
        if "__dict__" in v:
            return {k: decode_value(x, device) for k, x in v["__dict__"].items()}
    return v
