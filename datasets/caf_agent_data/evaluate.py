"""Per-level evaluation report of a task set: every task loaded and validated the way the
judge loads a task, then its eager and torch.compile baselines timed the judge's way
(filter.time_forward), in the slots; per level the counts, the refusals with their reasons
and the baseline statistics. For a KernelBench checkout the level is its folder's.

    PYTHONPATH=datasets .venv/bin/python -m caf_agent_data.evaluate --tasks KernelBench \
        --levels 1,2,3 --device cuda --slots 8 --compile --out kb.json

Two passes: eager first (every task), then torch.compile with its own deadline, so a
compile that hangs or is slower than the deadline costs its compile time only. Nothing is
dropped for being slow, fast or nondeterministic here (that is the pipeline's business; a
nondeterministic task is noted): a task is "refused" only when it does not load, does not
fit, its reference fails the judge's load-time validation or it crashes or hangs the slot.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections import Counter, defaultdict

from .readers import TaskSetError, read_task_set

#: Options that turn the filter into a measurement: no time bounds, nondeterminism noted.
MEASURE = {"min_ms": 0.0, "max_ms": 1e12, "determinism_fatal": False}
# Rationale: the reward's 5% margin (README: "more than 5% faster").
MARGIN = 1.05


def log(msg: str) -> None:
    print(f"[caf_agent_data.evaluate] {msg}", file=sys.stderr, flush=True)


def _geo(xs: list) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _run(pool, jobs: list, what: str, stopped: list) -> list:
    """Results in job order; after a stop (stop.Stopped: SIGTERM, SIGINT) the jobs not
    finished are None and `stopped` holds the reason."""
    from .stop import Stopped
    out, t0 = [None] * len(jobs), time.time()
    try:
        for n, (idx, r) in enumerate(pool.map(jobs), start=1):
            out[idx] = r
            if n % 25 == 0 or n == len(jobs):
                log(f"{what}: {n}/{len(jobs)} in {time.time() - t0:.0f} s")
    except Stopped as e:
        stopped.append(str(e))
    return out


def _retry_alone(results: list, jobs: list, timeout_s: float, threads: int, stopped: list, what: str) -> list:
    """Runs again, in one slot with the whole device, the jobs whose result says retry_alone
    (refused for size or out of memory under a memory share); notes the retry."""
    from .slots import SlotPool
    again = [i for i, r in enumerate(results) if r and r.get("retry_alone")]
    if not again or stopped:
        return results
    log(f"{what}: {len(again)} tasks again, alone on the device")
    with SlotPool(1, timeout_s, threads) as pool:
        redo = _run(pool, [(jobs[i][0], jobs[i][1], dict(jobs[i][2], memory_share=1.0)) for i in again],
                    f"{what} alone", stopped)
    for i, r in zip(again, redo):
        if r is not None:
            r.setdefault("notes", []).append(f"run alone on the device after: {results[i]['reason'][:160]}")
            results[i] = r
    return results


def _not_reached(name: str, why: str) -> dict:
    return {"name": name, "kept": False, "stage": "not_reached", "reason": why}


def level_table(rows: list, paper_bounds: tuple = (1.0, 100.0)) -> dict:
    """Per level (and "all"): tasks, measured, refused by stage, eager and compile statistics."""
    by = defaultdict(list)
    for r in rows:
        by[str(r["level"])].append(r)
        by["all"].append(r)
    table = {}
    for lv, rs in sorted(by.items(), key=lambda kv: (kv[0] == "all", kv[0])):
        eager = [r["eager_ms"] for r in rs if r.get("eager_ms")]
        both = [r for r in rs if r.get("eager_ms") and r.get("compile_ms")]
        ratio = [r["eager_ms"] / r["compile_ms"] for r in both]
        lo, hi = paper_bounds
        table[lv] = {
            "tasks": len(rs), "eager_measured": len(eager), "compile_measured": len(both),
            "refused": dict(Counter(r["stage"] for r in rs if not r.get("eager_ms"))),
            "compile_failed": dict(Counter(r["compile_stage"] for r in rs
                                           if r.get("eager_ms") and r.get("compile_stage"))),
            "nondeterministic": sum(1 for r in rs if r.get("notes")),
            "eager_ms_median": statistics.median(eager) if eager else None,
            "eager_ms_geomean": _geo(eager),
            "compile_ms_median": statistics.median([r["compile_ms"] for r in both]) if both else None,
            "compile_speedup_geomean": _geo(ratio),
            "compile_faster_5pct": sum(1 for x in ratio if x > MARGIN),
            "compile_slower_5pct": sum(1 for x in ratio if x < 1 / MARGIN),
            "eager_within_paper_bounds": sum(1 for e in eager if lo <= e <= hi),
        }
    return table


def _round_robin(idx: list, levels: list) -> list:
    """idx reordered so the levels take turns (a cut-short pass covers every level)."""
    by = defaultdict(list)
    for i in idx:
        by[levels[i]].append(i)
    queues, out = [by[k] for k in sorted(by, key=str)], []
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


def evaluate(tasks: list, device: str, slots: int, threads: int, timeout_s: float, compile_timeout_s: float,
             do_compile: bool, seed: int = 0, options: dict | None = None, compile_budget_s: float = 0.0,
             partial_out: str = "") -> dict:
    """tasks: TaskRecords. Returns {"rows", "levels", "wall_s", ...}. compile_budget_s > 0:
    no compile job starts after that many seconds of the compile pass (the rest is recorded
    as not reached)."""
    from .slots import SlotPool
    t0 = time.time()
    base = dict(MEASURE, device=device, seed=seed, **(options or {}))
    names = [t.name for t in tasks]
    stopped: list = []
    eager_jobs = [(n, t.source, dict(base)) for n, t in zip(names, tasks)]
    with SlotPool(slots, timeout_s, threads) as pool:
        eager = _run(pool, eager_jobs, "eager", stopped)
    eager = _retry_alone(eager, eager_jobs, timeout_s, threads, stopped, "eager")
    eager = [r or _not_reached(n, stopped[0]) for n, r in zip(names, eager)]
    t_eager = time.time() - t0
    rows = []
    for t, r in zip(tasks, eager):
        rows.append({"name": t.name, "level": t.level, "origin": t.origin, "stage": r["stage"] or "measured",
                     "reason": r["reason"], "eager_ms": r.get("eager_ms") if r["kept"] else None,
                     "notes": r.get("notes", []), "job_s": r.get("job_s"),
                     "input_shapes": r.get("input_shapes"), "params": r.get("params")})
    if partial_out:  # the eager pass survives a run cut short during the compile pass
        with open(partial_out, "w", encoding="utf-8") as f:
            json.dump({"rows": rows, "levels": level_table(rows), "eager_pass_s": round(t_eager, 1)}, f, indent=1)
    t_compile = 0.0
    if do_compile and not stopped:
        todo = _round_robin([i for i, r in enumerate(rows) if r["eager_ms"]], [t.level for t in tasks])
        t1 = time.time()
        with SlotPool(slots, compile_timeout_s, threads) as pool:
            step = 2 * slots
            for k in range(0, len(todo), step):
                if stopped or (compile_budget_s and time.time() - t1 > compile_budget_s):
                    why = stopped[0] if stopped else f"the compile pass's budget ({compile_budget_s:g} s) ran out first"
                    for i in todo[k:]:
                        rows[i]["compile_stage"], rows[i]["compile_reason"] = "not_reached", why
                    break
                chunk = todo[k:k + step]
                cjobs = [(names[i], tasks[i].source, dict(base, compile=True)) for i in chunk]
                comp = _run(pool, cjobs, f"compile {k + len(chunk)}/{len(todo)}", stopped)
                comp = _retry_alone(comp, cjobs, compile_timeout_s, threads, stopped, "compile")
                comp = [r or _not_reached(names[i], stopped[0]) for i, r in zip(chunk, comp)]
                for i, r in zip(chunk, comp):
                    if r["kept"]:
                        rows[i]["compile_ms"] = r["compile_ms"]
                    else:
                        rows[i]["compile_stage"], rows[i]["compile_reason"] = r["stage"], r["reason"]
        t_compile = time.time() - t1
    return {"rows": rows, "levels": level_table(rows), "device": device, "slots": slots,
            "aborted": stopped[0] if stopped else None,
            "eager_pass_s": round(t_eager, 1), "compile_pass_s": round(t_compile, 1),
            "wall_s": round(time.time() - t0, 1)}


def markdown(report: dict) -> str:
    """The per-level table and every refusal, as Markdown."""
    f = lambda x, d=3: "-" if x is None else f"{x:.{d}f}"  # noqa: E731
    lines = ["| level | tasks | eager measured | compile measured | refused | eager median ms | "
             "eager geo ms | compile median ms | eager/compile geo | compile >5% faster | "
             "compile >5% slower | eager in 1-100 ms |", "|" + "---|" * 12]
    for lv, s in report["levels"].items():
        refused = sum(s["refused"].values())
        lines.append(f"| {lv} | {s['tasks']} | {s['eager_measured']} | {s['compile_measured']} | {refused} | "
                     f"{f(s['eager_ms_median'])} | {f(s['eager_ms_geomean'])} | {f(s['compile_ms_median'])} | "
                     f"{f(s['compile_speedup_geomean'])} | {s['compile_faster_5pct']} | {s['compile_slower_5pct']} | "
                     f"{s['eager_within_paper_bounds']} |")
    unreached = [r for r in report["rows"] if r["eager_ms"] and r.get("compile_stage") == "not_reached"]
    bad = [r for r in report["rows"] if not r["eager_ms"] or (r.get("compile_stage") and r not in unreached)]
    if unreached:
        lines += ["", f"torch.compile not reached for {len(unreached)} tasks: {unreached[0]['compile_reason']}"]
    if bad:
        lines += ["", "Not measured (stage: reason):", ""]
        for r in bad:
            if not r["eager_ms"]:
                lines.append(f"- `{r['name']}`: {r['stage']}: {r['reason'][:300]}")
            else:
                lines.append(f"- `{r['name']}` (compile): {r['compile_stage']}: {r['compile_reason'][:300]}")
    nd = [r for r in report["rows"] if r.get("notes")]
    if nd:
        lines += ["", "Nondeterministic (measured, noted):", ""]
        lines += [f"- `{r['name']}`: {r['notes'][0][:200]}" for r in nd]
    return "\n".join(lines) + "\n"


def parse_levels(text: str) -> tuple | None:
    if not text:
        return None
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise SystemExit(f"--levels {text!r}: want numbers like 1,2,3") from None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m caf_agent_data.evaluate", description=__doc__.split("\n")[0])
    p.add_argument("--tasks", required=True, help="task set: KernelBench checkout, directory, manifest, parquet")
    p.add_argument("--levels", default="", help="KernelBench levels to take, e.g. 1,2,3 (default all)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--slots", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="torch threads per slot")
    p.add_argument("--timeout-s", type=float, default=120.0, help="deadline of one eager job")
    p.add_argument("--compile", action="store_true", help="also time torch.compile (second pass)")
    p.add_argument("--compile-timeout-s", type=float, default=300.0, help="deadline of one compile job")
    p.add_argument("--compile-budget-s", type=float, default=0.0, help="start no compile job after this long (0: no limit)")
    p.add_argument("--time-budget-s", type=float, default=None, help="timing budget per task (filter.DEFAULTS budget_s)")
    p.add_argument("--serial-timing", action="store_true",
                   help="slots take turns timing (a lock file): no two timings overlap on a shared GPU")
    p.add_argument("--memory-share", type=float, default=0.0,
                   help="each slot's share of the device memory in the size check (default: 1/slots on a GPU, 1 on a CPU)")
    p.add_argument("--limit", type=int, default=0, help="only the first N tasks (a smoke run)")
    p.add_argument("--out", default="", help="write the report (JSON) here")
    p.add_argument("--markdown", default="", help="write the per-level table and refusals (Markdown) here")
    a = p.parse_args(argv)
    levels = parse_levels(a.levels)
    try:
        ts = read_task_set(a.tasks, levels)
    except TaskSetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    tasks = [t for t in ts.tasks if not levels or t.level in levels]
    if a.limit:
        tasks = tasks[:a.limit]
    log(f"{len(tasks)} tasks from {a.tasks} ({len(ts.refused)} files refused by the reader)")
    import signal
    import tempfile
    import torch
    from .stop import on_signal as _stop
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    opts = {}
    if a.time_budget_s is not None:
        opts["budget_s"] = a.time_budget_s
    share = a.memory_share or (1.0 / a.slots if a.device.startswith("cuda") else 1.0)
    opts["memory_share"] = min(1.0, share)
    lock_dir = tempfile.mkdtemp(prefix="caf_eval_lock_") if a.serial_timing else ""
    if lock_dir:
        opts["timing_lock"] = lock_dir + "/timing.lock"
    report = evaluate(tasks, a.device, a.slots, a.threads, a.timeout_s, a.compile_timeout_s, a.compile,
                      options=opts, compile_budget_s=a.compile_budget_s,
                      partial_out=a.out + ".eager" if a.out else "")
    report["options"] = dict(opts, serial_timing=a.serial_timing)
    report.update(tasks_path=a.tasks, level_filter=list(levels or []), torch=torch.__version__,
                  reader_refused=[{"where": w, "reason": r} for w, r in ts.refused],
                  gpu=torch.cuda.get_device_name(0) if a.device.startswith("cuda") and torch.cuda.is_available() else None,
                  command="python -m caf_agent_data.evaluate " + " ".join(argv if argv is not None else sys.argv[1:]))
    md = markdown(report)
    print(md)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1, sort_keys=True)
    if a.markdown:
        with open(a.markdown, "w", encoding="utf-8") as f:
            f.write(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
