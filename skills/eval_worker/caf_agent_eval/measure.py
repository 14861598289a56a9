"""The timing phase of a profile/final job: candidate rounds in the child, eager and
torch.compile rounds in the parent (interleaved when the baselines are measured), sampled
correctness of timed calls, a wall-clock cross-check, statistics and the roofline floor."""
from __future__ import annotations

import math
import random

import torch

from . import profile, protocol, verify
from .task import as_outputs, derive_seed

# The wall-clock cross-check (see check_wall_clock). Rationale: what an honest round's
# parent-measured time may exceed the calibrated estimate by, beyond the claimed calls:
# per call, the host's wake-up and launch jitter (tens of us on the H200, more on a loaded
# CPU host); per round, scheduling noise of the two processes and the pipes.
SLACK_PER_CALL_MS = 0.2
SLACK_PER_ROUND_MS = 2.0
# Rationale: in its least-disturbed round, a child whose claimed call times add up to less
# than a third of the real time the parent's clock implies is reporting times that did not
# happen. The best round is used because scheduling noise only ever inflates the parent's
# measurement; a forged timer is low in every round.
WALL_RATIO_MIN = 0.33
# Default of the timing.warmup_s option on a GPU (see options.py), and the most calls a
# time-based warm-up makes (a task of microseconds reaches 0.25 s only after many calls).
GPU_WARMUP_S = 0.25
MAX_WARMUP_CALLS = 5000
# Rationale: boost clocks step by ~15 MHz (<1% of an H200's 1980 MHz); 3% below the highest
# clock measured after a full warm-up is still on the way up, above it is there.
CLOCK_READY_FRAC = 0.97


