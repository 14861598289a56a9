"""The timing phase of a profile/final job: candidate rounds in the child, eager and
torch.compile rounds in the parent (interleaved when the baselines are measured), sampled
correctness of timed calls, a wall-clock cross-check, statistics and the roofline floor."""
from __future__ import annotations

import math
import random

import torch

from . import profile, protocol, verify
from .task import as_outputs, derive_seed

# Rationale: per-iteration harness overhead (flush, sync, event records, loop) that the
# child's per-call times legitimately leave out; generous so honest runs never trip it.
OVERHEAD_ALLOW_MS = 0.2
# Rationale: the child runs the same timing harness as the parent's own baseline rounds, so
# the parent's measured harness time per call (flush, hold, reference calls, syncs: ~5 ms a
# call on the H200 for a 32 MB task, 2026-12-01, where the fixed 0.2 ms flagged honest
# kernels) bounds what an honest child's round adds; twice that leaves room for the
# submission's process being slower at the same work without letting a 3x lie through.
HARNESS_ALLOW_FACTOR = 2.0
# Rationale: in its least-disturbed round, a child whose reported call times add up to less
# than a third of what the parent's own clock saw is reporting times that did not happen.
# The best round is used because scheduler noise on a loaded host only ever inflates the
# parent's measurement; a forged timer is low in every round.
WALL_RATIO_MIN = 0.33
# Default of the timing.warmup_s option on a GPU (see options.py), and the most calls a
# time-based warm-up makes (a task of microseconds reaches 0.25 s only after many calls).
GPU_WARMUP_S = 0.25
MAX_WARMUP_CALLS = 5000


