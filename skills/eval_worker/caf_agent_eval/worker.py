"""The persistent eval worker of one GPU-pool slot.

    python -m caf_agent_eval.worker --device cpu|cuda[:i] [--threads N] [--work-dir D]

Speaks length-framed msgpack on stdin/stdout (stdout carries frames only; everything else
goes to stderr). Requests: {op: ping}, {op: eval, ...}, {op: shutdown}. torch is imported
once; each eval runs the submission in a fresh child process started ahead of time, forked
from a fork server that has torch imported (CAF_EVAL_ZYGOTE=0 spawns each child instead).
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import OrderedDict

# Rationale: a handful of tasks per slot in a training run; keep them warm, bound memory.
TASK_CACHE_SIZE = 16


class WorkerContext:
    """State shared by the jobs of one worker: device, caches, the spare child."""

    def __init__(self, device: str, threads: int, work_dir: str | None, build_root: str | None,
                 build_only: bool = False):
        import torch
        from . import profile
        self.device = device
        self.flavour = "cuda" if device.startswith("cuda") else "cpu"
        self.threads = threads
        # A build-only worker (the pool's build stage) runs compilers for `device`'s flavour
        # and nothing else: no device context, no timers, no evaluation children.
        self.build_only = build_only
        if threads > 0:
            torch.set_num_threads(threads)
        if self.flavour == "cuda" and not build_only:
            torch.cuda.set_device(device)
        self.own_work = work_dir is None
        self.work_root = work_dir or tempfile.mkdtemp(prefix="caf_eval_")
        os.makedirs(self.work_root, exist_ok=True)
        self.build_root = build_root or os.path.join(self.work_root, "build")
        if self.flavour == "cuda" and not build_only:
            # Before the timers and the children: they load the hold kernel from ENV_LIB.
            from . import hold
            lib, log = hold.build(self.build_root)
            if lib:
                os.environ[hold.ENV_LIB] = lib
            else:
                print(f"eval worker: timing without the hold kernel: {log}", file=sys.stderr,
                      flush=True)
        self.timers = None if build_only else profile.Timers(device)
        self.tasks: OrderedDict = OrderedDict()
        self.task_errors: dict = {}  # (task hash, mode, tolerances) -> why it cannot be judged
        from .task_check import memory_limit
        self.memory_limit = None if build_only else memory_limit(device)
        self.gpu_clock: dict = {}  # the SM clock after a full warm-up (measure.warm_up)
        self.spare = None
        self.dying: list = []  # killed children not yet reaped (release_child)
        self.zygote = None
        if build_only:
            return
        if os.environ.get("CAF_EVAL_ZYGOTE", "1") != "0":
            from .child_client import Zygote
            self.zygote = Zygote(device, threads)
        self.spawn_spare()

    def spawn_spare(self):
        """Starts the next job's child if none is waiting (forked when the server runs)."""
        from .child_client import ChildProcess, ZygoteError
        if self.spare is not None:
            return
        if self.zygote is not None:
            try:
                self.spare = ChildProcess(self.device, self.threads, self.zygote)
                return
            except ZygoteError as e:
                self._drop_zygote(str(e))
        self.spare = ChildProcess(self.device, self.threads)

    def _drop_zygote(self, why: str):
        """Falls back to a lite fork server (torch imported, not torch._dynamo) if the full
        warm-up initialised CUDA, else to spawning children (slower start, same isolation)."""
        from .child_client import Zygote
        from .zygote import CUDA_INITIALISED
        lite = self.zygote is not None and not self.zygote.lite and CUDA_INITIALISED in why
        print(f"eval worker: fork server disabled ({why.strip()}); "
              f"{'trying a lite fork server' if lite else 'spawning children instead'}",
              file=sys.stderr, flush=True)
        if self.zygote is not None:
            self.zygote.close()
        self.zygote = Zygote(self.device, self.threads, lite=True) if lite else None

    def take_child(self, timeout_s: float, prestart_next: bool = False):
        """The pre-started child, waited for until ready (start-up failure is infra).

        With the fork server the next job's child is forked right away (it is idle, blocked
        on its pipe, before any timing starts: see quiesce). Without it, prestart_next starts
        the next child now; only for jobs that time nothing, since an interpreter starting
        beside a measurement would disturb it."""
        from .child_client import ChildProcess
        self.spawn_spare()
        child, self.spare = self.spare, None
        for _ in range(3):  # forked (full server) -> forked (lite server) -> spawned
            try:
                child.wait_ready(timeout_s)
                break
            except Exception as e:
                child.kill()
                if not child.forked:
                    raise RuntimeError(f"evaluation child failed to start: {e}\n{child.log()}") from e
                self._drop_zygote(f"a forked child failed to start: {e}\n{child.log()[-2000:]}")
                child = ChildProcess(self.device, self.threads, self.zygote)
        if prestart_next or self.zygote is not None:
            self.spawn_spare()
        return child

    def release_child(self, child) -> None:
        """A job's child at the job's end: killed, and reaped now when it held much device
        memory (the slots of a GPU share it: the next job must find it free), else later
        (reap_dying), so the job's answer does not wait for the driver to tear the child's
        context down (tens of ms on the H200)."""
        import torch
        from .job import KEEP_RESERVED_BYTES
        self.reap_dying(0.0)
        big = self.flavour == "cuda" and torch.cuda.memory_reserved(self.device) > KEEP_RESERVED_BYTES
        child.kill(wait=big)
        if not big:
            self.dying.append(child)

    def reap_dying(self, timeout_s: float) -> None:
        """Reaps the killed children that have exited (waiting up to timeout_s for each)."""
        still = []
        for c in self.dying:
            if not c.reap(timeout_s):
                still.append(c)
        self.dying = still[-64:]  # never unbounded (a child that will not die is the kernel's)

    def quiesce(self, timeout_s: float):
        """Before timing: waits until the last jobs' children have exited and a starting
        spare is idle, so neither a context tear-down nor a start-up (device context, a few
        hundred ms) overlaps a measurement."""
        self.reap_dying(10.0)
        if self.spare is None or not self.spare.forked:
            return
        try:
            self.spare.wait_ready(timeout_s)
        except Exception as e:
            print(f"eval worker: spare child failed to start: {e}", file=sys.stderr, flush=True)
            self.spare.kill()
            self.spare = None

    def job_done(self):
        self.spawn_spare()

    def task(self, name: str, model_py: str, mode: str = "verify", o: dict | None = None):
        """The loaded task, validated for this mode and tolerance (task_check.py; verdicts
        cached by task hash). Raises task_check.TaskError for a task that cannot be judged."""
        import hashlib
        import traceback
        from . import options, task_check
        from .task import Task, drop_task_module
        o = o or options.DEFAULTS
        key = hashlib.sha256(model_py.encode()).hexdigest()[:16]
        check_key = (key, "verify" if mode == "verify" else "profile",
                     float(o["atol"]), float(o["rtol"]), float(o["rel_l2"]))
        if check_key[1] == "profile":  # the timing path, hence the size, depends on these
            check_key += (bool(o["timing"]["fresh_inputs"]), int(o["timing"]["round_set_bytes"]),
                          int(o["timing"]["iters_per_round"]))
        if check_key in self.task_errors:
            raise task_check.TaskError(self.task_errors[check_key])
        t = self.tasks.get(key)
        if t is not None:
            self.tasks.move_to_end(key)
        else:
            try:
                t = Task(name, model_py, self.work_root)
            except Exception as e:
                last = traceback.format_exception_only(type(e), e)[-1].strip()
                self._task_failed(check_key, f"the task's model.py failed to load: {last[:800]}")
            self.tasks[key] = t
            if len(self.tasks) > TASK_CACHE_SIZE:
                _, old = self.tasks.popitem(last=False)
                drop_task_module(old)  # its baselines stay in baseline_cache (a few KiB each)
        if check_key not in t.checked:
            try:
                task_check.check_size(t, check_key[1], self.memory_limit, self.flavour == "cuda",
                                      o["timing"])
                task_check.check_reference(t, self.device, *check_key[2:5])
                if t.degenerate.get(check_key[2:5]):  # the variation check's anchors too
                    task_check.check_size(t, check_key[1], self.memory_limit, self.flavour == "cuda",
                                          o["timing"], task_check.ANCHOR_OUTPUTS)
            except task_check.TaskError as e:
                self._task_failed(check_key, str(e))
            t.checked.add(check_key)
        return t

    def _task_failed(self, check_key, reason: str):
        from .task_check import TaskError
        if len(self.task_errors) >= 4 * TASK_CACHE_SIZE:
            self.task_errors.pop(next(iter(self.task_errors)))
        self.task_errors[check_key] = reason
        raise TaskError(reason)

    def close(self):
        if self.spare is not None:
            self.spare.kill()
        self.reap_dying(10.0)
        if self.zygote is not None:
            self.zygote.close()
        if self.own_work:
            shutil.rmtree(self.work_root, ignore_errors=True)


