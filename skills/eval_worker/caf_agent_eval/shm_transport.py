"""Out-of-band tensor payloads between the worker and its child.

The bytes of a frame's large tensors travel in one sealed memfd (the frame's *arena*), passed
with SCM_RIGHTS over a Unix SOCK_SEQPACKET socket beside the frame pipes; the frame carries
only metadata: {"__tensor__", "dtype", "shape", "off", "nbytes"} per tensor and "__arena__"
(the arena's size) at its top level. The sender sends the descriptor before the frame, so
the receiver finds it queued once the frame has arrived and never waits for it.

The receiver trusts nothing: every tensor map (inline or not) is checked against a dtype
allowlist, its shape against its byte count, every region against the arena's bounds and
the others; the descriptor must be a regular memfd sealed against writes, shrinking and
growth, of exactly the announced size. Only then is each region mapped copy-on-write
(MAP_PRIVATE) as the tensor's storage: F_SEAL_WRITE means no process can change those bytes
any more (write(), shared writable mappings and hole punching are refused by the kernel, and
sealing itself fails while a writable mapping exists), F_SEAL_SHRINK means the mapping can
never fault (SIGBUS) past a truncated end, and the receiver's own writes stay private. Pages
are read lazily, so an oversized lie costs memory only if the receiver reads it (the judge
checks shapes first). Any failure is protocol.FrameInvalid.
"""
from __future__ import annotations

import array
import errno
import fcntl
import mmap
import os
import socket
import stat
import time

from .protocol import FrameInvalid

# Rationale: below 64 KiB the msgpack copy costs less than a memfd's syscalls (~20 us).
INLINE_MAX_BYTES = 64 << 10
# Rationale: 4x the old 4 GiB frame limit: three timing sets of a large task fit; an arena
# announced beyond it is refused before any memory is allocated for it.
MAX_ARENA_BYTES = 16 << 30
# Rationale: mmap offsets must be page aligned (this also aligns every dtype's view).
ALIGN = mmap.ALLOCATIONGRANULARITY
# Rationale: far above any real tensor's rank; bounds the work a lying shape can cause.
MAX_DIMS = 64
POPULATE = getattr(mmap, "MAP_POPULATE", 0)
# Rationale: F_SEAL_WRITE fails with EBUSY while any of the arena's pages holds a reference
# besides the page cache's and its mappings' (the kernel waits ~150 ms for it, then gives
# up): a page the kernel is migrating (compaction, huge-page collapse) or reclaiming holds one
# for a while. Such a reference goes away; on a 2-core CI machine under load an honest child's
# reply once failed that way (which of them held it is not known). Retried with doubling
# pauses up to this total before the sender gives up.
SEAL_RETRY_S = 5.0
SEALS = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
DTYPE_NAMES = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128",
               "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool",
               "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
_dtypes: dict = {}


def dtype_of(name):
    """The torch dtype for an allowlisted name; FrameInvalid otherwise."""
    if not _dtypes:
        import torch
        _dtypes.update({n: getattr(torch, n) for n in DTYPE_NAMES if hasattr(torch, n)})
    if not isinstance(name, str) or name not in _dtypes:
        raise FrameInvalid(f"tensor dtype {str(name)[:40]!r} is not allowed")
    return _dtypes[name]


# ---- sender -----------------------------------------------------------------------------

def stage(obj, seal: bool = True):
    """(frame object, arena fd or None): large tensor maps' bytes moved into a sealed memfd.
    The caller sends the fd (send_fd) before the frame and closes it."""
    if not isinstance(obj, dict):
        return obj, None
    big: list = []

    def walk(v):
        if isinstance(v, dict):
            if "__tensor__" in v and len(v.get("data") or b"") >= INLINE_MAX_BYTES:
                m = {k: x for k, x in v.items() if k != "data"}
                big.append((m, v["data"]))
                return m
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        return v

    out = walk(obj)
    if not big:
        return obj, None
    size = 0
    for m, data in big:
        m["off"], m["nbytes"] = size, len(data)
        size += -(-len(data) // ALIGN) * ALIGN
    fd = os.memfd_create("caf_eval_arena", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, size)
        for m, data in big:
            view, off = memoryview(data).cast("B"), m["off"]
            while view:
                n = os.pwrite(fd, view, off)
                view, off = view[n:], off + n
        if seal:
            seal_arena(fd)
    except BaseException:
        os.close(fd)
        raise
    out["__arena__"] = size
    return out, fd


def seal_arena(fd: int) -> None:
    """Seals an arena against writes, shrinking, growth and further seals; retries while the
    kernel reports its pages busy (SEAL_RETRY_S), then raises OSError(EBUSY) saying so."""
    pause, waited = 0.01, 0.0
    while True:
        try:
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS | fcntl.F_SEAL_SEAL)
            return
        except OSError as e:
            if e.errno != errno.EBUSY or waited >= SEAL_RETRY_S:
                if e.errno == errno.EBUSY:
                    raise OSError(errno.EBUSY, f"sealing a tensor arena: its pages stayed busy "
                                               f"(referenced outside the page cache) for "
                                               f"{waited:.1f} s") from None
                raise
        time.sleep(pause)
        waited += pause
        pause = min(pause * 2, 0.5)


