"""Scores a folder of submissions over KernelBench levels 1-3 (or any folder of tasks) with the
judge, or reads a policy's evaluation records, and writes the CUDA Agent paper's table per
level (report.md, report.json).

    PYTHONPATH=datasets .venv/bin/python -m caf_agent_data.kernelbench_eval \\
        --kernelbench bench/judge/external/KernelBench/KernelBench --levels 1,2,3 \\
        --submissions subs --device cuda:0 --workers 4 --out kb_eval
    ./x kernelbench --tasks skills/tasks --replay skills/replay/default.jsonl --out eval_out
    ./x kernelbench --records records.jsonl --kernelbench KB/KernelBench --out policy_eval
    ./x kernelbench --report-only --out kb_eval
    ./x kernelbench extract-replay --replay skills/replay/cuda_demonstrations.jsonl --out subs

Each problem is one "final" job (5 seeded checks, then timing against the eager and
torch.compile baselines) on one of --workers eval workers (caf_agent_eval's WorkerClient, the
slot protocol). Every verdict is appended to OUT/results.jsonl as it arrives (flushed and
synced); a second run skips the problems already there with the same submission and task, so a
kill loses only the jobs in flight. A job without an answer within --job-timeout kills and
restarts its worker and is recorded as "no verdict: timeout". SIGTERM/SIGINT stop the run:
workers killed, report written, exit 128 + the signal. Columns: kernelbench_table.DEFINITIONS;
how to run: datasets/README.md.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time

from . import kernelbench_inputs as inputs
from . import kernelbench_table as table
from .kernelbench_inputs import InputError, SubmissionError

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EVAL_WORKER = os.path.join(ROOT, "skills", "eval_worker")
# Rationale: a first job of a large level-3 task measures its torch.compile baseline (minutes of
# compilation on a cold cache) besides building the kernels; 10 minutes only trips on a hang.
DEFAULT_JOB_TIMEOUT_S = 600.0
# Rationale: a worker's start imports torch and forks its server (seconds; tens on a loaded host).
START_TIMEOUT_S = 300.0
RETRYABLE = ("no_verdict", "infra_error")


def log(msg: str) -> None:
    """A line on stderr, prefixed with the tool's name."""
    print(f"kernelbench_eval: {msg}", file=sys.stderr, flush=True)


def _eval_mod():
    if EVAL_WORKER not in sys.path:
        sys.path.insert(0, EVAL_WORKER)
    from caf_agent_eval import options, protocol
    from caf_agent_eval.client import WorkerClient
    return options, protocol, WorkerClient


def _hms(s: float) -> str:
    s = int(max(0, s))
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


class Stopped(Exception):
    """The run is stopping (a signal): the job in flight is dropped, not recorded."""


