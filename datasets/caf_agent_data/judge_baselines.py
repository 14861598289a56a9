"""Eager and torch.compile baselines of a task set measured by the judge itself: each task is
one baseline job (skills/eval_worker's mode "baseline", caf_agent_eval/baseline.py) sent to
an eval worker over the slot protocol, the frames a GPU-pool slot sends
(gpu_pool/worker_process); N workers are N slots sharing the device.

    PYTHONPATH=datasets .venv/bin/python -m caf_agent_data.judge_baselines \\
        --tasks KernelBench --levels 1,2,3 --device cuda --slots 12 --out kb.json --markdown kb.md

Two passes: eager for every task first (compile_baseline off), then eager and
torch.compile, so a budget that runs out during the compile pass still leaves every task's
eager baseline. The workers load, validate and compile side by side; they take turns
timing (CAF_EVAL_TIMING_LOCK: exclusive for a timing, shared for validation and a model's
first call, baseline.gpu_turn), so a measurement shares the GPU with no other measurement and
no validation. A job starts only while
the judge's own size estimates of the jobs running (task_check.needed_bytes, baseline mode,
from meta tensors) add up to at most --fill of the device, largest first; each worker has
the whole device as its slot's limit, so a refusal for size is the one a dedicated slot
gives. A job without an answer within --job-timeout (a hang, a worker that died: out of
memory) restarts its worker and runs once more alone on the device; a second failure is
recorded with both reasons. Every task read gets exactly one row: measured, refused by the
loader or the judge (with the reason), failed, or not reached within --budget-s.

Baselines go into the judge's one cache (caf_agent_eval/baseline_cache.py; --cache-dir is
its CAF_EVAL_BASELINE_DIR), so later runs and the slots' profile jobs reuse them.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import signal
import statistics
import sys
import tempfile
import threading
import time

from .readers import TaskSetError, read_task_set

HERE = os.path.dirname(os.path.abspath(__file__))
EVAL_WORKER = os.path.join(HERE, "..", "..", "skills", "eval_worker")
# Rationale: the reward's 5% margin (README: "more than 5% faster").
MARGIN = 1.05
# Rationale: a task whose size cannot be estimated (it does not run on meta tensors) is
# admitted as if it needed this much: KernelBench's largest estimated jobs are ~20 GiB.
UNKNOWN_GIB = 20.0


def log(msg: str) -> None:
    print(f"[caf_agent_data.judge_baselines] {msg}", file=sys.stderr, flush=True)


def _client_mod():
    sys.path.insert(0, os.path.abspath(EVAL_WORKER))
    from caf_agent_eval import protocol
    from caf_agent_eval.client import WorkerClient
    return protocol, WorkerClient


def estimates(tasks: list, cache_path: str | None, procs: int) -> list:
    """The judge's estimate of each task's baseline job in GiB (task_check.cached_estimates,
    mode "baseline": validation's copies or the timing's, one model); None where the task does
    not run on meta tensors. Rationale: a baseline job holds far less than a profile (no
    child, no checks): packing by the profile's estimate ran KernelBench's 6 GiB tasks one at
    a time (96-128 GiB each against 26-34 for what a baseline job holds)."""
    _client_mod()
    from caf_agent_eval import task_check
    return task_check.cached_estimates([(t.name, t.source) for t in tasks], "baseline", cache_path, procs)


def worker_device(device: str) -> str:
    """The eval worker's --device: a CUDA device with its index (the worker's
    torch.cuda.set_device refuses a bare "cuda")."""
    return "cuda:0" if device == "cuda" else device


class Slot:
    """One eval worker (a slot), restarted when a job gets no answer."""

    def __init__(self, a, env: dict):
        self.a, self.env = a, env
        self.client = None
        self.start()

    def start(self):
        protocol, WorkerClient = _client_mod()
        if self.client is not None:
            self.client.proc.kill()
            self.client.proc.wait()
        self.client = WorkerClient(device=worker_device(self.a.device), threads=self.a.threads, env=self.env)
        self.client.request({"op": "ping"}, timeout_s=600)

    def run(self, task, compile_: bool) -> dict:
        """One baseline job -> its row fields (status, times, reason)."""
        protocol, _ = _client_mod()
        opts = {"timing": {"compile_baseline": compile_, "budget_s": self.a.time_budget_s,
                           "min_iters": self.a.min_iters, "max_iters": self.a.max_iters}}
        if self.a.warmup_s is not None:
            opts["timing"]["warmup_s"] = self.a.warmup_s
        req = {"op": "eval", "job_id": secrets.token_hex(6), "mode": "baseline",
               "task": {"name": task.name, "model_py": task.source}, "files": {},
               "seed_secret": secrets.token_hex(16), "options": opts}
        t0 = time.monotonic()
        try:
            r = self.client.request(req, self.a.job_timeout)
        except protocol.FrameError as e:  # no answer in time, or the worker died
            code = self.client.proc.poll()
            why = (f"the eval worker died (exit {code})" if code is not None else
                   f"no answer within {self.a.job_timeout:.0f} s") + f": {type(e).__name__}"
            self.start()
            return {"status": "no_verdict", "reason": why, "wall_s": round(time.monotonic() - t0, 2)}
        out = {"wall_s": round(time.monotonic() - t0, 2)}
        if r.get("status") != "ok":
            out.update(status="infra_error", reason=str(r.get("error", ""))[-600:])
            return out
        v = r["verdict"]
        if "task_error" in v.get("flags", []):
            out.update(status="task_error", reason=v.get("task_error", v.get("reason", "")))
            return out
        t, b = v.get("timings", {}), v.get("baseline", {})
        out.update(status="measured", eager_ms=t.get("eager_ms"), compile_ms=t.get("compile_ms"),
                   compile_error=t.get("compile_error", ""), calls=t.get("calls"), cv=t.get("cv"),
                   source=b.get("source"), seconds=b.get("seconds"), device=b.get("device"),
                   torch=b.get("torch"))
        return out

    def close(self):
        try:
            self.client.close()
        except Exception:
            pass


# Rationale: a job that got no verdict or an infrastructure error (the worker's answer was
# not a verdict: e.g. CUDA out of memory with other slots' jobs beside it, whose estimates
# undercount torch.compile's own buffers) is the packing's failure, not the task's: it runs
# once more at the end of its pass with the device to itself. On the H200 (2026-12-03) the
# compile jobs of level1/19_ReLU and level1/76 ran out of memory beside 13 other slots.
RETRIED_ALONE = ("no_verdict", "infra_error")


def run_pass(slots: list, tasks: list, est: list, rows: list, compile_: bool, a, t_start: float,
             total_bytes: float) -> None:
    """One pass over the tasks whose rows are still open for it, on every slot."""
    key = "compile" if compile_ else "eager"
    cap = a.fill * total_bytes / 2**30 if total_bytes else math.inf
    need = [est[i] if est[i] is not None else UNKNOWN_GIB for i in range(len(tasks))]
    queue = sorted([i for i, r in enumerate(rows) if r.get("pass_" + key) is None
                    and r.get("status") not in ("refused", "task_error")], key=lambda i: -need[i])
    state = {"in_use": 0.0, "running": 0, "done": 0}
    cond = threading.Condition()
    n_all = len(queue)
    again: list = []

    def work(slot):
        while True:
            with cond:
                while True:
                    if not queue or time.monotonic() - t_start > a.budget_s:
                        return
                    pick = next((i for i in queue if state["running"] == 0
                                 or state["in_use"] + need[i] <= cap), None)
                    if pick is not None:
                        queue.remove(pick)
                        rows[pick]["in_flight"] = key
                        state["in_use"] += need[pick]
                        state["running"] += 1
                        break
                    cond.wait(0.5)
            res = slot.run(tasks[pick], compile_)
            with cond:
                state["in_use"] -= need[pick]
                state["running"] -= 1
                state["done"] += 1
                rows[pick].pop("in_flight", None)
                if res["status"] in RETRIED_ALONE:
                    again.append((pick, res))  # once more at the end, alone on the device
                else:
                    rows[pick]["pass_" + key] = res
                    _fold(rows[pick], res, compile_)
                cond.notify_all()
                if state["done"] % 25 == 0 or state["done"] == n_all:
                    log(f"{key} pass: {state['done']}/{n_all} at {time.monotonic() - t_start:.0f} s")
    threads = [threading.Thread(target=work, args=(s,)) for s in slots]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():  # with a timeout: a signal handler runs between the waits
            t.join(0.5)
    for pick, res in again:  # a hang, a worker that died, out of memory beside the others
        if time.monotonic() - t_start > a.budget_s:
            res["reason"] += "; not run again alone: --budget-s reached"
            retry = res
        else:
            retry = slots[0].run(tasks[pick], compile_)
            retry["retried_alone"] = True
            if retry["status"] in RETRIED_ALONE:
                retry["reason"] = f"{res['reason']}; alone: {retry['reason']}"
        rows[pick]["pass_" + key] = retry
        _fold(rows[pick], retry, compile_)


def _fold(row: dict, res: dict, compile_: bool) -> None:
    """A pass's result into the task's row: the eager time from either pass (the compile
    pass's where it has one: both functions timed in the same rounds), the compile time and
    the first refusal or failure with its reason."""
    if res["status"] == "measured":
        row["status"] = "measured"
        row["eager_ms"] = res["eager_ms"]
        if compile_:
            row["compile_ms"] = res["compile_ms"]
            if res.get("compile_error"):
                row["compile_failed"] = res["compile_error"].strip().splitlines()[-1][:400]
        row["device"] = res.get("device")
    elif res["status"] == "task_error":
        row["status"], row["reason"] = "task_error", res["reason"]
    elif not compile_ or row.get("status") != "measured":
        row["status"], row["reason"] = res["status"], res["reason"]
    else:  # eager measured, the compile job failed: the compile time is what is missing
        row["compile_failed"] = f"{res['status']}: {res['reason']}"


def _geo(xs: list):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summarise(rows: list) -> dict:
    out = {}
    for lv in sorted({r["level"] for r in rows if r["level"] is not None}) + [None]:
        rs = [r for r in rows if lv is None or r["level"] == lv]
        eager = [r["eager_ms"] for r in rs if r.get("eager_ms")]
        both = [r for r in rs if r.get("eager_ms") and r.get("compile_ms")]
        ratio = [r["eager_ms"] / r["compile_ms"] for r in both]
        reasons: dict = {}
        for r in rs:
            if r["status"] != "measured":
                reasons[r["status"]] = reasons.get(r["status"], 0) + 1
        out["all" if lv is None else f"level{lv}"] = {
            "tasks": len(rs), "eager_measured": len(eager), "compile_measured": len(both),
            "compile_failed": sum(1 for r in rs if r.get("compile_failed")),
            "compile_stopped": sum(1 for r in rs if r.get("compile_stopped")),
            "not_measured": reasons,
            "eager_ms_median": statistics.median(eager) if eager else None,
            "eager_ms_geomean": _geo(eager),
            "compile_ms_median": statistics.median([r["compile_ms"] for r in both]) if both else None,
            "eager_over_compile_geomean": _geo(ratio),
            "compile_faster": sum(1 for x in ratio if x > MARGIN),
            "compile_slower": sum(1 for x in ratio if x < 1 / MARGIN),
            "eager_1_100_ms": sum(1 for x in eager if 1 <= x <= 100)}
    return out


def markdown(report: dict) -> str:
    f = lambda x, p=3: "-" if x is None else f"{x:.{p}f}"  # noqa: E731
    lines = ["| level | tasks | eager measured | compile measured | compile failed | not measured | "
             "eager median ms | eager geomean ms | compile median ms | geomean eager/compile | "
             "compile >5% faster | >5% slower | eager in 1-100 ms |", "|" + "---|" * 13]
    for name, s in report["summary"].items():
        nm = ", ".join([f"{k} {v}" for k, v in sorted(s["not_measured"].items())]
                       + ([f"compile stopped {s['compile_stopped']}"] if s.get("compile_stopped") else [])) or "0"
        lines.append(f"| {name} | {s['tasks']} | {s['eager_measured']} | {s['compile_measured']} | "
                     f"{s['compile_failed']} | {nm} | {f(s['eager_ms_median'])} | {f(s['eager_ms_geomean'])} | "
                     f"{f(s['compile_ms_median'])} | {f(s['eager_over_compile_geomean'])} | "
                     f"{s['compile_faster']} | {s['compile_slower']} | {s['eager_1_100_ms']} |")
    lines += ["", "Not measured, or measured without a compile time, with the reason:", ""]
    for r in report["rows"]:
        if r["status"] != "measured" or r.get("compile_failed") or r.get("compile_ms") is None:
            why = r.get("reason") or r.get("compile_failed") or r.get("compile_stopped") or "compile pass not reached"
            what = r["status"] if r["status"] != "measured" else "eager only"
            lines.append(f"- L{r['level']} {r['name']}: {what}: {why}"[:600])
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", required=True, help="a task set: KernelBench checkout, directory, manifest, parquet")
    p.add_argument("--levels", default="", help="comma-separated levels (KernelBench checkouts)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--slots", type=int, default=1, help="eval workers side by side")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads per worker")
    p.add_argument("--fill", type=float, default=0.85, help="share of the device the running jobs' estimates may fill")
    p.add_argument("--memory-bytes", type=float, default=None, help="the device's memory (default: torch's)")
    p.add_argument("--job-timeout", type=float, default=180.0)
    p.add_argument("--budget-s", type=float, default=1e9, help="no job starts after this many seconds")
    p.add_argument("--time-budget-s", type=float, default=0.5, help="timing.budget_s of each job")
    p.add_argument("--min-iters", type=int, default=20)
    p.add_argument("--max-iters", type=int, default=300)
    p.add_argument("--warmup-s", type=float, default=None)
    p.add_argument("--no-compile", action="store_true", help="the eager pass only")
    p.add_argument("--limit", type=int, default=None, help="the first N tasks (a dry run)")
    p.add_argument("--estimates", default=None, help="JSON cache of the size estimates")
    p.add_argument("--cache-dir", default=None, help="the judge's baseline cache (CAF_EVAL_BASELINE_DIR)")
    p.add_argument("--no-timing-lock", action="store_true", help="let the slots time side by side")
    p.add_argument("--out", required=True)
    p.add_argument("--markdown", default=None)
    a = p.parse_args(argv)
    t_start = time.monotonic()
    levels = tuple(int(x) for x in a.levels.split(",") if x.strip()) or None
    try:
        ts = read_task_set(a.tasks, levels)
    except TaskSetError as e:
        log(f"error: {e}")
        return 2
    tasks = ts.tasks[:a.limit] if a.limit else ts.tasks
    rows = [{"name": t.name, "level": t.level, "identity": t.identity, "status": None} for t in tasks]
    refused = [{"name": os.path.basename(str(w)), "level": None, "status": "refused", "reason": why}
               for w, why in ts.refused]
    log(f"{len(tasks)} tasks read from {a.tasks} ({len(refused)} refused by the reader)")
    env = {"CAF_EVAL_BASELINE_DIR": a.cache_dir} if a.cache_dir else {}
    lock = None
    if not a.no_timing_lock:
        lock = tempfile.NamedTemporaryFile(prefix="caf_timing_", suffix=".lock", delete=False)
        env["CAF_EVAL_TIMING_LOCK"] = lock.name
    total = a.memory_bytes
    if total is None and a.device.startswith("cuda"):
        import torch
        total = torch.cuda.get_device_properties(torch.device(a.device)).total_memory
    slots: list = [None] * max(1, a.slots)
    start_errors: list = []

    def start_slot(k):
        try:
            slots[k] = Slot(a, env)
        except Exception as e:  # the worker did not come up: the run goes on with the others
            start_errors.append(f"slot {k}: {type(e).__name__}: {e}")
    starters = [threading.Thread(target=start_slot, args=(k,)) for k in range(len(slots))]
    for t in starters:
        t.start()
    est = estimates(tasks, a.estimates, procs=max(1, min(8, (os.cpu_count() or 2) // 2)))
    for t in starters:
        while t.is_alive():
            t.join(0.5)
    started_s = time.monotonic() - t_start
    slots = [x for x in slots if x is not None]
    for e in start_errors:
        log(f"an eval worker did not start: {e[:400]}")
    if not slots:
        log("error: no eval worker started (see above and the workers' stderr)")
        return 2
    log(f"{len(slots)} slots up, estimates done at {started_s:.1f} s")
    passes: dict = {}

    def finish(stop_reason: str = "") -> dict:
        for r, g in zip(rows, est):
            r["estimate_profile_gib"] = g
            flight = r.pop("in_flight", None)
            if flight and r["status"] == "measured":
                # Not a failure of the compile: the run ended first (counted apart, see summarise).
                r["compile_stopped"] = f"the {flight} job was running when the run stopped: {stop_reason}"
            elif flight:
                r["status"], r["reason"] = "stopped", f"the {flight} job was running: {stop_reason}"
            elif r["status"] is None:
                r["status"] = "not_reached"
                r["reason"] = stop_reason or f"not started within --budget-s {a.budget_s:.0f} s"
        all_rows = rows + refused
        report = {"format": "caf_agent_baselines", "version": 1, "tasks": a.tasks, "levels": a.levels,
                  "device": a.device, "slots": a.slots, "options": vars(a), "stopped": stop_reason,
                  "seconds": {"start": round(started_s, 1), **passes,
                              "total": round(time.monotonic() - t_start, 1)},
                  "summary": summarise(all_rows), "rows": all_rows}
        report["gpu"] = next((r.get("device") for r in rows if r.get("device")), None)
        with open(a.out, "w") as f:
            json.dump(report, f, indent=1)
        if a.markdown:
            with open(a.markdown, "w") as f:
                f.write(f"device: {report['gpu'] or a.device}; {a.slots} slots; seconds "
                        f"{report['seconds']}{'; stopped: ' + stop_reason if stop_reason else ''}\n\n"
                        + markdown(report))
        if lock:
            try:
                os.unlink(lock.name)
            except OSError:
                pass
        return report

    def on_signal(signum, _frame):
        # Rationale: the device call's time limit ends the run with SIGTERM; what was
        # measured is written, the jobs in flight are recorded as stopped (exactly one row
        # each), and the workers follow on the EOF of their stdin.
        finish(f"stopped by signal {signum} ({time.monotonic() - t_start:.0f} s): the job was "
               "running or not started yet")
        os._exit(3)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    for compile_ in ([False] if a.no_compile else [False, True]):
        t0 = time.monotonic()
        run_pass(slots, tasks, est, rows, compile_, a, t_start, total or 0)
        passes["compile" if compile_ else "eager"] = round(time.monotonic() - t0, 1)
    for s in slots:
        s.close()
    report = finish()
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