def measure(ctx, child, task, model, secret, job_id, o, v, base=None, anchor=None):
    """Fills v["timings"], speedups and flags; raises job.JobFailed on a bad timed call.

    base: the task's baselines (job._baselines: baseline_cache.py, measured before the submission was
    loaded); without it (timing.fresh_baselines) eager and compile are timed here, interleaved
    with the candidate's rounds on the same sets, and used for this job only.

    With timing.fresh_inputs (the default) every timed call gets an input set no earlier
    call of the job saw: each round's sets are drawn from new seeds and sent to the child
    between rounds (outside the timed region), so a cache keyed on an input's address or a
    few of its values never hits, and one keyed on the address alone returns wrong values
    that the sampled comparisons catch. The warm-up uses sets of its own.

    A task whose input set and output are large takes the low-memory path (low_memory):
    one warm-up set, rounds of one call, every call's output compared, each side holding
    only the current set and output."""
    from .job import JobFailed, PhaseClock
    t = o["timing"]
    dev = ctx.device
    lap = PhaseClock(v, prefix="m_").lap  # where the timing phase's time goes (benchmarks)
    fresh = bool(t["fresh_inputs"])
    k_warm = max(1, int(t["input_sets"]))
    warm_seeds = [derive_seed(secret, job_id, "warmup", i) for i in range(k_warm)]
    first = task.inputs(warm_seeds[0], dev)
    with torch.no_grad():  # its outputs' sizes: the path and the roofline floor (bytes only)
        in_bytes, out_bytes = set_bytes(first), set_bytes(as_outputs(model(*first)))
    low = low_memory(t, in_bytes, out_bytes)
    if low:
        k_warm, warm_seeds = 1, warm_seeds[:1]
    warm_sets = [first] + [task.inputs(s, dev) for s in warm_seeds[1:]]
    del first
    n_round = 1 if low else calls_per_round(t, in_bytes)
    # Rationale: on the low-memory path every timed call's output is compared (one call a
    # round, at least one sample), which is what lets the child drop the previous round's
    # outputs (child.time_round, drop_previous).
    n_picks = max(1, int(t["samples_per_round"])) if low else int(t["samples_per_round"])
    lap("sets")
    _gen_sets(child, warm_seeds, o)
    lap("load_sets")
    # The candidate and the baselines are timed the same way: held on a GPU where this worker
    # built the hold kernel (hold.py), else not; cached baselines are keyed by that method.
    hold_ms = t["hold_ms"] if ctx.timers.cuda and ctx.timers.hold is not None else 0.0
    medians: list = []
    clock = ctx.timers.clock_cycles_per_ms if dev.startswith("cuda") and t["warmup_clock"] else None
    early_before = ctx.gpu_clock.get("early", 0)
    warm_s = warm_up(child, k_warm, t, o, dev, hold_ms, medians, clock, ctx.gpu_clock, low)
    warm_early = ctx.gpu_clock.get("early", 0) > early_before
    warm_median = medians[-1] if medians else 0.0
    perf = ctx.timers.perf
    lap("warmup")
    # The same path with a known call length, on the parent's clock (check_wall_clock): one
    # calibration round now, one after the last timed round.
    calib = [calibration_round(child, n_round, warm_median, t, o, hold_ms, perf, low)]
    lap("calibration")
    fns = {} if base else _baseline_fns(ctx, model, warm_sets, t)
    if low:  # the rounds draw their own sets (fresh inputs): the warm-up's is not held
        warm_sets = None
    lap("baseline_setup")
    samples = {"candidate": [], "candidate_wall": [], "candidate_launch": [], "eager": [], "compile": []}
    launches = {"eager": [], "compile": []}
    gaps = {name: ([], []) for name in ("candidate", "eager", "compile")}  # (gap, ref_gap)
    rng = random.Random(derive_seed(secret, job_id, "sample", 0))
    rounds, start = 0, perf()
    wall_rounds = []   # per candidate round: (claimed ms, calls, claimed median, parent ms, span)
    sets, seeds = warm_sets, warm_seeds

    def set_at(j):
        """This process's copy of set j of the round, drawn when first needed: the sampled
        calls' sets, all of them when the baselines are timed on them or after the last round."""
        if sets[j] is None:
            sets[j] = task.inputs(seeds[j], dev)
        return sets[j]
    while True:
        if fresh:
            seeds = [derive_seed(secret, job_id, "timing", rounds * n_round + i) for i in range(n_round)]
            sets = [None] * n_round  # this process's copy of the previous round's sets is freed first
            if fns:
                for j in range(n_round):
                    set_at(j)
            lap("sets")
            _gen_sets(child, seeds, o)
            order = list(range(n_round))
            lap("load_sets")
        else:
            order = [(rounds * n_round + i) % k_warm for i in range(n_round)]
        w0 = perf()
        rep = child.request(_time_request(order, t, hold_ms, low), o["round_timeout_s"], "timing")
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
        wall_rounds.append(round_claim(rep, n_round, parent_ms))
        picks = sorted(rng.sample(range(n_round), min(n_round, n_picks)))
        _compare_sampled(child, model, picks, order, set_at, rounds * n_round, o, anchor,
                         clone=not low)
        lap("fetch")
        samples["candidate"] += rep["primary"]
        samples["candidate_wall"] += rep["wall"]
        samples["candidate_launch"] += rep["launch"]
        gaps["candidate"][0].extend(rep["gap"])
        gaps["candidate"][1].extend(rep["ref_gap"])
        for name, fn in fns.items():
            r = profile.time_calls(fn, sets, order, ctx.timers, keep=False,
                                   flush_in_stream=t["flush_in_stream"], hold_ms=hold_ms)
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
    last_median = profile.median_ci(samples["candidate"])[0]
    calib.append(calibration_round(child, n_round, last_median, t, o, hold_ms, perf))
    lap("calibration")
    check = check_wall_clock(wall_rounds, calib, ctx.timers.cuda)
    if check["flag"]:
        raise JobFailed(check["reason"], "timer_mismatch")
    checked = sorted(rng.sample(range(len(sets)), min(len(sets), max(1, int(t["samples_per_round"])))))
    _check_sets_unchanged(child, {j: set_at(j) for j in checked}, o)
    lap("sets_after")
    if not base:  # timed here, interleaved (timing.fresh_baselines): this job's own
        base = {name: {"primary": samples[name], "gap": gaps[name][0], "ref_gap": gaps[name][1],
                       "launch": launches[name]} for name in fns}
    _summarise(ctx, in_bytes + out_bytes, samples, gaps["candidate"], base, t, v)
    v["timings"]["warmup_s"] = warm_s
    v["timings"]["low_memory"] = low  # the path taken (low_memory)
    if clock is not None:  # the warm-up ended at the clock a full one reaches (warm_up)
        v["timings"]["warmup_clock"] = {"ended_early": warm_early,
                                        "max_mhz": round(ctx.gpu_clock.get("max", 0.0) / 1e3, 1)}
    v["timings"]["wall_check"] = check["summary"]  # the cross-check's numbers (see check_wall_clock)
    v["timings"]["hold_ms"] = hold_ms  # 0: timed without the hold kernel (CPU, or none built)
    # The host's share of a call before it returns (median ms): when it is longer than the
    # hold, the GPU waited for the host inside the timed span and the time includes the rest.
    launch = {"candidate": profile.median_ci(samples["candidate_launch"])[0],
              **{name: profile.median_ci(b["launch"])[0] for name, b in base.items()}}
    v["timings"]["launch_ms"] = launch
    v["timings"]["hold_short"] = sorted(k for k, ms in launch.items() if hold_ms and ms > hold_ms)