def handle(ctx: WorkerContext, req: dict) -> tuple[dict, bool]:
    """One request -> (response, keep_running)."""
    from . import job
    op = req.get("op") if isinstance(req, dict) else None
    if op == "ping":
        import torch
        return {"op": "pong", "status": "ok", "pid": os.getpid(), "device": ctx.device,
                "torch": torch.__version__}, True
    if op == "shutdown":
        return {"status": "ok"}, False
    if op == "eval" and ctx.build_only:
        return {"job_id": req.get("job_id", ""), "status": "infra_error",
                "error": "this eval worker was started with --build-only: it answers build requests only"}, True
    if op == "eval":
        job_id = req.get("job_id", "")
        t0 = time.monotonic()
        try:
            verdict = job.run(ctx, req)
        except Exception as e:
            text = "".join(traceback.format_exception(type(e), e, e.__traceback__))[-4000:]
            return {"job_id": job_id, "status": "infra_error", "error": text}, True
        finally:
            job.release_device_memory(ctx)
        verdict["eval_wall_s"] = time.monotonic() - t0
        return {"job_id": job_id, "status": "ok", "verdict": verdict}, True
    if op == "build":
        return build_request(ctx, req), True
    if os.environ.get("CAF_EVAL_TEST_HOOKS") == "1":
        if op == "debug_crash":
            os.kill(os.getpid(), signal.SIGSEGV)
        if op == "debug_hang":
            time.sleep(3600)
    return {"status": "infra_error", "error": f"unknown op {op!r}"}, True


