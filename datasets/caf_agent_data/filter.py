"""Execution filtering: one job per task, source in, verdict out (a plain dict), so the same
function runs in a local slot process (slots.py) or as a GPU-pool job.

A task is kept when, in order (the first failure is the reason):
  meta          (when asked: composed by a model) it builds and runs on meta tensors, giving
                tensors, before anything is allocated;
  load          model.py imports and defines Model, get_inputs, get_init_inputs;
  size          a job of it fits the slot's memory (the judge's meta-tensor estimate);
  reference     the judge's load-time validation passes: the reference runs, returns
                tensors, and its outputs depend on the input and are not constant;
  half_batch    it runs with half the batch (the judge's second check does that);
  deterministic two forwards on one input agree, and a model rebuilt from the same seed gives
                the same output (no sampling, no uninitialised memory);
  eager_time    the eager forward's median time lies within [min_ms, max_ms];
  compile       (when asked) it runs under torch.compile and agrees with eager within the
                judge's tolerance; its time is recorded.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import traceback

import torch

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_EVAL = os.path.join(_ROOT, "skills", "eval_worker")
if _EVAL not in sys.path:
    sys.path.insert(0, _EVAL)

from caf_agent_eval import task_check  # noqa: E402
from caf_agent_eval.options import DEFAULTS as JUDGE_DEFAULTS  # noqa: E402
from caf_agent_eval.task import Task, as_outputs, drop_task_module  # noqa: E402
from caf_agent_eval.verify import compare  # noqa: E402

#: Filter options and their defaults (the pipeline's flags override them).
DEFAULTS = {
    "device": "cpu",
    # Rationale: the paper's bounds are 1-100 ms of eager time on the GPU: above 1 ms a
    # kernel's launch overhead does not dominate, below 100 ms an RL step stays cheap. CPU
    # bounds for the bundled sample: 0.02 ms keeps problems that do measurable work on a
    # CPU core, 50 ms keeps a CPU rollout's verify+profile within seconds.
    "min_ms": 0.02, "max_ms": 50.0,
    "compile": False,
    "atol": JUDGE_DEFAULTS["atol"], "rtol": JUDGE_DEFAULTS["rtol"], "rel_l2": JUDGE_DEFAULTS["rel_l2"],
    # Rationale: bitwise on the CPU, where kernels are deterministic; a GPU run may set a
    # small tolerance for atomics-based reductions.
    "determinism_atol": 0.0,
    # Rationale: a training task must be deterministic; an evaluation set (KernelBench) is
    # measured as it is, its nondeterminism noted (caf_agent_data.evaluate turns this off).
    "determinism_fatal": True,
    # Rationale: a median over >= 5 calls after 2 warm-ups is stable to a few percent for
    # ms-scale forwards; 0.5 s caps the time one task holds a slot.
    "warmup": 2, "min_iters": 5, "max_iters": 50, "budget_s": 0.5,
    "seed": 0,
    # Rationale: text from a language model is checked on meta tensors before any real
    # allocation (the stacking composer already did that in the pipeline process).
    "meta_check": False,
    # Rationale: slots share a GPU; with a lock file named here no two slots time at once
    # (loading, validation and torch.compile's compilation still overlap). "" = no lock.
    "timing_lock": "",
    # Rationale: N slots on one GPU each see the whole device in the judge's size check, then
    # run out of memory together; with a share each checks against its part. A task that is
    # refused for size or runs out of memory under a share below 1 is marked retry_alone.
    "memory_share": 1.0,
}


class _TimingLock:
    """An exclusive lock on cfg["timing_lock"] (flock) for the duration of a timing."""

    def __init__(self, path: str):
        self.path, self.fd = path, None

    def __enter__(self):
        if self.path:
            import fcntl
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)  # closing releases the lock
            self.fd = None


class Rejected(Exception):
    """A filter criterion failed: stage names it, the message says why."""

    def __init__(self, stage: str, reason: str):
        super().__init__(reason)
        self.stage = stage


_TIMERS: dict = {}


def _timers(device: str):
    """The judge's timers for the device (CUDA events, L2 flush on a GPU), one per process."""
    if device not in _TIMERS:
        from caf_agent_eval.profile import Timers
        _TIMERS[device] = Timers(device)
    return _TIMERS[device]


def time_forward(fn, input_sets: list, cfg: dict) -> float:
    """Median milliseconds of fn on the input sets, timed the judge's way
    (`caf_agent_eval.profile.time_calls`: device-wide sync around each call, the L2 flushed
    before it and CUDA events on a GPU, the input sets taken in turn), after warm-ups; at
    least min_iters calls, then until max_iters or the time budget."""
    from caf_agent_eval.profile import time_calls
    timers = _timers(cfg["device"])
    order = list(range(len(input_sets)))
    with torch.no_grad():
        for i in range(cfg["warmup"]):
            fn(*input_sets[i % len(input_sets)])
        timers.sync()
        times, start = [], time.perf_counter()
        while len(times) < cfg["max_iters"] and (len(times) < cfg["min_iters"]
                                                 or time.perf_counter() - start < cfg["budget_s"]):
            times += time_calls(fn, input_sets, order, timers, keep=False).primary
    return statistics.median(times)


def _same(a: list, b: list, atol: float) -> str | None:
    if len(a) != len(b):
        return f"{len(a)} outputs, then {len(b)}"
    for i, (x, y) in enumerate(zip(a, b)):
        if not isinstance(x, torch.Tensor):
            continue
        ok = torch.equal(x, y) if atol == 0 else bool(torch.allclose(x, y, atol=atol, rtol=0, equal_nan=True))
        if not ok:
            diff = float((x.double() - y.double()).abs().nan_to_num(0.0).max()) if x.shape == y.shape else None
            return f"output {i} differs (max abs diff {diff})"
    return None