def measure(ctx, child, task, model, secret, job_id, o, v):
    """Fills v["timings"], speedups and flags; raises job.JobFailed on a bad timed call.

    With timing.fresh_inputs (the default) every timed call gets an input set no earlier
    call of the job saw: each round's sets are drawn from new seeds and sent to the child
    between rounds (outside the timed region), so a cache keyed on an input's address or a
    few of its values never hits, and one keyed on the address alone returns wrong values
    that the sampled comparisons catch. The warm-up uses sets of its own."""
    from .job import JobFailed, PhaseClock, compare_outputs
    t = o["timing"]
    dev = ctx.device
    lap = PhaseClock(v, prefix="m_").lap  # where the timing phase's time goes (benchmarks)
    fresh = bool(t["fresh_inputs"])
    k_warm = max(1, int(t["input_sets"]))
    warm_sets = [task.inputs(derive_seed(secret, job_id, "warmup", i), dev) for i in range(k_warm)]
    n_round = calls_per_round(t, set_bytes(warm_sets[0]))
    with torch.no_grad():
        ref0 = [x.clone() for x in as_outputs(model(*warm_sets[0]))]  # for the roofline floor
    lap("sets")
    _load_sets(child, warm_sets, o)
    lap("load_sets")
    # The candidate and the baselines are timed the same way: held on a GPU where this worker
    # built the hold kernel (hold.py), else not; cached baselines are keyed by that method.
    hold_ms = t["hold_ms"] if ctx.timers.cuda and ctx.timers.hold is not None else 0.0
    warm_s = warm_up(child, k_warm, t, o, dev, hold_ms)
    perf = ctx.timers.perf
    rtt_ms = float("inf")
    for _ in range(3):  # the smallest round trip: the harness cost of a round with no calls
        t0 = perf()
        child.request({"op": "time", "order": []}, o["call_timeout_s"], "timing")
        rtt_ms = min(rtt_ms, (perf() - t0) * 1e3)
    lap("warmup_rtt")
    # Keyed by everything that decides what was measured: a cache filled by a job without
    # the compile baseline must not serve a job that wants it.
    base_key = (task.key, bool(t["flush_in_stream"]), hold_ms, bool(t["compile_baseline"]))
    base = None if t["fresh_baselines"] else ctx.baselines.get(base_key)
    fns = {} if base else _baseline_fns(ctx, model, warm_sets, t)
    lap("baseline_setup")
    samples = {"candidate": [], "candidate_wall": [], "candidate_launch": [], "eager": [], "compile": []}
    launches = {"eager": [], "compile": []}
    gaps = {name: ([], []) for name in ("candidate", "eager", "compile")}  # (gap, ref_gap)
    rng = random.Random(derive_seed(secret, job_id, "sample", 0))
    rounds, start = 0, perf()
    wall_rounds = []   # (child-reported wall ms, calls, parent ms) per candidate round
    harness_ms = []    # the parent's own rounds: harness time per call outside the timed calls
    sets = warm_sets
    while True:
        if fresh:
            sets = [task.inputs(derive_seed(secret, job_id, "timing", rounds * n_round + i), dev)
                    for i in range(n_round)]
            _load_sets(child, sets, o)
            order = list(range(n_round))
            lap("load_sets")
        else:
            order = [(rounds * n_round + i) % k_warm for i in range(n_round)]
        w0 = perf()
        rep = child.request(_time_request(order, t, hold_ms), o["round_timeout_s"], "timing")
        parent_ms = (perf() - w0) * 1e3
        lap("rounds")
        if rep.get("error"):
            raise JobFailed("a timed call raised: " + rep["error"].strip().splitlines()[-1][:400],
                            "exception")
        if rep.get("held") is not (hold_ms > 0):  # the judge's own failure, not a verdict
            how = "with" if hold_ms else "without"
            raise RuntimeError(f"timing: the evaluation process was to time {how} the hold "
                               f"kernel and did not ({str(rep.get('hold_error'))[:300]})")
        if rep.get("tampered"):
            raise JobFailed("timing functions were replaced: " + ", ".join(rep["tampered"]),
                            "timer_tampering")
        if rep.get("flags"):
            raise JobFailed(rep["flags"][0], "bad_output")
        _check_round_reply(rep, n_round, ctx.timers.cuda)
        wall_rounds.append((sum(rep["wall"]), n_round, parent_ms))
        picks = sorted(rng.sample(range(n_round), min(n_round, int(t["samples_per_round"]))))
        out = child.request({"op": "fetch", "indices": picks, "sets": [order[j] for j in picks]},
                            o["call_timeout_s"], "timing")
        if out.get("error"):
            raise JobFailed(out["error"], "bad_output")
        for j, outputs, after in zip(picks, out["calls"], out.get("sets") or []):
            where = f"timed call {rounds * n_round + j + 1} (input set {order[j]})"

            def fail(reason, flag, where=where):
                raise JobFailed(f"{where}: {reason} -- the kernel behaves differently while timed",
                                "timed_mismatch")
            with torch.no_grad():
                ref = [x.clone() for x in as_outputs(model(*sets[order[j]]))]
            compare_outputs(ref, outputs, o, fail)
            why = verify.inputs_unchanged(sets[order[j]], [protocol.decode_value(x) for x in after])
            if why:
                raise JobFailed(f"{where}: {why}", "input_mutation")
        lap("fetch")
        samples["candidate"] += rep["primary"]
        samples["candidate_wall"] += rep["wall"]
        samples["candidate_launch"] += rep["launch"]
        gaps["candidate"][0].extend(rep["gap"])
        gaps["candidate"][1].extend(rep["ref_gap"])
        for name, fn in fns.items():
            h0 = perf()
            r = profile.time_calls(fn, sets, order, ctx.timers, keep=False,
                                   flush_in_stream=t["flush_in_stream"], hold_ms=hold_ms)
            harness_ms.append(max(0.0, ((perf() - h0) * 1e3 - sum(r.wall)) / max(1, len(order))))
            samples[name] += r.primary
            launches[name] += r.launch
            gaps[name][0].extend(r.gap)
            gaps[name][1].extend(r.ref_gap)
        lap("baselines")
        rounds += 1
        n = len(samples["candidate"])
        done = all(profile.settled(samples[x], t["rel_ci"], t["min_iters"])
                   for x in ["candidate", *fns])
        if n >= t["max_iters"] or (n >= t["min_iters"] and (done or perf() - start > t["budget_s"])):
            break
    harness = sorted(harness_ms)[len(harness_ms) // 2] if harness_ms else ctx.baselines.get((*base_key, "harness"), 0.0)
    allow = OVERHEAD_ALLOW_MS + HARNESS_ALLOW_FACTOR * harness
    ratios = [(w + n * allow) / max(1e-9, p - rtt_ms) for w, n, p in wall_rounds]
    if max(ratios) < WALL_RATIO_MIN:
        rep_ms, _, par_ms = wall_rounds[ratios.index(max(ratios))]
        raise JobFailed(f"timer mismatch: the submission's process reported {rep_ms:.3f} ms for "
                        f"a round the judge's clock measured at {par_ms:.3f} ms", "timer_mismatch")
    _check_sets_unchanged(child, sets, o)
    lap("sets_after")
    if not base:
        base = {name: {"primary": samples[name], "gap": gaps[name][0], "ref_gap": gaps[name][1],
                       "launch": launches[name]} for name in fns}
        ctx.baselines[(*base_key, "harness")] = harness
        ctx.baselines[base_key] = base
    _summarise(ctx, warm_sets[0], ref0, samples, gaps["candidate"], base, t, v)
    v["timings"]["warmup_s"] = warm_s
    v["timings"]["harness_ms_per_call"] = round(harness, 4)  # the wall check's allowance (see above)
    v["timings"]["hold_ms"] = hold_ms  # 0: timed without the hold kernel (CPU, or none built)
    # The host's share of a call before it returns (median ms): when it is longer than the
    # hold, the GPU waited for the host inside the timed span and the time includes the rest.
    launch = {"candidate": profile.median_ci(samples["candidate_launch"])[0],
              **{name: profile.median_ci(b["launch"])[0] for name, b in base.items()}}
    v["timings"]["launch_ms"] = launch
    v["timings"]["hold_short"] = sorted(k for k, ms in launch.items() if hold_ms and ms > hold_ms)


def set_bytes(inputs: list) -> int:
    return sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))