class Slot:
    """One eval worker (a slot), restarted when a job gets no answer."""

    def __init__(self, a, env: dict, log_file, stop: threading.Event):
        self.a, self.env, self.log_file, self.stop = a, env, log_file, stop
        self.client = None
        self.dead = ""

    def start(self) -> None:
        """Starts (or restarts) the worker and waits for its answer to a ping."""
        _, protocol, WorkerClient = _eval_mod()
        self.kill()
        if self.stop.is_set():
            raise Stopped()
        self.client = WorkerClient(device=self.a.device, threads=self.a.threads, build_root=self.a.build_root,
                                   env=self.env, stderr=self.log_file)
        try:
            self.client.request({"op": "ping"}, timeout_s=START_TIMEOUT_S)
        except (protocol.FrameError, OSError) as e:
            if self.stop.is_set():
                raise Stopped() from None
            code = self.client.proc.poll()
            self.kill()
            raise RuntimeError(f"the eval worker did not start ({type(e).__name__}"
                               f"{f', exit {code}' if code is not None else ''}; see {self.a.worker_log})") from None

    def kill(self, wait: bool = True) -> None:
        """Kills the worker process (its children follow: PDEATHSIG); wait=False from a signal
        handler (no waiting on a lock the interrupted code may hold)."""
        if self.client is not None and self.client.proc.returncode is None:
            try:
                self.client.proc.kill()
            except ProcessLookupError:
                pass
            if wait:
                self.client.proc.wait()

    def judge(self, problem, source: str, files: dict, options: dict) -> dict:
        """One final job -> the row's verdict fields; no answer -> status no_verdict (the
        worker restarted; if that fails the slot is marked dead)."""
        _, protocol, _ = _eval_mod()
        req = {"op": "eval", "job_id": secrets.token_hex(8), "mode": "final",
               "task": {"name": problem.stem, "model_py": source}, "files": files,
               "seed_secret": secrets.token_hex(16), "options": options}
        try:
            r = self.client.request(req, self.a.job_timeout)
        except (protocol.FrameError, OSError) as e:
            if self.stop.is_set():
                raise Stopped() from None
            code = self.client.proc.poll()
            why = (f"no verdict: the eval worker died (exit {code}; see {self.a.worker_log})" if code is not None
                   else f"no verdict: timeout (no answer within {self.a.job_timeout:g} s; worker restarted)")
            try:
                self.start()
            except Stopped:
                raise
            except Exception as e2:  # noqa: BLE001 (any start failure ends this slot, with the reason)
                self.dead = str(e2)
            return {"status": "no_verdict", "reason": f"{why} [{type(e).__name__}]"}
        if r.get("status") != "ok":
            return {"status": "infra_error", "reason": str(r.get("error", r.get("status")))[-2000:]}
        return verdict_fields(r["verdict"])

    def close(self, graceful: bool) -> None:
        """Shuts the worker down (graceful) or kills it."""
        if self.client is None:
            return
        if graceful and self.client.proc.poll() is None:
            self.client.close()
        self.kill()


def verdict_fields(v: dict) -> dict:
    """The verdict fields a row keeps (the optional ones only where the verdict has them)."""
    t = v.get("timings") or {}
    flags = list(v.get("flags") or [])
    out = {"status": "judged", "correct": bool(v.get("correct")), "reward": v.get("reward"),
           "reward_reason": v.get("reward_reason", ""), "flags": flags,
           "reason": str(v.get("reason") or "")[:2000], "task_error": "task_error" in flags,
           "speedup_eager": v.get("speedup_eager"), "speedup_compile": v.get("speedup_compile"),
           "candidate_ms": t.get("candidate_ms"), "eager_ms": t.get("eager_ms"), "compile_ms": t.get("compile_ms")}
    for k in ("kernelbench_correct", "task_degenerate"):
        if k in v:
            out[k] = v[k]
    return out


