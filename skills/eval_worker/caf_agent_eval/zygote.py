"""The fork server: imports torch and the child's modules once, then forks one fresh child
per job, so a job's child is ready in a fraction of a second instead of the seconds an
interpreter start, `import torch` and the dispatcher guard's first use (it imports
torch._dynamo) cost.

    started by the worker as `python -m caf_agent_eval.zygote` (see child_client.Zygote)

It never initialises CUDA (a process forked after CUDA initialisation cannot use the GPU):
each forked child creates its own context. It holds nothing of the judge's (no reference,
no seeds): what a child inherits from it is torch and the harness modules, already imported.

Control messages travel on a SOCK_SEQPACKET socket (msgpack maps; the child's three pipe
ends and its end of the tensor descriptor socket arrive as SCM_RIGHTS file descriptors with
each fork request):
    {op: fork} + 4 fds  -> {pid}
    {op: wait, pid, timeout_s} -> {pid, returncode}   (None while it still runs)
Children are reaped only on a wait request, so a child's pid (and process group) cannot be
reused while the worker may still signal it.
"""
from __future__ import annotations

import os
import socket
import sys
import time
import traceback

# Rationale: a fork request carries a few bytes; a wait request a pid and a timeout.
MAX_MESSAGE_BYTES = 4096
CUDA_INITIALISED = "CUDA was initialised in the fork server; its children could not use it"


def warm_up(lite: bool) -> None:
    """Imports and first uses that every child would otherwise pay for (CPU only). lite: torch
    and the harness only (the worker's second try if the full warm-up initialised CUDA)."""
    import torch
    from . import build, child, dispatch_guard, measure, profile, protocol, task  # noqa: F401
    from torch.utils import cpp_extension  # noqa: F401
    build.cxx_std()
    from . import seccomp, symbols
    symbols.allowed_aten_structs()  # the native-code check's op list, once for every child
    symbols._demangler()
    try:
        seccomp.load_library()
    except seccomp.SeccompError:
        pass  # each child reports it (an infrastructure error) when it installs the filter
    if not lite:
        import torch._dynamo  # noqa: F401  (TorchDispatchMode's first use imports it: ~3 s)
        dispatch_guard.warm_up("cpu")
    if torch.cuda.is_initialized() or _cuda_driver_initialized():
        raise RuntimeError(CUDA_INITIALISED)


def _cuda_driver_initialized() -> bool:
    """True when this process called cuInit (then a forked child cannot use the GPU)."""
    with open("/proc/self/maps") as f:
        if "libcuda.so" not in f.read():
            return False
    import ctypes
    ctx = ctypes.c_void_p()
    # Rationale: cuCtxGetCurrent returns CUDA_ERROR_NOT_INITIALIZED (3) before cuInit.
    return ctypes.CDLL("libcuda.so.1").cuCtxGetCurrent(ctypes.byref(ctx)) != 3


def native_threads() -> list[str]:
    """Names of this process's OS threads (fork keeps only the calling one; more than one
    here means a library started threads during the warm-up)."""
    names = []
    for tid in sorted(os.listdir("/proc/self/task")):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:
            pass
    return names


def _become_child(sock: socket.socket, fds: list[int], zygote_pid: int) -> None:
    """In the forked process: own session, pipes on 0/1/2, the descriptor socket's number in
    CAF_EVAL_FD_SOCK, then the child's main loop."""
    code = 1
    try:
        sock.close()
        os.setsid()  # its own process group: the worker kills the group (compilers too)
        from ._pdeathsig import die_with_parent
        die_with_parent()
        if os.getppid() != zygote_pid:  # the fork server died before the line above
            os._exit(1)
        for target, fd in zip((0, 1, 2), fds[:3]):
            os.dup2(fd, target)
        for fd in fds[:3]:
            if fd > 2:
                os.close(fd)
        os.environ["CAF_EVAL_FD_SOCK"] = str(fds[3])
        from . import child
        child.main()  # exits the process
        code = 0
    except BaseException:
        try:
            os.write(2, traceback.format_exc().encode()[-4000:])
        except OSError:
            pass
    os._exit(code)


def _wait(pid: int, timeout_s: float):
    """Popen-style return code of a child (negative: killed by that signal), None if alive."""
    deadline = time.monotonic() + max(0.0, timeout_s)
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return -9999  # not ours or already reaped: report as gone
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.005)


def serve(sock: socket.socket) -> int:
    import msgpack
    me = os.getpid()
    sock.send(msgpack.packb({"ready": True, "pid": me, "threads": native_threads()}))
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE_BYTES, 4)
        except OSError:
            return 0
        if not msg:
            return 0  # the worker closed its end
        req = msgpack.unpackb(msg, raw=False)
        op = req.get("op") if isinstance(req, dict) else None
        if op == "fork" and len(fds) == 4:
            pid = os.fork()
            if pid == 0:
                _become_child(sock, fds, me)
            for fd in fds:
                os.close(fd)
            sock.send(msgpack.packb({"pid": pid}))
            continue
        for fd in fds:
            os.close(fd)
        if op == "wait":
            rc = _wait(int(req["pid"]), float(req.get("timeout_s", 0.0)))
            sock.send(msgpack.packb({"pid": req["pid"], "returncode": rc}))
        else:
            sock.send(msgpack.packb({"error": f"unknown op {op!r}"}))


def main() -> int:
    from ._pdeathsig import die_with_parent
    die_with_parent()  # the worker's main thread spawned it
    sock = socket.socket(fileno=int(os.environ.pop("CAF_EVAL_ZYGOTE_FD")))
    lite = os.environ.get("CAF_EVAL_ZYGOTE_LITE") == "1"
    fail = os.environ.get("CAF_EVAL_ZYGOTE_FAIL") if os.environ.get("CAF_EVAL_TEST_HOOKS") == "1" else None
    if fail == "exit":
        return 1  # tests: a fork server that dies at start-up
    try:
        if fail == "cuda" and not lite:  # tests: a full warm-up that initialised CUDA
            raise RuntimeError(CUDA_INITIALISED)
        warm_up(lite)
    except BaseException as e:
        sys.stderr.write("fork server: warm-up failed\n" + traceback.format_exc())
        try:  # the reason reaches the worker (it may retry with a lite warm-up)
            import msgpack
            sock.send(msgpack.packb({"ready": False, "error": str(e)[:1000]}))
        except OSError:
            pass
        return 1
    return serve(sock)


if __name__ == "__main__":
    sys.exit(main())