def calls_per_round(t: dict, one_set_bytes: int) -> int:
    """iters_per_round, fewer with fresh inputs when a round's sets would exceed
    timing.round_set_bytes (each side holds one round's sets): down to one call per round
    for KernelBench's largest inputs."""
    n = max(1, int(t["iters_per_round"]))
    if t["fresh_inputs"] and one_set_bytes > 0:
        n = max(1, min(n, int(t["round_set_bytes"]) // one_set_bytes))
    return n


def _load_sets(child, sets: list, o: dict) -> None:
    child.request({"op": "load_sets", "sets": [protocol.encode_value(s) for s in sets]},
                  o["call_timeout_s"], "loading timing inputs")


def _time_request(order: list[int], t: dict, hold_ms: float) -> dict:
    return {"op": "time", "order": order, "flush_in_stream": t["flush_in_stream"],
            "hold_ms": hold_ms}


def warm_up(child, k_sets: int, t: dict, o: dict, dev: str, hold_ms: float = 0.0) -> float:
    """`warmup` calls, then more rounds until their call times add up to timing.warmup_s
    (each round sized from the calls seen so far). Returns the seconds of calls made.
    Errors are left for the timed rounds, which report them."""
    target = t["warmup_s"]
    if target is None:
        target = GPU_WARMUP_S if dev.startswith("cuda") else 0.0
    n = max(1, int(t["warmup"]))
    spent_ms, calls = 0.0, 0
    while True:
        rep = child.request(_time_request([i % k_sets for i in range(n)], t, hold_ms),
                            o["round_timeout_s"], "warm-up")
        if rep.get("error") or not rep.get("wall"):
            break
        spent_ms += sum(rep["wall"])
        calls += n
        left_ms = target * 1e3 - spent_ms
        if left_ms <= 0 or calls >= MAX_WARMUP_CALLS:
            break
        per_call = max(1e-3, spent_ms / calls)
        n = int(min(MAX_WARMUP_CALLS - calls, max(1, left_ms / per_call + 1), 1000))
    return spent_ms / 1e3


def _baseline_fns(ctx, model, sets, t):
    fns = {"eager": model}
    if t["compile_baseline"]:
        compiled = torch.compile(model)
        with torch.no_grad():
            for s in sets:
                compiled(*s)
        fns["compile"] = compiled
    return {k: _no_grad(f) for k, f in fns.items()}


def _no_grad(fn):
    def call(*args):
        with torch.no_grad():
            return fn(*args)
    return call


def _check_round_reply(rep: dict, n: int, cuda: bool) -> None:
    """The child's timing numbers are untrusted input: lists of finite, non-negative floats,
    one per call (reference-call gaps: at least one on a GPU)."""
    from .job import JobFailed

    def floats(key, length):
        xs = rep.get(key)
        ok = isinstance(xs, list) and (len(xs) == length if length is not None else len(xs) >= 1) \
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                    and x >= 0 for x in xs)
        if not ok:
            raise JobFailed(f"the evaluation process sent an invalid timing reply ({key})", "bad_frame")
    floats("primary", n)
    floats("wall", n)
    floats("launch", n)
    if cuda:
        floats("gap", n)
        floats("ref_gap", None)
    else:
        rep.setdefault("gap", [])
        rep.setdefault("ref_gap", [])
        if rep["gap"] or rep["ref_gap"]:
            raise JobFailed("the evaluation process sent an invalid timing reply (gap)", "bad_frame")


def _check_sets_unchanged(child, sets, o):
    from .job import JobFailed
    rep = child.request({"op": "sets_after"}, o["call_timeout_s"], "timing")
    for i, (before, after) in enumerate(zip(sets, rep["sets"])):
        why = verify.inputs_unchanged(before, list(protocol.decode_value(after)))
        if why:
            raise JobFailed(f"timing input set {i}: {why}", "input_mutation")


def _summarise(ctx, inputs, outputs, samples, cand_gaps, base, t, v):
    from .job import JobFailed
    event, lo, hi = profile.median_ci(samples["candidate"])
    hidden = profile.hidden_work_ms(cand_gaps[0], cand_gaps[1], event)
    cand = event + hidden
    timings = {"candidate_ms": cand, "candidate_wall_ms": profile.median_ci(samples["candidate_wall"])[0],
               "ci95": {"candidate": [lo + hidden, hi + hidden]},
               "iterations": len(samples["candidate"]),
               "cv": {"candidate": profile.cv(samples["candidate"])},
               "hidden_work_ms": {"candidate": hidden}}
    if cand_gaps[0]:
        timings["gap_median_ms"] = {"candidate": profile.median_ci(cand_gaps[0])[0],
                                    "candidate_ref": profile.median_ci(cand_gaps[1])[0]}
    if hidden > 0:
        v["flags"].append("side_stream_work")
    for name in ("eager", "compile"):
        if name in base:
            b = base[name]
            med, blo, bhi = profile.median_ci(b["primary"])
            extra = profile.hidden_work_ms(b["gap"], b["ref_gap"], med)
            timings[f"{name}_ms"] = med + extra
            timings["ci95"][name] = [blo + extra, bhi + extra]
            timings["cv"][name] = profile.cv(b["primary"])
            timings["hidden_work_ms"][name] = extra
    gbps = profile.peak_gbps(ctx.device, t["peak_gbps"])
    floor = profile.roofline_floor_ms(list(inputs) + list(outputs), gbps)
    timings["roofline_floor_ms"] = floor
    v["timings"] = timings
    if "eager_ms" in timings:
        v["speedup_eager"] = timings["eager_ms"] / cand if cand > 0 else None
    if "compile_ms" in timings:
        v["speedup_compile"] = timings["compile_ms"] / cand if cand > 0 else None
    if floor > 0 and cand < floor:
        v["flags"].append("below_roofline")
        enforce = t["roofline_enforce"]
        if enforce is None:
            enforce = ctx.device.startswith("cuda")
        if enforce:
            raise JobFailed(f"impossible time: median {cand:.4f} ms is below the roofline floor "
                            f"{floor:.4f} ms (bytes moved / {gbps:.0f} GB/s)", "below_roofline")
