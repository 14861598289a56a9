"""Verify of a reference copy over KernelBench problems: does every problem get a verdict,
and how long does each take?

    python3 bench/judge/bench_kernelbench.py --root KB/KernelBench --levels 1,2,3 \
        --device cuda:0 --workers 8 --job-timeout 60 --budget-s 300 --honest-relu --out kb.json

KernelBench (public, ScalingIntelligence/KernelBench) is not part of this repo: put its
`KernelBench/` folder (level1/, level2/, level3/) under bench/judge/external/, which git
ignores, and carry it to the device machine. The submission is the problem's own model.py
with `Model` renamed `ModelNew`: its torch calls are what the dispatcher guard refuses, so
the expected verdict is a failure (`torch_fallback`), a refused task (`task_error`), or a
pass for problems whose forward holds only allowed ops; what this measures is that a
verdict comes back, and when. A job without an answer within --job-timeout counts as no
verdict and the worker is restarted. --per-level N takes the first N problems of each level
(by KernelBench's number), --select picks numbers (1:19-25,3:1-2); --budget-s stops starting
new problems after that many seconds.

--workers N judges on N workers side by side, each with the whole device as its slot's
limit (so each verdict is the one a dedicated slot gives); a job starts only while the
judge's own size estimates (task_check.needed_bytes) of the jobs running add up to at most
--fill of the device, largest first. Times per problem are then times beside other jobs.
--constant judges, instead of the reference copy, the constant-answer attack on each
problem (constant_submission): the problem's Model renamed (so the reference's state_dict
loads), with a forward that writes the mean of the reference's output as KernelBench
initialises it, for one seeded input, without reading its input (bench/judge/kernels/fill*).
On a task whose output barely depends on its input that passes KernelBench's elementwise
test; every one must get reward -1.
--honest-relu first verifies an honest CUDA kernel (bench/judge/kernels/relu*) on
level1/19_ReLU on one worker (beside the others): all five checks at 6 GiB, with the peak
GPU memory of that worker's processes against the estimate.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "skills", "eval_worker"))

from caf_agent_eval import protocol  # noqa: E402
from caf_agent_eval.client import WorkerClient  # noqa: E402


def _number(path: str) -> int:
    m = re.match(r"(\d+)", os.path.basename(path))
    return int(m.group(1)) if m else 10**9


def problems(root: str, levels: list[int], per_level: int | None,
             select: str = "") -> list[tuple[int, str]]:
    """(level, path) in KernelBench's order; select ("1:19-25,3:1-2") picks numbers."""
    picks: dict = {}
    for part in filter(None, select.split(",")):
        lv, _, rng = part.partition(":")
        lo, _, hi = rng.partition("-")
        picks.setdefault(int(lv), set()).update(range(int(lo), int(hi or lo) + 1))
    out = []
    for lv in (sorted(picks) if picks else levels):
        files = sorted(glob.glob(os.path.join(root, f"level{lv}", "*.py")), key=_number)
        if picks:
            files = [f for f in files if _number(f) in picks[lv]]
        out += [(lv, p) for p in files[:per_level]]
    return out


def reference_copy(model_py: str) -> str:
    return re.sub(r"\bModel\b", "ModelNew", model_py)


RELU_PROBLEM = "19_ReLU.py"
RELU_MODEL_NEW = ("import torch\nimport torch.nn as nn\nimport caf_ext\n\n"
                  "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
                  "    def forward(self, x):\n        return caf_ext.relu(x)\n")
KERNELS = os.path.join(HERE, "kernels")


def relu_submission() -> dict:
    """An honest CUDA submission for level1/19_ReLU (bench/judge/kernels/relu*): a verify that
    runs all five checks at 6 GiB, where the reference copy stops at check 1."""
    files = {"model_new.py": RELU_MODEL_NEW}
    for name in ("relu.cu", "relu_op.cpp"):
        with open(os.path.join(KERNELS, name)) as f:
            files[f"kernels/{name}"] = f.read()
    return files