def send_fd(sock: socket.socket, fd: int) -> None:
    """Queues fd on the peer's socket without blocking (a peer that never takes them must
    not hang the sender)."""
    # Rationale: sendmsg, not socket.send_fds, which ignores its flags before Python 3.12.
    try:
        sock.sendmsg([b"A"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))],
                     socket.MSG_DONTWAIT)
    except BlockingIOError:
        raise FrameInvalid("the peer is not taking descriptors (its queue is full)") from None


# ---- receiver ---------------------------------------------------------------------------

def _tensor_maps(obj) -> list:
    found, stack = [], [obj]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if "__tensor__" in v:
                found.append(v)
            else:
                stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return found


def _expected_bytes(m: dict) -> int:
    itemsize = dtype_of(m.get("dtype")).itemsize
    shape = m.get("shape")
    if not isinstance(shape, list) or len(shape) > MAX_DIMS or \
            not all(type(d) is int and d >= 0 for d in shape):
        raise FrameInvalid(f"tensor shape {str(shape)[:80]} is not a list of sizes")
    n = itemsize
    for d in shape:
        n *= d
    return n


def resolve(obj, sock: socket.socket):
    """Checks every tensor map of a received frame and maps out-of-band bytes in (each as a
    private, writable torch.uint8 tensor in the map's "data"). Consumes the frame's arena fd."""
    arena = obj.pop("__arena__", None) if isinstance(obj, dict) else None
    oob = []
    for m in _tensor_maps(obj):
        want = _expected_bytes(m)
        if "data" in m:
            if not isinstance(m["data"], bytes) or len(m["data"]) != want or "off" in m:
                raise FrameInvalid(f"inline tensor {m.get('shape')} {m.get('dtype')}: "
                                   f"{len(m['data']) if isinstance(m['data'], bytes) else '?'} "
                                   f"bytes, expected {want}")
            continue
        off, n = m.get("off"), m.get("nbytes")
        if type(off) is not int or type(n) is not int or off < 0 or n != want:
            raise FrameInvalid(f"tensor {m.get('shape')} {m.get('dtype')}: region "
                               f"({str(off)[:20]}, {str(n)[:20]}) does not hold {want} bytes")
        oob.append(m)
    if arena is None:
        if oob:
            raise FrameInvalid("a tensor refers to an arena the frame does not announce")
        return obj
    if type(arena) is not int or not 0 <= arena <= MAX_ARENA_BYTES:
        raise FrameInvalid(f"arena of {str(arena)[:30]} bytes is out of bounds")
    fd = _recv_fd(sock)
    try:
        _check_arena(fd, arena, oob)
        _map_in(fd, oob)
    finally:
        os.close(fd)
    return obj


def _recv_fd(sock: socket.socket) -> int:
    try:  # recvmsg, not socket.recv_fds, which ignores its flags before Python 3.12
        msg, anc, flags, _ = sock.recvmsg(16, socket.CMSG_SPACE(4), socket.MSG_DONTWAIT
                                          | getattr(socket, "MSG_CMSG_CLOEXEC", 0))
    except BlockingIOError:
        raise FrameInvalid("the frame announces an arena but no descriptor came with it") from None
    fds = array.array("i")
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
    fds = list(fds)
    if flags & socket.MSG_CTRUNC or len(fds) != 1 or msg != b"A":
        for fd in fds:
            os.close(fd)
        raise FrameInvalid("the arena descriptor message is malformed")
    return fds[0]


def _check_arena(fd: int, size: int, maps: list) -> None:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise FrameInvalid("the arena descriptor is not a memory file")
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError:
        raise FrameInvalid("the arena descriptor is not a sealable memfd") from None
    if seals & SEALS != SEALS:
        raise FrameInvalid(f"the arena is not sealed against write/shrink/grow (seals {seals:#x})")
    if st.st_size != size:
        raise FrameInvalid(f"the arena holds {st.st_size} bytes, the frame announces {size}")
    end = 0
    for m in sorted(maps, key=lambda m: m["off"]):
        if m["off"] < end or m["off"] + m["nbytes"] > size:
            raise FrameInvalid(f"tensor region at {m['off']} overlaps another or the arena's end")
        end = m["off"] + m["nbytes"]


def _map_in(fd: int, maps: list) -> None:
    import torch
    for m in maps:
        # MAP_POPULATE: the pages are mapped in one go, not faulted in one by one while a
        # copy to the GPU reads them (the sealed bytes are final; writes still copy on write).
        region = mmap.mmap(fd, m["nbytes"], flags=mmap.MAP_PRIVATE | POPULATE,
                           prot=mmap.PROT_READ | mmap.PROT_WRITE, offset=m["off"])
        m["data"] = torch.frombuffer(region, dtype=torch.uint8)  # keeps the mapping alive
        del m["off"], m["nbytes"]
