"""The baseline job kind: a task's reference timed in eager mode and under torch.compile, no
submission (mode "baseline" of an eval request; job.run hands it here).

    {"op": "eval", "mode": "baseline", "job_id", "task": {"name", "model_py"},
     "seed_secret", "options"?}

The task is loaded and validated exactly as for any job of the judge (WorkerContext.task in
profile mode: a task the judge cannot profile is a `task_error` verdict with the reason),
then both functions are timed in this process the way measure.py times the baselines of a
profile job (profile.time_calls: L2 flush, device-wide syncs, the hold kernel on a GPU,
fresh seeded input sets each round, stopping once every median's CI is settled, at
max_iters or after budget_s). Nothing of an agent runs here. The result goes into the one
baseline cache (baseline_cache.py), where later baseline jobs, other slots (with
CAF_EVAL_BASELINE_DIR) and this worker's profile jobs find it.

With CAF_EVAL_TIMING_LOCK naming a file, slots sharing one GPU take turns timing: the timed
part (warm-up and rounds) holds an exclusive lock on it, and the job's other GPU work (the
task's validation, the model's first call, torch.compile and the compiled model's first
calls) a shared one (gpu_turn), so they load, validate and compile side by side but never
beside another slot's timing. A timing turn
that waits keeps new shared turns out (a gate file beside the lock), so a stream of
validations cannot starve it.

Verdict: correct False (there is no submission), flags ["baseline"], reward None,
timings {candidate_ms: None, eager_ms, compile_ms (None when compile failed, with
compile_error), ci95, cv, iterations (calls per function), ...}, and `baseline` with the
device, torch version, where the numbers came from (measured, memory, disk) and the
seconds each phase took.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import time
import traceback

import torch

from . import baseline_cache, profile
from .task import as_outputs, derive_seed

ENV_LOCK = "CAF_EVAL_TIMING_LOCK"


def run(ctx, req: dict, o: dict) -> dict:
    """The verdict of one baseline job (exceptions mean infrastructure errors)."""
    from .job import PhaseClock, new_verdict
    from .task_check import TaskError
    v = new_verdict()
    v["flags"].append("baseline")
    v["reward"], v["reward_reason"] = None, "a baseline job: no submission to reward"
    clock = PhaseClock(v)
    task_req = req["task"]
    info = {"device": baseline_cache.device_name(ctx.device), "torch": torch.__version__}
    v["baseline"] = info
    try:
        with gpu_turn():  # validation runs the reference on the GPU: never beside a timing turn
            task = ctx.task(task_req["name"], task_req["model_py"], "profile", o)
    except TaskError as e:
        v["flags"].append("task_error")
        v["task_error"] = str(e)
        v["reason"] = f"task error: {e}"
        v["reward_reason"] = "the task cannot be judged (not the submission's doing)"
        return v
    clock.lap("task")
    if req.get("files"):
        raise ValueError("a baseline job takes no files (it times the task's reference)")
    secret, job_id = str(req.get("seed_secret", "")), str(req.get("job_id", ""))
    if not secret:
        raise ValueError("seed_secret is required")
    t = o["timing"]
    base, where = (None, "") if t["fresh_baselines"] else baseline_cache.get(ctx, task, t)
    compile_error = ""
    if base is None:
        base, compile_error, seconds = measure(ctx, task, secret, job_id, t, o)
        info["seconds"] = seconds
        if "eager" in base:
            baseline_cache.put(ctx, task, t, base, {"compile_error": compile_error})
        where = "measured"
    clock.lap("baselines")
    info["source"] = where
    info["cache_key"] = baseline_cache.cache_key(baseline_cache.key_fields(ctx, task, t))
    summarise(base, v)
    if compile_error:
        v["timings"]["compile_error"] = compile_error
    e, c = v["timings"].get("eager_ms"), v["timings"].get("compile_ms")
    # The device and torch version lead the text: the pool's answer (eval_result) carries the
    # reason, not the verdict's other fields, and the runtime's table records the GPU from it.
    v["reason"] = f"baseline on {info['device']} (torch {info['torch']}): eager {e:.4f} ms" + (
        f", torch.compile {c:.4f} ms" if c is not None else
        (f", torch.compile failed: {compile_error.splitlines()[-1][:300]}" if compile_error
         else ", torch.compile not asked"))
    return v


def summarise(base: dict, v: dict) -> None:
    """The verdict's timings from a base dict: per function the median with its side-stream
    share (profile.hidden_work_ms), its 95% CI, CV and call count."""
    timings = {"candidate_ms": None, "eager_ms": None, "compile_ms": None, "ci95": {}, "cv": {},
               "calls": {}, "hidden_work_ms": {}}
    for name in ("eager", "compile"):
        if name not in base:
            continue
        b = base[name]
        med, lo, hi = profile.median_ci(b["primary"])
        extra = profile.hidden_work_ms(b["gap"], b["ref_gap"], med)
        timings[f"{name}_ms"] = med + extra
        timings["ci95"][name] = [lo + extra, hi + extra]
        timings["cv"][name] = profile.cv(b["primary"])
        timings["calls"][name] = len(b["primary"])
        timings["hidden_work_ms"][name] = extra
    timings["iterations"] = len(base.get("eager", {}).get("primary", []))
    v["timings"] = timings


# Rationale: with 14 baseline slots on one H200 (2026-12-03) and only the timing locked,
# other slots' validations ran beside the timed rounds: level1/19_ReLU's eager read 7.22 ms
# (CV 0.23) against 3.04 ms (CV 0.0007) with the GPU to itself, same options. Timing is
# exclusive, every other GPU phase of a baseline job shared (a readers-writer lock).
@contextlib.contextmanager
def _turn(exclusive: bool):
    path = os.environ.get(ENV_LOCK, "").strip()
    if not path:
        yield 0.0
        return
    t0 = time.monotonic()
    with open(path + ".gate", "a") as gate, open(path, "a") as f:
        # Through the gate one at a time: a timing turn holds it until it has the lock, so
        # shared turns asked for after it wait behind it (flock alone would let them pass).
        fcntl.flock(gate.fileno(), fcntl.LOCK_EX)
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(gate.fileno(), fcntl.LOCK_UN)
        try:
            yield time.monotonic() - t0
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def timing_turn():
    """The exclusive lock on CAF_EVAL_TIMING_LOCK while timing (no lock when unset): no
    other slot's timing or GPU work (gpu_turn) runs meanwhile. Yields the seconds waited."""
    return _turn(True)