def set_bytes(inputs: list) -> int:
    return sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))


def low_memory(t: dict, in_bytes: int, out_bytes: int) -> bool:
    """Whether a task with one input set of in_bytes and one call's outputs of out_bytes is
    timed on the low-memory path (measure, baseline.measure, and task_check's count of the
    copies held): one warm-up set instead of timing.input_sets (both sides), rounds of one
    call, each side holding only the current set and one call's outputs (the child drops
    the previous round's outputs, and keeps none of the warm-up's), every call's output
    compared with a fresh reference (not cloned), the roofline floor from byte counts.

    Rationale: timing.round_set_bytes (1 GiB) is what the options let a side hold of a
    round's sets; a call whose set and output together exceed it cannot have a round within
    it, and the regular path holds 3 warm-up sets and two rounds' outputs on top (KernelBench's
    6-16 GiB level-1 problems: 158-210 GiB estimated, over an H200's 139.8). Below it the
    regular path's copies cost at most a few tens of GiB. The path is a function of the task
    and the options, not of the slot: a task is timed the same way on every slot, and a
    cached baseline (shared by slots of different limits) was measured the way its own
    profile jobs are. Needs fresh inputs (the rotation of timing.input_sets sets needs them
    all held)."""
    return bool(t["fresh_inputs"]) and in_bytes + out_bytes > int(t["round_set_bytes"])