def build_request(ctx: WorkerContext, req: dict) -> dict:
    """{"op": "build", "job_id", "files", "flavour"?, "timeout_s"?}: builds the submission's
    kernels into this worker's build root, the one its jobs' children build into, so a job
    with the same sources finds the library built. Runs only the compilers: no submission
    code runs here. A worker on a CPU host can build for a GPU slot (flavour "cuda",
    TORCH_CUDA_ARCH_LIST set): the build stage that keeps compiles off the slot's time."""
    from . import build, options, static_checks
    job_id = req.get("job_id", "")
    files = req.get("files")
    flavour = req.get("flavour", ctx.flavour)
    timeout_s = req.get("timeout_s", options.DEFAULTS["build_timeout_s"])
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                              for k, v in files.items()):
        return {"job_id": job_id, "status": "infra_error", "error": "build: files must map paths to text"}
    if flavour not in ("cpu", "cuda") or not isinstance(timeout_s, (int, float)) or timeout_s <= 0:
        return {"job_id": job_id, "status": "infra_error",
                "error": "build: flavour must be cpu or cuda and timeout_s a positive number"}
    problems = [p for path, text in build.kernel_sources(files).items()
                for p in static_checks.check_cpp(text, path)]
    if problems:  # the job itself will fail these checks; compiling them is wasted work
        return {"job_id": job_id, "status": "ok", "ok": False, "cached": False,
                "log": "static checks failed: " + "; ".join(problems)[:4000], "seconds": {}}
    t0 = time.monotonic()
    res = build.build(files, flavour, ctx.build_root, timeout_s=float(timeout_s))
    total = time.monotonic() - t0
    print(f"eval worker: build for job {job_id}: {'ok' if res.ok else 'failed'} in {total:.2f} s"
          f"{' (cached)' if res.cached else ''}", file=sys.stderr, flush=True)
    return {"job_id": job_id, "status": "ok", "ok": res.ok, "cached": res.cached, "log": res.log,
            "seconds": {**(res.seconds or {}), "total": total}}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--work-dir", default=None)
    parser.add_argument("--build-root", default=os.environ.get("CAF_EVAL_BUILD_ROOT"))
    parser.add_argument("--build-only", action="store_true",
                        help="answer build requests only (the pool's build stage)")
    args = parser.parse_args(argv)
    from . import protocol
    # No PDEATHSIG here: it fires when the spawning *thread* ends, and the owner's thread is
    # an actor's; the worker exits on EOF of its stdin instead (children follow, PDEATHSIG).
    fd_in, fd_out = os.dup(0), os.dup(1)
    os.dup2(2, 1)  # stray prints (torch warnings, model.py) must not corrupt the frames
    ctx = WorkerContext(args.device, args.threads, args.work_dir, args.build_root, args.build_only)
    try:
        while True:
            try:
                req = protocol.read_frame(fd_in)
            except protocol.FrameEOF:
                return 0
            except protocol.FrameError as e:
                protocol.write_frame(fd_out, {"status": "infra_error", "error": str(e)})
                return 1
            resp, keep = handle(ctx, req)
            protocol.write_frame(fd_out, resp)
            if not keep:
                return 0
    finally:
        ctx.close()


if __name__ == "__main__":
    sys.exit(main())
