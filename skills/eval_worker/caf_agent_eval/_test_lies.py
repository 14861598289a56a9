"""Tests only: a child that lies about the tensors of a call's reply, so the suite can check
that the worker answers each lie with a failed verdict (tests/reward_hacks/test_transport.py).
Reached only with CAF_EVAL_TEST_HOOKS=1 in the worker's environment (child._test_lie).

Modes: shape, dtype (lying header); unsealed, truncated, no_fd, pipe_fd, overlap (bad
arena); garbage (a frame that is not msgpack); slow_clock (every time this process reports
runs at 1/20 of real time, as a clock slowed by native code would make it), events_only (only
the event times, which the reward is computed from, are 1/20 of the truth).
"""
from __future__ import annotations

import fcntl
import os

from . import protocol, shm_transport

CLOCK_FACTOR = 0.05


def write_lying_frame(fd_out: int, fd_sock, reply: dict, mode: str) -> None:
    """Writes reply, lying as mode says if it carries outputs (else honestly)."""
    if mode in ("slow_clock", "events_only"):
        if "primary" in reply:
            keys = ("primary",) if mode == "events_only" else \
                ("primary", "wall", "launch", "gap", "ref_gap")
            reply = dict(reply, **{k: [x * CLOCK_FACTOR for x in reply[k]] for k in keys
                                   if isinstance(reply.get(k), list)})
            if mode == "slow_clock" and "span_ms" in reply:
                reply["span_ms"] *= CLOCK_FACTOR
        return protocol.write_frame(fd_out, reply, fd_sock)
    if "outputs" not in reply or not reply["outputs"] or reply["outputs"][0] is None:
        return protocol.write_frame(fd_out, reply, fd_sock)
    if mode == "garbage":
        os.write(fd_out, b"\x00\x00\x00\x08\xc1\xc1\xc1\xc1\xc1\xc1\xc1\xc1")
        return None
    obj, arena = shm_transport.stage(reply, seal=(mode != "unsealed"))
    first = obj["outputs"][0]
    if mode == "shape":
        first["shape"] = [2 * x for x in first["shape"]]
    elif mode == "dtype":
        first["dtype"] = "Tensor"
    elif mode == "overlap" and arena is not None:
        obj["inputs_after"][0]["off"] = first["off"]
    if arena is not None:
        if mode == "truncated":  # re-create it shorter (sealed), announcing the old size
            short = os.memfd_create("lie", os.MFD_ALLOW_SEALING)
            os.ftruncate(short, obj["__arena__"] // 2)
            fcntl.fcntl(short, fcntl.F_ADD_SEALS, shm_transport.SEALS)
            os.close(arena)
            arena = short
        if mode == "pipe_fd":
            r, w = os.pipe()
            os.close(w)
            os.close(arena)
            arena = r
        if mode != "no_fd":
            shm_transport.send_fd(fd_sock, arena)
        os.close(arena)
    protocol.write_frame(fd_out, obj)  # already staged: written as it is
    return None