def gpu_turn():
    """The shared lock on CAF_EVAL_TIMING_LOCK for a baseline job's GPU work other than
    timing (validation, the first call, compiling): side by side with other slots' such work,
    never beside a timing turn. Yields the seconds waited. Not re-entrant with timing_turn
    in one process (release it first)."""
    return _turn(False)


def measure(ctx, task, secret: str, job_id: str, t: dict, o: dict) -> tuple[dict, str, dict]:
    """(base, compile error or "", seconds per phase): eager and torch.compile timed in
    rounds of fresh input sets, as measure.py times the baselines of a profile job. On the
    low-memory path (measure.low_memory: a large input set and output) one warm-up set and
    rounds of one set, as a candidate of the task is timed; every call's outputs are dropped
    as soon as it returns (profile.time_calls, keep=False), so this process holds one set
    and one call's outputs."""
    with gpu_turn() as waited:
        model, warm_sets, in_bytes, low, seconds = _prepare(ctx, task, secret, job_id, t)
        seconds["gpu_wait"] = waited
    fns, compile_error = _compile(model, warm_sets, t, seconds)
    return _time(ctx, task, secret, job_id, t, fns, warm_sets, in_bytes, low, compile_error, seconds)


def _prepare(ctx, task, secret: str, job_id: str, t: dict):
    """The model, its warm-up sets and a first call (measure's GPU work before compile)."""
    from .measure import low_memory, set_bytes
    dev = ctx.device
    seconds = {}
    t0 = time.monotonic()
    init = task.init_inputs(derive_seed(secret, job_id, "init", 0))
    model = task.make_model(init, derive_seed(secret, job_id, "weights", 0), dev)
    k_warm = max(1, int(t["input_sets"]))
    first = task.inputs(derive_seed(secret, job_id, "warmup", 0), dev)
    with torch.no_grad():  # the outputs' size decides the path; they are dropped at once
        in_bytes, out_bytes = set_bytes(first), set_bytes(as_outputs(model(*first)))
    low = low_memory(t, in_bytes, out_bytes)
    warm_sets = [first] + [task.inputs(derive_seed(secret, job_id, "warmup", i), dev)
                           for i in range(1, 1 if low else k_warm)]
    del first
    seconds["setup"] = time.monotonic() - t0
    return model, warm_sets, in_bytes, low, seconds