def constant_submission(path: str, device: str) -> dict:
    """The constant-answer attack on the problem at path (see --constant): the reference's
    output as KernelBench initialises it, for one seeded input, reduced to its mean, written
    by a CUDA kernel at the shape of the call's batch."""
    import torch
    from caf_agent_eval.task import Task, as_outputs
    with open(path) as f:
        src = f.read()
    import tempfile
    with tempfile.TemporaryDirectory(prefix="kb_const_") as d:
        t = Task(os.path.basename(path), src, d)
        model = t.make_model(t.init_inputs(1), 2, device)
        x = t.inputs(3, device)
        with torch.no_grad():
            outs = [o.detach() for o in as_outputs(model(*x))]
        batch = x[0].shape[0] if x and isinstance(x[0], torch.Tensor) and x[0].dim() else None
        specs = [(list(o.shape), float(o.float().mean())) for o in outs]
        del model, x, outs
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    lines = []
    for shape, value in specs:
        if shape and batch is not None and shape[0] == batch:  # follows the call's batch
            dims = "[args[0].shape[0]" + "".join(f", {d}" for d in shape[1:]) + "]"
        else:
            dims = repr(shape)
        rest = 1
        for d in shape[1:]:
            rest *= d
        rows = dims + "[0]" if shape else "1"
        lines.append(f"caf_ext.fill(args[0], {rows}, {rest if shape else 1}, {value!r}).view({dims})")
    body = lines[0] if len(lines) == 1 else "(" + ", ".join(lines) + ")"
    base = re.sub(r"\bModel\b", "RefBase", src)
    model_new = (base + "\n\nimport caf_ext\n\n\nclass ModelNew(RefBase):\n"
                 "    def forward(self, *args):\n        return " + body + "\n")
    files = {"model_new.py": model_new}
    for name in ("fill.cu", "fill_op.cpp"):
        with open(os.path.join(KERNELS, name)) as f:
            files[f"kernels/{name}"] = f.read()
    return files


class GpuMemory:
    """memory.used of GPU 0 from `nvidia-smi -lms 100`, the highest since the last mark()."""

    def __init__(self):
        self.peak = self.now = None
        self.lock = threading.Lock()
        try:
            self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                                          "-i", "0", "-lms", "100"], stdout=subprocess.PIPE, text=True)
        except OSError:
            self.proc = None
            return
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                mib = int(line.strip())
            except ValueError:
                continue
            with self.lock:
                self.now = mib
                self.peak = mib if self.peak is None else max(self.peak, mib)

    def mark(self):
        """(MiB used now, the highest MiB seen since the previous mark)."""
        time.sleep(0.25)  # one more sample in
        with self.lock:
            out = (self.now, self.peak)
            self.peak = self.now
        return out

    def close(self):
        if self.proc:
            self.proc.kill()


class ProcessMemory:
    """Per-process GPU memory (`nvidia-smi --query-compute-apps -lms 100`), the highest sum
    over the processes descending from a watched pid (a worker, its fork server, its
    children): one job's memory while other workers' jobs share the GPU."""

    def __init__(self):
        self.lock = threading.Lock()
        self.roots: dict = {}   # watched pid -> highest MiB sum seen
        self.owner: dict = {}   # pid -> watched root or None
        try:
            self.proc = subprocess.Popen(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                                          "--format=csv,noheader,nounits", "-lms", "100"],
                                         stdout=subprocess.PIPE, text=True)
        except OSError:
            self.proc = None
            return
        threading.Thread(target=self._read, daemon=True).start()

    def _root_of(self, pid: int):
        seen, p = 0, pid
        while p > 1 and seen < 64:
            if p in self.roots:
                return p
            try:
                with open(f"/proc/{p}/stat") as f:
                    p = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                return None
            seen += 1
        return None

    def _read(self):
        sample: dict = {}
        last = time.monotonic()
        for line in self.proc.stdout:
            now = time.monotonic()
            if now - last > 0.05 and sample:  # a new block of lines: one sample
                self._account(sample)
                sample = {}
            last = now
            try:
                pid, mib = (int(x) for x in line.strip().split(","))
            except ValueError:
                continue
            sample[pid] = mib

    def _account(self, sample: dict):
        with self.lock:
            sums: dict = {}
            for pid, mib in sample.items():
                if pid not in self.owner:
                    self.owner[pid] = self._root_of(pid)
                r = self.owner[pid]
                if r is not None:
                    sums[r] = sums.get(r, 0) + mib
            for r, v in sums.items():
                self.roots[r] = max(self.roots[r], v)

    def watch(self, pid: int):
        with self.lock:
            self.roots[pid] = 0
            self.owner = {k: v for k, v in self.owner.items() if v is not None}

    def peak(self, pid: int):
        time.sleep(0.3)
        with self.lock:
            return self.roots.pop(pid, None)

    def close(self):
        if self.proc:
            self.proc.kill()