class Run:
    """The judging of one problem set: the queue, the results file, progress and the report."""

    def __init__(self, a, problems: list, meta: dict):
        self.a, self.problems, self.meta = a, problems, meta
        self.results = os.path.join(a.out, "results.jsonl")
        self.rows: dict = {}        # key -> the row the report shows
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.signal = 0
        self.slots: list = []
        self.t0 = time.monotonic()
        self.jobs_done = 0
        self.jobs_total = 0

    def record(self, row: dict) -> None:
        """Appends the row to results.jsonl (flushed, synced), prints progress, rewrites the report."""
        with self.lock:
            row = {"format_version": table.FORMAT_VERSION, **row,
                   "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            with open(self.results, "a", encoding="utf-8") as f:
                f.write(json.dumps(row, default=str) + "\n")
                f.flush()
                os.fsync(f.fileno())
            self.rows[row["key"]] = row
            if "wall_s" in row:
                self.jobs_done += 1
            el = time.monotonic() - self.t0
            left = self.jobs_total - self.jobs_done
            eta = el / self.jobs_done * left if self.jobs_done else 0.0
            took = f" {row['wall_s']:.1f} s" if "wall_s" in row else ""
            print(f"[{len(self.rows)}/{len(self.problems)}] {row['level']}/{row['problem']}: "
                  f"{table.describe(row)[:160]}{took}; elapsed {_hms(el)}, eta {_hms(eta)}",
                  file=sys.stderr, flush=True)
            self.write_report()

    def on_signal(self, signum, _frame) -> None:
        """SIGINT/SIGTERM: stop taking jobs, kill the workers (their jobs are dropped)."""
        self.signal = signum
        self.stop.set()
        for s in self.slots:
            s.kill(wait=False)

    def write_report(self) -> None:
        """The report over the problems' current rows (those not yet judged: not_evaluated)."""
        rows = [self.rows[p.key] for p in self.problems if p.key in self.rows]
        rows = table.with_missing(rows, self.problems, "not_evaluated", "not judged yet (the run stopped or is running)")
        table.write_report(self.a.out, table.summarise(rows, self.meta))


def _base_row(p, sub_hash, task_hash) -> dict:
    return {"key": p.key, "level": p.level, "problem": p.stem, "submission_hash": sub_hash, "task_hash": task_hash}


def plan(run: Run, a) -> list:
    """Reads every submission; returns the jobs to judge [(problem, source, files, base row)]
    after recording missing and refused submissions and keeping rows already in results.jsonl."""
    prior: dict = {}
    if os.path.exists(run.results):
        for r in table.read_results(run.results, log):
            prior[r["key"]] = r
    jobs, immediate, kept = [], [], 0
    for p in run.problems:
        with open(p.path, encoding="utf-8", errors="replace") as f:
            source = f.read()
        task_hash = hashlib.sha256(source.encode()).hexdigest()
        files, row = None, None
        try:
            where = inputs.find_submission(a.submissions, p)
            if where is None:
                row = {"status": "missing", "correct": False, "reward": None,
                       "reason": f"no {p.key}/model_new.py or {p.key}.py under the submissions"}
                sub_hash = None
            else:
                files = inputs.read_submission(where)
                sub_hash = inputs.content_hash(files)
        except (SubmissionError, OSError) as e:
            row = {"status": "bad_submission", "correct": False, "reward": None, "reason": f"refused: {e}"}
            sub_hash = "refused:" + hashlib.sha256(str(e).encode()).hexdigest()[:16]
        old = prior.get(p.key)
        if (old and old.get("submission_hash") == sub_hash and old.get("task_hash") == task_hash
                and not (a.retry_no_verdict and old.get("status") in RETRYABLE)):
            run.rows[p.key] = old
            kept += 1
        elif row is not None:
            immediate.append({**_base_row(p, sub_hash, task_hash), **row})
        else:
            jobs.append((p, source, files, _base_row(p, sub_hash, task_hash)))
    if kept:
        log(f"resuming: {kept} problems already in {run.results} (same submission and task) are kept")
    for row in immediate:
        run.record(row)
    return jobs


def judge_all(run: Run, a, jobs: list, options: dict) -> int:
    """Judges the jobs on a.workers slots; returns the exit status."""
    run.jobs_total = len(jobs)
    if not jobs:
        return 0
    env = dict(a.worker_env)
    os.makedirs(a.build_root, exist_ok=True)
    log_file = open(a.worker_log, "a")
    slots = run.slots = [Slot(a, env, log_file, run.stop) for _ in range(min(a.workers, len(jobs)))]
    if run.stop.is_set():
        return 128 + run.signal
    queue = list(jobs)
    qlock = threading.Lock()

    def work(slot: Slot):
        try:
            slot.start()
        except Stopped:
            return
        except Exception as e:  # noqa: BLE001 (a worker that does not start: the others go on)
            slot.dead = str(e)
            log(f"error: {e}")
            return
        while not run.stop.is_set() and not slot.dead:
            with qlock:
                if not queue:
                    return
                p, source, files, base = queue.pop(0)
            t0 = time.monotonic()
            try:
                fields = slot.judge(p, source, files, options)
            except Stopped:
                return
            if run.stop.is_set():
                return
            run.record({**base, **fields, "wall_s": round(time.monotonic() - t0, 2), "device": a.device})
        if slot.dead:
            log(f"error: an eval worker could not be restarted: {slot.dead}")

    log(f"judging {len(jobs)} problems on {len(slots)} eval workers ({a.device}); worker logs in {a.worker_log}")
    threads = [threading.Thread(target=work, args=(s,), daemon=True) for s in slots]
    try:
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():  # with a timeout: the signal handler runs between the waits
                t.join(0.5)
    finally:
        for s in slots:
            s.close(graceful=not run.stop.is_set())
        log_file.close()
    if run.signal:
        log(f"stopped by {signal.Signals(run.signal).name}: {run.jobs_total - run.jobs_done} problems not "
            "judged; run the same command again to resume")
        return 128 + run.signal
    if run.jobs_done < run.jobs_total:
        log(f"error: {run.jobs_total - run.jobs_done} problems not judged: no eval worker left")
        return 1
    return 0


def records_rows(a, problems: list) -> list:
    """Rows of a policy's evaluation (--records: an exported records.jsonl, or a trajectory
    store folder exported here with trajectory_tool)."""
    path = a.records
    if os.path.isdir(path):
        build = os.environ.get("CAF_AGENT_BUILD_DIR") or os.path.join(ROOT, "build")
        tool = os.path.join(build, "rollout", "trajectory_tool")
        if not os.access(tool, os.X_OK):
            raise InputError(f"--records '{path}' is a folder (a trajectory store?) but {tool} is not built; "
                             "export it first: trajectory_tool export --store DIR --out records.jsonl")
        out = os.path.join(a.out, "records.jsonl")
        r = subprocess.run([tool, "export", "--store", path, "--out", out], capture_output=True, text=True)
        if r.returncode != 0:
            raise InputError(f"trajectory_tool export --store {path} failed: {r.stderr.strip()[-500:]}")
        path = out
    elif not os.path.isfile(path):
        raise InputError(f"--records '{path}' does not exist")
    rows = table.rows_from_records(path, {p.key: p.level for p in problems}, log)
    if not rows:
        log(f"warning: {path} holds no trajectory record")
    return table.with_missing(rows, problems, "missing", "no record of this task")


def parse_args(argv):
    """The command line (see the module's docstring)."""
    p = argparse.ArgumentParser(prog="kernelbench_eval", description=__doc__.splitlines()[0])
    p.add_argument("--kernelbench", help="KernelBench's KernelBench/ folder (level1/ level2/ level3/)")
    p.add_argument("--levels", default="1,2,3", help="KernelBench levels (default 1,2,3)")
    p.add_argument("--select", default="", help="KernelBench numbers per level, e.g. 1:19-25,3:1-2")
    p.add_argument("--tasks", help="a flat folder of task files (one level, named after the folder)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--submissions", help="DIR/level1/19_ReLU/model_new.py (+ kernels/**) or DIR/level1/19_ReLU.py")
    src.add_argument("--replay", help="a replay recording: its submissions are extracted to OUT/submissions")
    src.add_argument("--records", help="a policy's evaluation: records.jsonl (trajectory_tool export) or its store")
    src.add_argument("--report-only", action="store_true", help="rewrite the report from OUT/results.jsonl")
    p.add_argument("--out", required=True, help="results.jsonl, report.json, report.md go here")
    p.add_argument("--device", default="cpu", help="cpu or cuda:N")
    p.add_argument("--workers", type=int, default=1, help="eval workers judging side by side")
    p.add_argument("--threads", type=int, default=0, help="torch threads per worker (0: cores/workers on cpu, 2 on cuda)")
    p.add_argument("--job-timeout", type=float, default=DEFAULT_JOB_TIMEOUT_S, help="seconds per job")
    p.add_argument("--options", default="{}", help="the jobs' options as JSON (caf_agent_eval/options.py), "
                   "e.g. '{\"timing\": {\"budget_s\": 0.5}}'")
    p.add_argument("--build-root", default=None, help="kernel build and baseline cache (default: "
                   "$CAF_EVAL_BUILD_ROOT, else OUT/build)")
    p.add_argument("--no-timing-lock", action="store_true", help="let the workers time side by side")
    p.add_argument("--retry-no-verdict", action="store_true", help="judge again the problems that got no verdict")
    a = p.parse_args(argv)
    if a.workers < 1:
        p.error("--workers must be at least 1")
    if a.job_timeout <= 0:
        p.error("--job-timeout must be positive")
    if (a.submissions or a.replay) and not (a.kernelbench or a.tasks):
        p.error("judging needs the problems: --kernelbench DIR or --tasks DIR")
    if a.device != "cpu" and not a.device.startswith("cuda:"):
        p.error(f"--device '{a.device}': expected cpu or cuda:N")
    return a


def main(argv=None) -> int:
    """The command line's entry; returns the exit status (2: bad input)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["extract-replay"]:
        return extract_main(argv[1:])
    a = parse_args(argv)
    try:
        problems = inputs.select_problems(a.kernelbench, a.tasks, a.levels, a.select)
        os.makedirs(a.out, exist_ok=True)
        where = a.kernelbench or a.tasks or "(no task folder)"
        if a.records:
            rows = records_rows(a, problems)
            meta = {"source": "records", "records": a.records, "problems_from": where,
                    "source_text": f"a policy's evaluation records {a.records} ({len(rows)} rows; problems from {where})"}
            table.write_report(a.out, table.summarise(rows, meta))
            log(f"report written: {os.path.join(a.out, 'report.md')}")
            return 0
        if a.report_only:
            return report_only(a, problems)
        options = json.loads(a.options)
        if not isinstance(options, dict):
            raise InputError("--options must be a JSON object")
        opt_mod, _, _ = _eval_mod()
        opt_mod.merge(options)  # an unknown key or a wrong type is named here, before any worker
    except (InputError, ValueError) as e:  # OptionError and JSON errors are ValueErrors
        log(f"error: {e}")
        return 2
    if a.replay:
        a.submissions = os.path.join(a.out, "submissions")
        try:
            inputs.extract_replay(a.replay, a.submissions, force=True, warn=log)
        except InputError as e:
            log(f"error: {e}")
            return 2
    if not os.path.isdir(a.submissions):
        log(f"error: --submissions '{a.submissions}' is not a folder")
        return 2
    a.build_root = a.build_root or os.environ.get("CAF_EVAL_BUILD_ROOT") or os.path.join(a.out, "build")
    a.worker_log = os.path.join(a.out, "workers.log")
    if a.threads <= 0:
        a.threads = max(1, (os.cpu_count() or 1) // a.workers) if a.device == "cpu" else 2
    a.worker_env = {} if a.no_timing_lock else {"CAF_EVAL_TIMING_LOCK": os.path.join(os.path.abspath(a.out), ".timing.lock")}
    meta = {"source": "submissions", "submissions": a.submissions, "problems_from": where, "device": a.device,
            "mode": "final", "options": options,
            "source_text": f"submissions {a.submissions} over {where}, judged on {a.device} (final mode: "
                           "5 seeded checks, then timing against eager and torch.compile)"}
    run = Run(a, problems, meta)
    old = {s: signal.signal(s, run.on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        jobs = plan(run, a)
        status = judge_all(run, a, jobs, options) if not run.stop.is_set() else 128 + run.signal
        run.write_report()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    log(f"report written: {os.path.join(a.out, 'report.md')}")
    return status


def report_only(a, problems: list) -> int:
    """--report-only: the report from OUT/results.jsonl (the last line of each problem)."""
    path = os.path.join(a.out, "results.jsonl")
    if not os.path.isfile(path):
        log(f"error: {path} does not exist (nothing judged into --out yet)")
        return 2
    last: dict = {}
    for r in table.read_results(path, log):
        last[r["key"]] = r
    rows = list(last.values())
    if problems:
        keys = {p.key for p in problems}
        rows = table.with_missing([r for r in rows if r["key"] in keys], problems, "not_evaluated",
                                  "no line in results.jsonl")
    meta = {"source": "results", "results": path, "problems_from": a.kernelbench or a.tasks or "results.jsonl",
            "source_text": f"the verdicts in {path}"}
    table.write_report(a.out, table.summarise(rows, meta))
    log(f"report written: {os.path.join(a.out, 'report.md')}")
    return 0


def extract_main(argv) -> int:
    """`extract-replay --replay FILE --out DIR [--force]`: a recording -> a submissions folder."""
    p = argparse.ArgumentParser(prog="kernelbench_eval extract-replay",
                                description="a replay recording's last Write of each file -> DIR/<task_id>/")
    p.add_argument("--replay", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--force", action="store_true", help="replace the task folders in a non-empty --out")
    a = p.parse_args(argv)
    try:
        got = inputs.extract_replay(a.replay, a.out, force=a.force, warn=log)
    except InputError as e:
        log(f"error: {e}")
        return 2
    log(f"wrote {len(got['written'])} submissions to {a.out}: {', '.join(got['written']) or '-'}"
        + (f"; no submission for {', '.join(got['skipped'])}" if got["skipped"] else ""))
    return 0 if got["written"] else 1


if __name__ == "__main__":
    sys.exit(main())