def calls_per_round(t: dict, one_set_bytes: int) -> int:
    """iters_per_round, fewer with fresh inputs when a round's sets would exceed
    timing.round_set_bytes (each side holds one round's sets): down to one call per round
    for KernelBench's largest inputs."""
    n = max(1, int(t["iters_per_round"]))
    if t["fresh_inputs"] and one_set_bytes > 0:
        n = max(1, min(n, int(t["round_set_bytes"]) // one_set_bytes))
    return n


def _gen_sets(child, seeds: list, o: dict) -> None:
    """The child draws the sets of these seeds on its device (child.gen_sets); this process
    draws its own copy, against which the sampled calls and the input sets are compared."""
    rep = child.request({"op": "gen_sets", "seeds": [int(s) for s in seeds]},
                        o["call_timeout_s"], "drawing timing inputs")
    if rep.get("error"):  # this process drew them with the same code: the submission's doing
        from .job import JobFailed
        raise JobFailed("the evaluation process failed to draw the timing inputs once the "
                        "submission was loaded: " + str(rep["error"]).strip().splitlines()[-1][:400],
                        "exception")


def _time_request(order: list[int], t: dict, hold_ms: float, low: bool = False,
                  keep: bool = True) -> dict:
    """A `time` request (child.time_round). low (low_memory): the child frees the previous
    round's outputs first; keep=False (the low path's warm-up): it keeps none of this round's."""
    req = {"op": "time", "order": order, "flush_in_stream": t["flush_in_stream"],
           "hold_ms": hold_ms}
    if low:
        req["drop_previous"] = True
        if not keep:
            req["keep"] = False
    return req


def _compare_sampled(child, model, picks: list, order: list, set_at, first_call: int,
                     o: dict, anchor=None, clone: bool = True) -> None:
    """Fetches the outputs of the round's calls at `picks` and compares each with this
    process's reference on the same set (set_at); raises job.JobFailed on a miss. Outputs
    only: a timed call's inputs are compared after the last round (a sample of its sets,
    _check_sets_unchanged); each set crossing the host costs ~0.1 s at 64 MiB. clone=False
    (low_memory): the reference's outputs are compared as the forward returned them. What
    it fetched and computed is freed when it returns."""
    from .job import JobFailed, compare_outputs
    out = child.request({"op": "fetch", "indices": picks, "sets": []},
                        o["call_timeout_s"], "timing")
    if out.get("error"):
        raise JobFailed(out["error"], "bad_output")
    if not isinstance(out.get("calls"), list) or len(out["calls"]) != len(picks):
        raise JobFailed("the evaluation process sent an invalid reply (fetch)", "bad_frame")
    for j, outputs in zip(picks, out["calls"]):
        where = f"timed call {first_call + j + 1} (input set {order[j]})"

        def fail(reason, flag, where=where):
            raise JobFailed(f"{where}: {reason} -- the kernel behaves differently while timed",
                            "timed_mismatch")
        ref = None  # the previous pick's reference is freed before the next forward
        with torch.no_grad():
            ref = as_outputs(model(*set_at(order[j])))
        if clone:
            ref = [x.clone() for x in ref]
        compare_outputs(ref, outputs, o, fail, anchor)  # anchor: a degenerate task's (job._variation)


def warm_up(child, k_sets: int, t: dict, o: dict, dev: str, hold_ms: float = 0.0,
            medians: list | None = None, clock=None, seen: dict | None = None,
            low: bool = False) -> float:
    """`warmup` calls, then more rounds until their call times add up to timing.warmup_s
    (each round sized from the calls seen so far). Returns the seconds of calls made.
    Errors are left for the timed rounds, which report them.

    clock (timing.warmup_clock, GPU): a function of this process that measures the SM clock
    (profile.Timers.clock_cycles_per_ms), asked after each round while the child is idle;
    the warm-up ends early once the clock is within CLOCK_READY_FRAC of the highest this
    worker has measured at the end of a warm-up (seen["max"]): the GPU is already at the
    clock a full warm-up reaches, as it is when the previous job's timing just ended. The
    first warm-up of a worker always runs in full and sets that mark.

    low (low_memory): the child keeps no warm-up output (a round of n calls would hold n)."""
    target = t["warmup_s"]
    if target is None:
        target = GPU_WARMUP_S if dev.startswith("cuda") else 0.0
    n = max(1, int(t["warmup"]))
    spent_ms, calls = 0.0, 0
    while True:
        rep = child.request(_time_request([i % k_sets for i in range(n)], t, hold_ms, low, keep=False),
                            o["round_timeout_s"], "warm-up")
        if rep.get("error") or not rep.get("wall"):
            break
        spent_ms += sum(rep["wall"])
        if medians is not None:
            medians.append(_claimed_median(rep))
        calls += n
        left_ms = target * 1e3 - spent_ms
        if clock is not None and seen is not None:
            rate = clock()
            if seen.get("max") and rate >= CLOCK_READY_FRAC * seen["max"]:
                seen["max"] = max(seen["max"], rate)
                seen["early"] = seen.get("early", 0) + 1
                break
            if left_ms <= 0 or calls >= MAX_WARMUP_CALLS:
                seen["max"] = max(seen.get("max", 0.0), rate)
        if left_ms <= 0 or calls >= MAX_WARMUP_CALLS:
            break
        per_call = max(1e-3, spent_ms / calls)
        n = int(min(MAX_WARMUP_CALLS - calls, max(1, left_ms / per_call + 1), 1000))
    return spent_ms / 1e3


def _claimed_median(rep: dict) -> float:
    """The median call time a timing reply claims (0 when it holds none that are usable)."""
    xs = rep.get("primary")
    if not isinstance(xs, list) or not xs or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in xs):
        return 0.0
    return max(0.0, profile.median_ci(xs)[0])


def round_claim(rep: dict, n: int, parent_ms: float) -> tuple:
    """(claimed ms of the round's calls, calls, claimed median, parent ms, the child's span)
    of a checked timing reply. The claim is what the reward is computed from: the event
    times plus the side-stream time hidden_work_ms adds."""
    med = profile.median_ci(rep["primary"])[0]
    hidden = profile.hidden_work_ms(rep["gap"], rep["ref_gap"], med)
    span = rep.get("span_ms")
    span = float(span) if isinstance(span, (int, float)) and not isinstance(span, bool) else None
    return (sum(rep["primary"]) + n * hidden, n, med, parent_ms, span)


def calibration_round(child, n: int, call_ms: float, t: dict, o: dict,
                      hold_ms: float, perf, low: bool = False) -> tuple:
    """One calibration round in the child (child.time_round): n calls of the judge's own
    wait of call_ms (the claimed median call), outputs of the reference's sizes kept, the
    same flush, hold, syncs and reference calls as a timed round. Returns (parent ms, ms of
    waits the parent knows it contains, the child's span). Without the hold kernel (a CPU,
    or a GPU where none was built) the calls do not wait. low: as the low-memory path's
    timed rounds (the previous round's outputs freed first)."""
    from .job import JobFailed
    req = _time_request([0] * n, t, hold_ms, low)  # the calls ignore their inputs
    # Only the hold kernel waits a time this process knows; without it the calls do not wait
    # (the reference calls' waits are then taken off the timed rounds alone: same result).
    wait_ms = max(0.0, min(float(call_ms), 1e4)) if hold_ms > 0 else 0.0
    req["calibrate"] = {"ms": wait_ms}
    t0 = perf()
    rep = child.request(req, o["round_timeout_s"], "timing (calibration)")
    parent_ms = (perf() - t0) * 1e3
    if rep.get("error"):
        raise JobFailed("a calibration round of the timer raised: "
                        + str(rep["error"]).strip().splitlines()[-1][:400], "exception")
    if rep.get("tampered"):
        raise JobFailed("timing functions were replaced: " + ", ".join(rep["tampered"]),
                        "timer_tampering")
    if rep.get("held") is not (hold_ms > 0):  # as for a timed round: the judge's own failure
        raise RuntimeError("timing: a calibration round was not held as asked "
                           f"({str(rep.get('hold_error'))[:300]})")
    known = wait_ms  # the child's claims do not enter: a wait it skipped only makes the check stricter
    span = rep.get("span_ms")
    span = float(span) if isinstance(span, (int, float)) and not isinstance(span, bool) else None
    return parent_ms, known, span


def check_wall_clock(rounds: list, calib: list, cuda: bool) -> dict:
    """The parent's clock is authoritative. Like is compared with like: the candidate's
    rounds and the calibration rounds run in the same child process, under the same
    harness (flush, hold, device-wide syncs, outputs kept alive, reference calls), so the
    parent's time of a calibration round, less the waits it knows it contains, is that
    path's harness for a round of this size (whatever it costs in that process: a 32 MB
    task's rounds cost ~100 ms more in the child than the same calls in the parent on the
    H200, 2026-12-01). A candidate round's real call time is its parent time less that
    harness; the reference calls of a round wait as long as its claimed median call, which
    is taken off too (a lower claim only makes the check stricter). Flags when in every
    round the claimed time (event times plus counted side-stream time) with slack is below
    WALL_RATIO_MIN of that real time. rounds: round_claim tuples; calib:
    calibration_round tuples."""
    harness = []
    for parent_ms, known_ms, _ in calib:
        n = rounds[0][1] if rounds else 1
        n_ref = max(profile.REF_CALLS_MIN, n // 2) if cuda else 0
        harness.append(parent_ms - (n + n_ref) * known_ms)
    base = min(harness) if harness else 0.0
    best, best_i = -1.0, 0
    for i, (claim, n, med, parent_ms, _) in enumerate(rounds):
        n_ref = max(profile.REF_CALLS_MIN, n // 2) if cuda else 0
        real = parent_ms - base - n_ref * med
        ratio = (claim + n * SLACK_PER_CALL_MS + SLACK_PER_ROUND_MS) / max(1e-9, real)
        if ratio > best:
            best, best_i = ratio, i
    summary = {"calibration_ms": [round(c[0], 3) for c in calib],
               "calibration_span_ms": [None if c[2] is None else round(c[2], 3) for c in calib],
               "harness_ms_per_round": round(base, 3), "best_ratio": round(best, 3)}
    if rounds:
        claim, n, med, parent_ms, span = rounds[best_i]
        summary.update({"best_round_claimed_ms": round(claim, 3), "best_round_parent_ms": round(parent_ms, 3),
                        "best_round_span_ms": None if span is None else round(span, 3)})
    flag = bool(rounds) and best < WALL_RATIO_MIN
    reason = ""
    if flag:
        reason = (f"timer mismatch: the submission's process reported {summary['best_round_claimed_ms']:.3f} ms "
                  f"of calls for a round the judge's clock measured at {summary['best_round_parent_ms']:.3f} ms "
                  f"(of which {base:.3f} ms is the harness, measured by calibration rounds)")
    return {"flag": flag, "reason": reason, "summary": summary}


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


def _check_sets_unchanged(child, sets: dict, o):
    """The child's copies of the input sets `sets` names (index -> this process's copy) as
    they are after timing, bit for bit against this process's."""
    from .job import JobFailed
    idx = sorted(sets)
    rep = child.request({"op": "sets_after", "indices": idx}, o["call_timeout_s"], "timing")
    got = rep.get("sets")
    if not isinstance(got, list) or len(got) != len(idx):
        raise JobFailed("the evaluation process sent an invalid reply (sets_after)", "bad_frame")
    for i, after in zip(idx, got):
        why = verify.inputs_unchanged(sets[i], list(protocol.decode_value(after)))
        if why:
            raise JobFailed(f"timing input set {i}: {why}", "input_mutation")


def _summarise(ctx, io_bytes, samples, cand_gaps, base, t, v):
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
    floor = profile.roofline_floor_bytes_ms(io_bytes, gbps)  # one input set + one call's outputs
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
