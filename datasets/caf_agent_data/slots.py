"""Local execution slots: N worker processes that run filter jobs, each with a deadline.

This is the CPU stand-in for the GPU pool's slots: a job is (name, source, options) in and a
plain dict out (filter.run_job), so the pool can run the same function on a GPU slot. A job
that hangs past its deadline or kills its process (segfault, OOM kill) costs only that job:
the slot is restarted and the job is rejected with the reason.
"""
from __future__ import annotations

import multiprocessing as mp
import time
from multiprocessing.connection import wait

from . import stop


def _slot_main(conn, threads: int) -> None:
    from .filter import _EVAL  # noqa: F401  (puts the judge's package on sys.path)
    from caf_agent_eval._pdeathsig import die_with_parent
    die_with_parent()  # a killed pipeline leaves no slot behind
    import warnings
    warnings.simplefilter("ignore")
    import torch
    torch.set_num_threads(threads)
    from .filter import run_job
    conn.send(("ready", None))
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        idx, name, source, options = msg
        try:
            conn.send(("done", (idx, run_job(name, source, options))))
        except (BrokenPipeError, OSError):
            return


class _Slot:
    def __init__(self, ctx, threads: int):
        self.parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_slot_main, args=(child, threads), daemon=True)
        self.proc.start()
        child.close()
        self.job = None          # (idx, name) while busy
        self.deadline = 0.0
        self.ready = False

    def stop(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)


class SlotPool:
    """n_slots processes, `threads` torch threads each; timeout_s per job (after start-up)."""

    def __init__(self, n_slots: int, timeout_s: float, threads: int = 1, start_timeout_s: float = 120.0):
        if n_slots < 1:
            raise ValueError(f"n_slots must be >= 1, got {n_slots}")
        self.ctx = mp.get_context("spawn")  # Rationale: no fork after torch's thread pools start
        self.timeout_s, self.threads, self.start_timeout_s = timeout_s, threads, start_timeout_s
        self.slots = [_Slot(self.ctx, threads) for _ in range(n_slots)]
        self.restarts = 0

    def close(self) -> None:
        for s in self.slots:
            try:
                s.parent.send(None)
            except (OSError, BrokenPipeError):
                pass
            s.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _restart(self, i: int) -> None:
        self.slots[i].stop()
        self.slots[i] = _Slot(self.ctx, self.threads)
        self.restarts += 1

    def map(self, jobs):
        """jobs: an iterable of (name, source, options) triples, pulled only when a slot is
        free. Yields (index, result) as jobs finish."""
        it = enumerate(jobs)
        exhausted, busy = False, 0
        started = time.monotonic()
        while not (exhausted and busy == 0):
            stop.check()  # a stop whose raise was lost in a finalizer still stops here
            for s in self.slots:
                if s.ready and s.job is None and not exhausted:
                    try:
                        idx, (name, source, options) = next(it)
                    except StopIteration:
                        exhausted = True
                        break
                    s.parent.send((idx, name, source, options))
                    s.job, s.deadline = (idx, name), time.monotonic() + self.timeout_s
                    busy += 1
            if exhausted and busy == 0:
                return
            # Rationale: one wait over every slot's pipe (50 ms at most), not a poll per slot,
            # so a finished job is seen at once however many slots there are.
            readable = set(wait([s.parent for s in self.slots], timeout=0.05))
            for i, s in enumerate(self.slots):
                if s.parent in readable:
                    try:
                        kind, payload = s.parent.recv()
                    except (EOFError, OSError):
                        kind, payload = "dead", None
                    if kind == "ready":
                        s.ready = True
                        continue
                    if kind == "done":
                        s.job = None
                        busy -= 1
                        yield payload
                        continue
                now = time.monotonic()
                if s.job is not None and (now > s.deadline or not s.proc.is_alive()):
                    idx, name = s.job
                    if s.proc.is_alive():
                        reason = f"no result within {self.timeout_s:g} s (hang or far too slow); the slot was restarted"
                        stage = "timeout"
                    else:
                        reason = f"the slot process died (exit code {s.proc.exitcode}) running it"
                        stage = "crash"
                    self._restart(i)
                    busy -= 1
                    yield idx, {"name": name, "kept": False, "stage": stage, "reason": reason}
                elif not s.ready and not s.proc.is_alive():
                    raise RuntimeError(f"slot {i} failed to start (exit code {s.proc.exitcode})")
                elif not s.ready and now - started > self.start_timeout_s and s.job is None and \
                        all(not x.ready for x in self.slots):
                    raise RuntimeError(f"no slot started within {self.start_timeout_s:g} s")