# Rationale: compile in a shared turn, though it is mostly CPU work and a timing turn then waits
# for the compiles in flight. Outside the lock (H200, 2026-12-03, 14 slots), inductor's first
# calls (its autotuning of Triton configs runs on the GPU, then the compiled kernels' first
# calls) ran beside other slots' timed rounds: in the compile pass 74 of levels 2-3's 150 eager
# times had a CV above 0.05 (23 in the eager pass, where no slot compiles) and 23 read over 10%
# slower than the same task's eager pass (bench/results/2026-12-03-kernelbench-h200.md, call 8).
def _compile(model, warm_sets: list, t: dict, seconds: dict) -> tuple[dict, str]:
    """The functions to time: eager, and torch.compile's (compiled on the warm-up sets, in a
    shared GPU turn: never beside another slot's timing)."""
    fns = {"eager": _no_grad(model)}
    compile_error = ""
    if t["compile_baseline"]:
        with gpu_turn() as waited:
            seconds["compile_gpu_wait"] = waited
            t0 = time.monotonic()
            try:
                compiled = torch.compile(model)
                with torch.no_grad():
                    for s in warm_sets:
                        compiled(*s)
                fns["compile"] = _no_grad(compiled)
            except Exception as e:
                compile_error = "".join(traceback.format_exception_only(type(e), e)).strip()[-2000:]
            seconds["compile"] = time.monotonic() - t0
    return fns, compile_error


def _time(ctx, task, secret, job_id, t, fns, warm_sets, in_bytes, low, compile_error, seconds):
    """measure's timed part, in its timing turn."""
    from .measure import GPU_WARMUP_S, MAX_WARMUP_CALLS, calls_per_round
    dev = ctx.device
    hold_ms = baseline_cache.hold_ms_of(ctx, t)
    n_round = 1 if low else calls_per_round(t, in_bytes)
    samples = {name: {s: [] for s in baseline_cache.SERIES} for name in fns}
    with timing_turn() as waited:
        seconds["lock_wait"] = waited
        t0 = time.monotonic()
        warm_s = t["warmup_s"] if t["warmup_s"] is not None else (GPU_WARMUP_S if dev.startswith("cuda") else 0.0)
        for fn in fns.values():
            _warm_up(fn, warm_sets, ctx.timers, t, hold_ms, warm_s, MAX_WARMUP_CALLS)
        del warm_sets
        rounds, start = 0, ctx.timers.perf()
        while True:
            seeds = [derive_seed(secret, job_id, "timing", rounds * n_round + i) for i in range(n_round)]
            sets = [task.inputs(s, dev) for s in seeds]
            order = list(range(n_round))
            for name, fn in fns.items():
                r = profile.time_calls(fn, sets, order, ctx.timers, keep=False,
                                       flush_in_stream=t["flush_in_stream"], hold_ms=hold_ms)
                samples[name]["primary"] += r.primary
                samples[name]["gap"] += r.gap
                samples[name]["ref_gap"] += r.ref_gap
                samples[name]["launch"] += r.launch
            del sets
            rounds += 1
            n = len(samples["eager"]["primary"])
            done = all(profile.settled(samples[x]["primary"], t["rel_ci"], t["min_iters"]) for x in fns)
            if n >= t["max_iters"] or (n >= t["min_iters"] and (done or ctx.timers.perf() - start > t["budget_s"])):
                break
        seconds["timing"] = time.monotonic() - t0
    return samples, compile_error, {k: round(x, 4) for k, x in seconds.items()}


def _warm_up(fn, sets: list, timers, t: dict, hold_ms: float, target_s: float, max_calls: int) -> None:
    """timing.warmup calls, then more until their times add up to target_s (measure.warm_up's
    rule, in this process): an idle GPU takes a fraction of a second of load to reach its
    boost clock, and timing before that reads a slow first stretch."""
    n, spent_ms, calls = max(1, int(t["warmup"])), 0.0, 0
    while True:
        order = [i % len(sets) for i in range(n)]
        r = profile.time_calls(fn, sets, order, timers, keep=False,
                               flush_in_stream=t["flush_in_stream"], hold_ms=hold_ms)
        spent_ms += sum(r.wall)
        calls += n
        left_ms = target_s * 1e3 - spent_ms
        if left_ms <= 0 or calls >= max_calls:
            return
        n = int(min(max_calls - calls, max(1, left_ms / max(1e-3, spent_ms / calls) + 1), 1000))


def _no_grad(fn):
    def call(*args):
        with torch.no_grad():
            return fn(*args)
    return call