def estimate_gib(path: str, mode: str = "verify"):
    """The judge's own size estimate for a problem (task_check.estimate_gib, meta tensors)."""
    from caf_agent_eval import task_check
    with open(path) as f:
        return task_check.estimate_gib(os.path.basename(path), f.read(), mode)


def estimates(todo: list, cache_path: str | None) -> list:
    """estimate_gib of each problem's verify job, from the cache where it has the problem's
    (task_check.cached_estimates)."""
    from caf_agent_eval import task_check
    items = []
    for _, path in todo:
        with open(path) as f:
            items.append((os.path.basename(path), f.read()))
    return task_check.cached_estimates(items, "verify", cache_path)


def _problem_id(lv: int, path: str) -> str:
    return f"{lv}/{os.path.basename(path)}"


def prior_walls(paths: list) -> dict:
    """level/problem -> the longest wall time a --prior run's rows (kernelbench.json) hold."""
    out: dict = {}
    for path in paths or []:
        with open(path) as f:
            for r in json.load(f).get("rows", []):
                if isinstance(r, dict) and "level" in r and "problem" in r and not r.get("submission"):
                    k = f"{r['level']}/{r['problem']}"
                    w = float(r.get("wall_s") or 0.0)
                    if r.get("status") == "no_verdict":
                        w = max(w, 60.0)  # no answer in its cap: the longest of all
                    out[k] = max(out.get(k, 0.0), w)
    return out