def _error(e: BaseException) -> str:
    return traceback.format_exception_only(type(e), e)[-1].strip()[:400]


def _checks(task: Task, cfg: dict, res: dict) -> None:
    dev, seed = cfg["device"], int(cfg["seed"])
    limit = task_check.memory_limit(dev)
    if limit and cfg["memory_share"] < 1.0:
        limit = max(1, int(limit * cfg["memory_share"]))
    try:
        task_check.check_size(task, "profile", limit)
    except task_check.TaskError as e:
        raise Rejected("size", str(e)) from None
    half = task.check_batch(1)  # before check_reference, which turns it off for a task that fails it
    try:
        task_check.check_reference(task, dev, cfg["atol"], cfg["rtol"], cfg["rel_l2"])
    except task_check.TaskError as e:
        raise Rejected("reference", str(e)) from None
    # Rationale: the judge scores a task whose output barely depends on its input (scaled
    # parameters, the variation check), but a training problem should not need that: its
    # reward would rest on the judge's remedies, not on the task's own numbers.
    why = task_check.degenerate_as_initialised(task, cfg["atol"], cfg["rtol"], cfg["rel_l2"])
    if why:
        raise Rejected("reference", why)
    init = task.init_inputs(seed)
    model = task.make_model(init, seed + 1, dev)
    if half is not None:
        try:
            with torch.no_grad():
                model(*task.inputs(seed + 2, dev, batch_override=half))
        except Exception as e:
            raise Rejected("half_batch", f"fails with half the batch ({half}): {_error(e)}") from None
    x = task.inputs(seed + 2, dev)
    with torch.no_grad():
        out1 = as_outputs(model(*x))
        out2 = as_outputs(model(*x))
        out3 = as_outputs(task.make_model(init, seed + 1, dev)(*task.inputs(seed + 2, dev)))
    for other, what in ((out2, "two forwards on one input disagree"),
                        (out3, "a model rebuilt from the same seed disagrees")):
        why = _same(out1, other, cfg["determinism_atol"])
        if why and cfg["determinism_fatal"]:
            raise Rejected("deterministic", f"{what}: {why}")
        if why:
            res.setdefault("notes", []).append(f"not deterministic: {what}: {why}")
    res["output_shapes"] = [list(t.shape) for t in out1 if isinstance(t, torch.Tensor)]
    res["input_shapes"] = [list(t.shape) for t in x if isinstance(t, torch.Tensor)]
    res["input_dtypes"] = [str(t.dtype).replace("torch.", "") for t in x if isinstance(t, torch.Tensor)]
    res["params"] = sum(p.numel() for p in model.parameters())
    sets = [x, task.inputs(seed + 3, dev)]
    with _TimingLock(cfg["timing_lock"]):
        eager_ms = time_forward(model, sets, cfg)
    res["eager_ms"] = round(eager_ms, 4)
    if not cfg["min_ms"] <= eager_ms <= cfg["max_ms"]:
        raise Rejected("eager_time", f"eager time {eager_ms:.3f} ms outside [{cfg['min_ms']}, {cfg['max_ms']}] ms")
    if cfg["compile"]:
        try:
            compiled = torch.compile(model)
            with torch.no_grad():
                outc = as_outputs(compiled(*x))
        except Exception as e:
            raise Rejected("compile", f"torch.compile fails: {_error(e)}") from None
        for i, (a, b) in enumerate(zip(out1, outc)):
            ok, why, _ = compare(a, b, cfg["atol"], cfg["rtol"], cfg["rel_l2"])
            if not ok:
                raise Rejected("compile", f"torch.compile output {i} differs from eager: {why}")
        with _TimingLock(cfg["timing_lock"]):
            res["compile_ms"] = round(time_forward(compiled, sets, cfg), 4)


def run_job(name: str, source: str, options: dict | None = None) -> dict:
    """Filters one task. Returns {"name", "kept", "stage", "reason", "eager_ms", ...}; never
    raises for a bad task (a task's own exceptions become its reason)."""
    cfg = dict(DEFAULTS)
    cfg.update(options or {})
    res = {"name": name, "kept": False, "stage": "", "reason": "", "device": cfg["device"]}
    t0 = time.perf_counter()
    task = None
    with tempfile.TemporaryDirectory(prefix="caf_data_") as work:
        try:
            if cfg["meta_check"]:
                from .compose import check_on_meta
                shapes, why = check_on_meta(source)
                if why:
                    raise Rejected("meta", why)
                if not shapes:
                    raise Rejected("meta", "forward returns no tensor on meta tensors")
            try:
                task = Task(name, source, work)
            except Exception as e:
                raise Rejected("load", f"does not load: {_error(e)}") from None
            torch.manual_seed(int(cfg["seed"]))
            _checks(task, cfg, res)
            res["kept"] = True
        except Rejected as e:
            res["stage"], res["reason"] = e.stage, str(e)
        except Exception as e:  # anything else a task raises is still the task's failure
            res["stage"], res["reason"] = "run", f"raised: {_error(e)}"
        finally:
            if task is not None:
                drop_task_module(task)
    if not res["kept"] and cfg["memory_share"] < 1.0 and (
            res["stage"] == "size" or "OutOfMemoryError" in res["reason"]):
        res["retry_alone"] = True
    res["job_s"] = round(time.perf_counter() - t0, 3)
    return res
