"""Verify of a reference copy over KernelBench problems: does every problem get a verdict,
and how long does each take?

    python3 bench/judge/bench_kernelbench.py --root KB/KernelBench --levels 1,2,3 \
        --device cuda --job-timeout 60 --budget-s 300 --out kb.json

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
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import statistics
import sys
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", required=True, help="KernelBench's KernelBench/ folder")
    p.add_argument("--levels", default="1,2,3")
    p.add_argument("--per-level", type=int, default=None)
    p.add_argument("--select", default="", help="level:numbers, e.g. 1:19-25,2:1-3 (default: all)")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--job-timeout", type=float, default=60.0)
    p.add_argument("--budget-s", type=float, default=1e9)
    p.add_argument("--build-root", default=os.environ.get("CAF_EVAL_BUILD_ROOT"))
    p.add_argument("--out", required=True)
    a = p.parse_args()
    todo = problems(a.root, [int(x) for x in a.levels.split(",")], a.per_level, a.select)
    client = WorkerClient(device=a.device, build_root=a.build_root)
    client.request({"op": "ping"}, timeout_s=300)
    rows, t_start = [], time.perf_counter()
    for lv, path in todo:
        if time.perf_counter() - t_start > a.budget_s:
            break
        src = open(path).read()
        name = os.path.basename(path)
        t0 = time.perf_counter()
        row = {"level": lv, "problem": name}
        try:
            r = client.evaluate(name, src, {"model_new.py": reference_copy(src)}, mode="verify",
                                timeout_s=a.job_timeout)
            v = r.get("verdict") or {}
            row.update(status=r.get("status"), flags=v.get("flags"), correct=v.get("correct"),
                       reason=(v.get("reason") or r.get("error") or "")[:300],
                       phases_s=v.get("phases_s"))
        except protocol.FrameError as e:  # no answer in time (or the worker died): restart it
            row.update(status="no_verdict", reason=f"{type(e).__name__}: {e}"[:300])
            client.proc.kill()
            client = WorkerClient(device=a.device, build_root=a.build_root)
            client.request({"op": "ping"}, timeout_s=300)
        row["wall_s"] = round(time.perf_counter() - t0, 3)
        rows.append(row)
        print(f"L{lv} {name}: {row['status']} {row.get('flags')} {row['wall_s']:.1f} s "
              f"{row['reason'][:120]}", flush=True)
        with open(a.out, "w") as f:
            json.dump({"rows": rows}, f, indent=1)
    client.close()
    summary = {}
    for lv in sorted({r["level"] for r in rows}):
        rs = [r for r in rows if r["level"] == lv]
        ws = [r["wall_s"] for r in rs]
        summary[f"level{lv}"] = {
            "problems": len(rs), "verdicts": sum(r["status"] in ("ok",) for r in rs),
            "no_verdict": sum(r["status"] == "no_verdict" for r in rs),
            "infra_error": sum(r["status"] == "infra_error" for r in rs),
            "task_error": sum("task_error" in (r.get("flags") or []) for r in rs),
            "wall_s_median": statistics.median(ws), "wall_s_max": max(ws), "wall_s_total": sum(ws)}
    with open(a.out, "w") as f:
        json.dump({"summary": summary, "rows": rows}, f, indent=1)
    print("SUMMARY " + json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