class Runner:
    """One eval worker and the problems it judges, restarted when a job gets no answer."""

    def __init__(self, a, limit: int | None):
        self.a = a
        self.env = {"CAF_EVAL_MEMORY_LIMIT_BYTES": str(limit)} if limit else {}
        self.client = self._start()

    def _start(self):
        c = WorkerClient(device=self.a.device, build_root=self.a.build_root, env=self.env,
                         threads=self.a.threads)
        c.request({"op": "ping"}, timeout_s=300)
        return c

    def judge(self, lv: int, path: str, files: dict | None = None, label: str = "") -> dict:
        if files is None and self.a.constant:
            try:
                files, label = constant_submission(path, self.a.device), "constant"
            except Exception as e:  # the reference itself fails: the judge's verdict says so
                print(f"constant submission for {path}: {type(e).__name__}: {e}"[:300], flush=True)
        with open(path) as f:
            src = f.read()
        name = os.path.basename(path)
        t0 = time.perf_counter()
        row = {"level": lv, "problem": name}
        if label:
            row["submission"] = label
        try:
            mode = self.a.relu_mode if label == "honest relu kernel" else "verify"
            r = self.client.evaluate(name, src, files or {"model_new.py": reference_copy(src)},
                                     mode=mode, timeout_s=self.a.job_timeout)
            v = r.get("verdict") or {}
            row.update(status=r.get("status"), flags=v.get("flags"), correct=v.get("correct"),
                       reward=v.get("reward"), kernelbench_correct=v.get("kernelbench_correct"),
                       reason=(v.get("reason") or r.get("error") or "")[:300],
                       phases_s=v.get("phases_s"))
            if v.get("timings"):  # a profile or final job: what was timed
                row["timings"] = {k: v["timings"].get(k) for k in
                                  ("candidate_ms", "eager_ms", "compile_ms", "iterations", "roofline_floor_ms")}
                row["speedup_eager"], row["speedup_compile"] = v.get("speedup_eager"), v.get("speedup_compile")
            for k in ("task_degenerate", "task_conditioning", "task_constant"):
                if v.get(k):
                    row[k] = v[k]
        except protocol.FrameError as e:  # no answer in time (or the worker died): restart it
            row.update(status="no_verdict", reason=f"{type(e).__name__}: {e}"[:300])
            self.client.proc.kill()
            self.client = self._start()
        row["wall_s"] = round(time.perf_counter() - t0, 3)
        return row

    def close(self):
        self.client.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", required=True, help="KernelBench's KernelBench/ folder")
    p.add_argument("--levels", default="1,2,3")
    p.add_argument("--per-level", type=int, default=None)
    p.add_argument("--select", default="", help="level:numbers, e.g. 1:19-25,2:1-3 (default: all)")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--job-timeout", type=float, default=60.0)
    p.add_argument("--budget-s", type=float, default=1e9)
    p.add_argument("--workers", type=int, default=1,
                   help="eval workers judging side by side on the device, each with the whole "
                        "device as its slot's limit; a job starts only while the judge's own "
                        "size estimates of the jobs running add up to at most --fill of it")
    p.add_argument("--fill", type=float, default=0.8)
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads per worker")
    p.add_argument("--memory-bytes", type=float, default=None,
                   help="the device's memory (default: torch's total_memory of --device)")
    p.add_argument("--constant", action="store_true",
                   help="judge the constant-answer attack on each problem instead of the reference copy")
    p.add_argument("--honest-relu", action="store_true",
                   help="also verify an honest CUDA kernel on level1/19_ReLU (6 GiB), alone")
    p.add_argument("--relu-mode", default="verify", choices=["verify", "profile", "final"],
                   help="the honest relu job's mode (final: verify, then timing against eager and compile)")
    p.add_argument("--estimates", default=None,
                   help="JSON cache of the size estimates by problem path (read, and written with "
                        "what was missing): computing all 250 on meta tensors took 105 s on the H200 host")
    p.add_argument("--prior", action="append", default=[],
                   help="an earlier run's --out (repeatable): its wall times order the queue, longest first")
    p.add_argument("--build-root", default=os.environ.get("CAF_EVAL_BUILD_ROOT"))
    p.add_argument("--out", required=True)
    a = p.parse_args()
    todo = problems(a.root, [int(x) for x in a.levels.split(",")], a.per_level, a.select)
    t_start = time.perf_counter()
    runners: list = [None] * max(1, a.workers)

    def start(k):
        runners[k] = Runner(a, None)
    starters = [threading.Thread(target=start, args=(k,)) for k in range(len(runners))]
    for t in starters:
        t.start()
    # The judge's own estimate of each verify job (meta tensors) while the workers start.
    total = a.memory_bytes
    if total is None:
        import torch
        total = torch.cuda.get_device_properties(torch.device(a.device)).total_memory \
            if a.device.startswith("cuda") else 0
    est = estimates(todo, a.estimates)
    unknown_gib = 20.0  # no estimate (the task does not run on meta tensors)
    cap_gib = a.fill * total / 2**30 if total else float("inf")
    for t in starters:
        t.join()
    mem = GpuMemory() if a.device.startswith("cuda") else None
    extra = {"cap_gib": round(cap_gib, 1)}
    rows: dict = {}
    cond = threading.Condition()
    # The jobs that need a third of the device or more first, largest first: they start while
    # it is empty and the small ones fill in beside them (two cannot run together, so left to
    # the end they would run one after another). Then the ones that took longest in --prior
    # runs (longest first: the makespan's tail is short jobs, not a 20 s RNN started last),
    # then by estimate. A problem no prior run answered counts as the longest.
    prior = prior_walls(a.prior)

    def order(i):
        e = est[i] if est[i] is not None else unknown_gib
        return (0 if e >= cap_gib / 3 else 1, -e if e >= cap_gib / 3 else -prior.get(_problem_id(*todo[i]), 60.0 if prior else 0.0), -e)
    queue = sorted(range(len(todo)), key=order)
    state = {"in_use": 0.0, "running": 0}
    print(f"estimates done at {time.perf_counter() - t_start:.1f} s; cap {cap_gib:.1f} GiB", flush=True)

    def save(extra=None):
        ordered = [rows[i] for i in sorted(rows)]
        with open(a.out, "w") as f:
            json.dump({"workers": a.workers, "fill": a.fill, **(extra or {}), "rows": ordered}, f, indent=1)

    def work(runner):
        while True:
            with cond:
                while True:
                    if not queue or time.perf_counter() - t_start > a.budget_s:
                        return
                    fit = [i for i in queue if state["running"] == 0 or state["in_use"]
                           + (est[i] if est[i] is not None else unknown_gib) <= cap_gib]
                    if fit:
                        i = fit[0]
                        queue.remove(i)
                        need = est[i] if est[i] is not None else unknown_gib
                        beside = state["in_use"]
                        state["in_use"] += need
                        state["running"] += 1
                        break
                    cond.wait(1.0)
            lv, path = todo[i]
            row = runner.judge(lv, path)
            row["estimate_verify_gib"] = est[i]
            row["started_beside_gib"] = round(beside, 1)  # estimates of the jobs already running
            with cond:
                state["in_use"] -= need
                state["running"] -= 1
                rows[i] = row
                cond.notify_all()
                print(f"L{lv} {row['problem']}: {row['status']} {row.get('flags')} {row['wall_s']:.1f} s "
                      f"(est {est[i]} GiB) {row['reason'][:120]}", flush=True)
                save()
    relu = [(lv, path) for lv, path in todo if lv == 1 and os.path.basename(path) == RELU_PROBLEM]
    pmem = ProcessMemory() if a.device.startswith("cuda") and a.honest_relu and relu else None

    def honest_relu(runner):
        """The honest relu kernel on 19_ReLU first on this worker, its estimate reserved before
        the batch starts (waiting for room beside largest-first admission starved it on the
        H200, 2026-12-01); its memory is the sum over the worker's own processes (ProcessMemory)."""
        need = relu_need  # reserved before any batch job was admitted (see below)
        if pmem:
            pmem.watch(runner.client.proc.pid)
        row = runner.judge(*relu[0], files=relu_submission(), label="honest relu kernel")
        row["estimate_verify_gib"] = need
        if pmem:
            row["gpu_peak_mib_worker_processes"] = pmem.peak(runner.client.proc.pid)
        with cond:
            state["in_use"] -= need
            state["running"] -= 1
            cond.notify_all()
            extra["honest_relu"] = row
            print(f"L1 {RELU_PROBLEM} (honest kernel): {row['status']} {row.get('flags')} "
                  f"correct={row.get('correct')} {row['wall_s']:.1f} s, GPU peak of its worker's processes "
                  f"{row.get('gpu_peak_mib_worker_processes')} MiB, estimate {need} GiB "
                  f"{row['reason'][:120]} {row.get('phases_s')}", flush=True)
        work(runner)

    relu_need = 0.0
    if a.honest_relu and relu:
        relu_need = estimate_gib(relu[0][1]) or unknown_gib
        state["in_use"] += relu_need
        state["running"] += 1
    threads = [threading.Thread(target=honest_relu if (k == 0 and a.honest_relu and relu) else work, args=(r,))
               for k, r in enumerate(runners)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    extra["batch_s"] = round(time.perf_counter() - t_start, 1)  # the last job's end, from the start
    closers = [threading.Thread(target=r.close) for r in runners]  # side by side: 28 s one by one
    for t in closers:
        t.start()
    for t in closers:
        t.join()
    if mem:
        mem.close()
    if pmem:
        pmem.close()
    out_rows = [rows[i] for i in sorted(rows)]
    summary = {}
    for lv in sorted({x[0] for x in todo}):
        rs = [r for r in out_rows if r["level"] == lv]
        ws = [r["wall_s"] for r in rs] or [0.0]
        flags: dict = {}
        for r in rs:
            for fl in (r.get("flags") or ["(passed)" if r.get("correct") else "(none)"]):
                flags[fl] = flags.get(fl, 0) + 1
        summary[f"level{lv}"] = {
            "problems": len(rs), "of": sum(1 for x in todo if x[0] == lv),
            "verdicts": sum(r["status"] in ("ok",) for r in rs),
            "no_verdict": sum(r["status"] == "no_verdict" for r in rs),
            "infra_error": sum(r["status"] == "infra_error" for r in rs),
            "task_error": sum("task_error" in (r.get("flags") or []) for r in rs),
            "degenerate": sum(bool(r.get("task_degenerate")) for r in rs),
            "param_scaled": sum(bool(r.get("task_conditioning")) for r in rs),
            "constant_task": sum(bool(r.get("task_constant")) for r in rs),
            "reward_minus_1": sum(r.get("reward") == -1 for r in rs),
            "kernelbench_correct": sum(r.get("kernelbench_correct") is True for r in rs),
            "flags": flags,
            "wall_s_median": statistics.median(ws), "wall_s_max": max(ws), "wall_s_total": round(sum(ws), 1)}
    extra["total_s"] = round(time.perf_counter() - t_start, 1)
    save({**extra, "summary": summary})
    print("SUMMARY " + json.dumps(summary), flush=True)
    print("TIMES " + json.dumps({k: v for k, v in extra.items() if k != "honest_relu"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
