"""The parent's handle on one child process: start, request with a deadline, capped log,
crash and timeout detection. A child is used for one job and then killed.

A child is forked by the fork server (zygote.py, torch already imported) when one runs, else
spawned as `python -m caf_agent_eval.child`; both run the same child code on the same pipes.
Frames travel on pipes; large tensors' bytes on a SOCK_SEQPACKET socket pair as sealed memfds
(shm_transport.py), whose child end the child finds in CAF_EVAL_FD_SOCK.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import msgpack

from . import protocol

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Rationale: 64 KiB of a submission's prints is plenty to debug it; more is a flood.
LOG_CAP_BYTES = 64 * 1024
ZYGOTE_EXIT_S = 30.0  # how long a closed fork server may take to exit before it is killed


# Device-to-device replies (ipc.py) while they work in this worker. A child whose handle
# did not open gets memfd replies from then on (it may be lying: that only slows its own
# job); after IPC_FAILED_CHILDREN children in a row failed so, IPC is off for the worker
# (this host cannot do it).
IPC_FAILED_CHILDREN = 3
_IPC = {"on": True, "failed": 0}


class ChildTimeout(Exception):
    """The child missed a deadline (it was killed)."""


class ChildCrashed(Exception):
    """The child exited or was killed by a signal while a request was pending."""


class ChildProtocolError(Exception):
    """The child sent a malformed frame or a lying tensor header/arena (it was killed)."""


def fd_socket_pair() -> tuple[socket.socket, socket.socket]:
    """(worker end, child end) of the descriptor channel; the child's end is inheritable."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    theirs.set_inheritable(True)
    return mine, theirs


def describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


def child_env(device: str, threads: int) -> dict:
    """The environment of a child (and of the fork server its children come from)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = PACKAGE_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["CAF_EVAL_DEVICE"] = device
    env["CAF_EVAL_THREADS"] = str(threads)
    if threads > 0:
        env["OMP_NUM_THREADS"] = str(threads)
    # Rationale: torch.cuda.is_available() through NVML does not initialise the driver, so a
    # fork server that asks it can still fork children that use the GPU.
    env["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    # Rationale: `import numpy` starts OpenBLAS's pool (cores - 1 threads; 15 on the H200 host,
    # seen 2026-11-30) and fork keeps only the calling thread. The judge's processes use numpy
    # for byte views only (torch's CPU BLAS is its own), so one BLAS thread costs nothing.
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    return env


class ZygoteError(Exception):
    """The fork server is not running or did not answer (the worker falls back to spawn)."""


class Zygote:
    """The worker's handle on its fork server (see zygote.py)."""

    def __init__(self, device: str, threads: int, lite: bool = False):
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = child_env(device, threads)
        env["CAF_EVAL_ZYGOTE_FD"] = str(theirs.fileno())
        self.lite = lite
        if lite:
            env["CAF_EVAL_ZYGOTE_LITE"] = "1"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "caf_agent_eval.zygote"], stdin=subprocess.DEVNULL,
            stdout=sys.stderr.fileno(), env=env, pass_fds=[theirs.fileno()],
            start_new_session=True)
        theirs.close()
        self.sock = mine
        self.ready = False
        self.broken = ""

    def wait_ready(self, timeout_s: float) -> None:
        if not self.ready:
            msg = self._recv(timeout_s, "start-up")
            if not msg.get("ready"):
                self.broken = f"fork server failed to start: {msg.get('error')}"
                raise ZygoteError(self.broken)
            self.ready = True
            self.threads = msg.get("threads", [])
            if len(self.threads) > 1:
                print(f"eval worker: fork server has {len(self.threads)} OS threads at fork "
                      f"time: {self.threads}", file=sys.stderr, flush=True)

    def _recv(self, timeout_s: float, what: str) -> dict:
        if self.broken:
            raise ZygoteError(self.broken)
        self.sock.settimeout(max(0.001, timeout_s))
        try:
            msg = self.sock.recv(4096)
        except (OSError, socket.timeout) as e:
            self.broken = f"fork server: no answer to {what} ({e})"
            raise ZygoteError(self.broken) from None
        if not msg:
            self.broken = f"fork server exited ({describe_exit(self.proc.poll())})"
            raise ZygoteError(self.broken)
        return msgpack.unpackb(msg, raw=False)

    def _send(self, obj: dict, fds: list[int] = ()) -> None:
        if self.broken:
            raise ZygoteError(self.broken)
        try:
            socket.send_fds(self.sock, [msgpack.packb(obj)], list(fds))
        except OSError as e:
            self.broken = f"fork server: send failed ({e})"
            raise ZygoteError(self.broken) from None

    def fork(self, timeout_s: float) -> "ForkedProc":
        """A new child process with fresh pipes (ForkedProc mimics the Popen we use)."""
        self.wait_ready(timeout_s)
        (in_r, in_w), (out_r, out_w), (err_r, err_w) = os.pipe(), os.pipe(), os.pipe()
        fd_sock, child_sock = fd_socket_pair()
        protocol.grow_pipe(in_w)
        protocol.grow_pipe(out_r)
        try:
            self._send({"op": "fork"}, [in_r, out_w, err_w, child_sock.fileno()])
        finally:
            for fd in (in_r, out_w, err_w):
                os.close(fd)
            child_sock.close()
        try:
            pid = int(self._recv(timeout_s, "fork")["pid"])
        except BaseException:
            for fd in (in_w, out_r, err_r):
                os.close(fd)
            fd_sock.close()
            raise
        return ForkedProc(pid, in_w, out_r, err_r, fd_sock, self)

    def wait_child(self, pid: int, timeout_s: float):
        """The child's Popen-style return code, or None if it still runs after timeout_s."""
        self._send({"op": "wait", "pid": pid, "timeout_s": timeout_s})
        return self._recv(timeout_s + 10.0, "wait")["returncode"]

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
        try:
            # Rationale: the server exits on its socket's EOF; its interpreter (torch imported)
            # took more than 5 s to finish on a loaded 2-core host (2026-12-01) and was killed.
            self.proc.wait(timeout=ZYGOTE_EXIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


class ForkedProc:
    """The part of subprocess.Popen that ChildProcess uses, for a child of the fork server.

    The fork server reaps the child only when asked (poll/wait), so until then its pid and
    process group stay reserved and killpg cannot hit another process."""

    def __init__(self, pid: int, stdin_fd: int, stdout_fd: int, stderr_fd: int,
                 fd_sock: socket.socket, zygote: Zygote):
        self.pid = pid
        self.fd_sock = fd_sock
        self.stdin = open(stdin_fd, "wb", buffering=0)
        self.stdout = open(stdout_fd, "rb", buffering=0)
        self.stderr = open(stderr_fd, "rb", buffering=0)
        self.returncode = None
        self._zygote = zygote

    def poll(self):
        return self._reap(0.0)

    def wait(self, timeout: float | None = None):
        if self._reap(3600.0 if timeout is None else timeout) is None:
            raise subprocess.TimeoutExpired(f"child {self.pid}", timeout)
        return self.returncode

    def _reap(self, timeout_s: float):
        if self.returncode is None:
            try:
                self.returncode = self._zygote.wait_child(self.pid, timeout_s)
            except ZygoteError:
                self.returncode = -int(signal.SIGKILL)  # the server died: PDEATHSIG killed it
        return self.returncode


class ChildProcess:
    """One child process with its frame pipes and a log reader.

    With a fork server the child is forked from it when first needed (see wait_ready), so
    constructing a spare never blocks; without one it is spawned right away."""

    def __init__(self, device: str, threads: int, zygote: Zygote | None = None):
        self.zygote = zygote
        self.device = device
        self.ipc_failed = False
        self.transfers = {"ipc": 0, "resent": 0}  # the child's tensors copied device to device / by memfd after a failed handle
        self.forked = zygote is not None
        self.proc = None
        self._log = bytearray()
        self._dropped = 0
        self._reader = None
        self.ready = False
        self.startup_s = None  # the child's own account of its start-up (wait_ready)
        self._killed = False
        if zygote is None:
            fd_sock, child_sock = fd_socket_pair()
            env = child_env(device, threads)
            env["CAF_EVAL_FD_SOCK"] = str(child_sock.fileno())
            try:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "caf_agent_eval.child"], stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                    pass_fds=[child_sock.fileno()], start_new_session=True)
            finally:
                child_sock.close()
            self.proc.fd_sock = fd_sock
            protocol.grow_pipe(self.proc.stdin.fileno())
            protocol.grow_pipe(self.proc.stdout.fileno())
            self._start_reader()
        elif zygote.ready:
            self._fork(5.0)

    def _fork(self, timeout_s: float) -> None:
        self.proc = self.zygote.fork(timeout_s)
        self._start_reader()

    def _start_reader(self) -> None:
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self):
        while True:
            chunk = self.proc.stderr.read1(65536) if hasattr(self.proc.stderr, "read1") \
                else self.proc.stderr.read(65536)
            if not chunk:
                return
            room = LOG_CAP_BYTES - len(self._log)
            self._log += chunk[:max(0, room)]
            self._dropped += max(0, len(chunk) - max(0, room))

    def last_output(self, timeout_s: float = 1.0, cap: int = 300) -> str:
        """The last non-empty line the child wrote (its stderr and prints), once the log
        reader has reached the end of a child that exited (up to timeout_s): for a crash's
        reason, e.g. the last line of a traceback. "" when it wrote nothing."""
        if self._reader is not None:
            self._reader.join(timeout_s)
        for line in reversed(self._log.decode(errors="replace").splitlines()):
            if line.strip():
                line = line.strip()
                return line if len(line) <= cap else line[:cap] + "..."
        return ""

    def log(self) -> str:
        text = self._log.decode(errors="replace")
        if self._dropped:
            text += f"\n... [{self._dropped} more bytes of output dropped]"
        return text

    def wait_ready(self, timeout_s: float) -> None:
        """Waits until the child has started (imports, device context) and is idle."""
        if not self.ready:
            deadline = time.monotonic() + timeout_s
            if self.proc is None:
                self._fork(timeout_s)
            msg = self._read(deadline, "start-up")
            self.startup_s = msg.get("startup_s") if isinstance(msg.get("startup_s"), dict) else None
            self.ready = True

    def request(self, obj: dict, timeout_s: float, phase: str) -> dict:
        """Sends a request and waits for its reply; raises ChildTimeout / ChildCrashed /
        ChildProtocolError. On a GPU the child is asked to send its CUDA tensors as IPC
        handles, which are copied device to device here before this returns (ipc.py)."""
        from . import ipc
        use_ipc = _IPC["on"] and not self.ipc_failed and ipc.wanted(self.device)
        deadline = time.monotonic() + timeout_s
        self._send(dict(obj, ipc=True) if use_ipc else obj, phase)
        rep = self._read(deadline, phase)
        if use_ipc:
            self._resolve_ipc(rep, deadline, phase)
        return rep

    def _send(self, obj: dict, phase: str) -> None:
        try:
            protocol.write_frame(self.proc.stdin.fileno(), obj, self.proc.fd_sock)
        except protocol.FrameInvalid as e:
            self._invalid(phase, e)
        except (BrokenPipeError, OSError):
            self._crashed(phase)

    def _resolve_ipc(self, rep: dict, deadline: float, phase: str) -> None:
        from . import ipc

        def resend(ids):
            self._send({"op": "resend", "ids": ids}, phase)
            got = self._read(deadline, phase)
            return got.get("tensors")
        try:
            opened, resent = ipc.resolve(rep, self.device, resend)
        except protocol.FrameInvalid as e:
            self._invalid(phase, e)
        self.transfers["ipc"] += opened
        self.transfers["resent"] += resent
        if opened and not resent:
            _IPC["failed"] = 0
        elif resent:
            self.ipc_failed = True
            _IPC["failed"] += 1
            if _IPC["failed"] >= IPC_FAILED_CHILDREN and _IPC["on"]:
                _IPC["on"] = False
                print(f"eval worker: CUDA IPC handles of {IPC_FAILED_CHILDREN} evaluation processes "
                      "in a row did not open; tensors come by memfd from now on",
                      file=sys.stderr, flush=True)

    def _read(self, deadline: float, phase: str) -> dict:
        try:
            rep = protocol.read_frame(self.proc.stdout.fileno(), deadline, fd_sock=self.proc.fd_sock)
        except protocol.FrameTimeout:
            self.kill()
            raise ChildTimeout(phase) from None
        except protocol.FrameInvalid as e:
            self._invalid(phase, e)
        except protocol.FrameError:
            self._crashed(phase)
        except OSError as e:  # the descriptor channel failed (the child closed or broke it)
            self._invalid(phase, e)
        if not isinstance(rep, dict):
            self._invalid(phase, f"a reply of type {type(rep).__name__}, not a map")
        return rep

    def _invalid(self, phase: str, why):
        self.kill()
        raise ChildProtocolError(f"invalid reply during {phase}: {why}")

    def _crashed(self, phase: str):
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
        raise ChildCrashed(f"{describe_exit(self.proc.returncode)} during {phase}")

    def kill(self, wait: bool = True) -> None:
        """SIGKILL to the child's process group and our ends of its pipes closed; with wait,
        also reaped (reap). wait=False leaves the reaping to a later reap(): a CUDA process
        takes tens of ms to exit after SIGKILL (the driver tears its context down), which
        the job's answer need not wait for. Until it is reaped its pid and process group
        stay reserved (the fork server reaps only when asked), so no signal can reach
        another process."""
        if self.proc is None:
            return
        if not self._killed:
            self._killed = True
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for f in (self.proc.stdin, self.proc.stdout, self.proc.fd_sock):
                try:
                    f.close()
                except OSError:
                    pass
        if wait:
            self.reap(10.0)

    def reap(self, timeout_s: float) -> bool:
        """Waits until a killed child has exited (True), or timeout_s (False)."""
        if self.proc is None:
            return True
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        if self._reader is not None:
            self._reader.join(timeout=1)
        return True
