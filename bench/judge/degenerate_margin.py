"""How an accurate answer fares on KernelBench's degenerate problems under the judge's tests.

    python3 bench/judge/degenerate_margin.py --root bench/judge/external/KernelBench \
        --problems bench/results/2026-12-02-judge-h200/kernelbench.json --device cuda:0 --out margin.json

For each problem a prior run refused as a task error (the 47 whose output does not depend on
the input at KernelBench's initialisation and tolerance) or each --select'ed one: the judge's
own task validation (task_check.check_reference: the parameter scale it keeps, or degenerate,
or refused), then the judge's reference (float32, the scale applied) against the same model
run in float64 and rounded to float32 -- an answer more accurate than any float32 kernel's --
on three seeded inputs, with the judge's comparison (verify.compare) and, for a degenerate
task, its variation check (verify.variation_error against the first input). An honest kernel
whose error is of the reference's own size passes where this answer passes with room
(`margin`: the tolerance over the worst error seen). Nothing here runs a submission; the
judge's verdicts on submissions are bench_kernelbench.py's.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "skills", "eval_worker"))
sys.path.insert(0, HERE)

import torch  # noqa: E402

from caf_agent_eval import task_check, verify  # noqa: E402
from caf_agent_eval.task import Task, as_outputs  # noqa: E402

ATOL = RTOL = 1e-2
REL_L2 = verify.DEFAULT_REL_L2


def _double(v):
    return v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v


def one(path: str, device: str, work: str) -> dict:
    with open(path) as f:
        src = f.read()
    t = Task(os.path.basename(path), src, work)
    key = (ATOL, RTOL, REL_L2)
    row: dict = {}
    t0 = time.perf_counter()
    try:
        task_check.check_reference(t, device, ATOL, RTOL, REL_L2)
    except task_check.TaskError as e:
        return {"task_error": str(e)[:300]}
    scale, degenerate = t.param_scale.get(key, 1.0), t.degenerate.get(key)
    row.update(param_scale=scale, degenerate=bool(degenerate), constant=bool(t.constant.get(key)),
               validate_s=round(time.perf_counter() - t0, 2))
    model = t.make_model(t.init_inputs(11), 12, device)
    with torch.no_grad():
        for p in model.parameters():
            if p.is_floating_point():
                p.mul_(scale)
    refs, answers = [], []
    try:
        for k in range(3):
            x = t.inputs(100 + k, device)
            with torch.no_grad():
                refs.append([o.detach().clone() for o in as_outputs(model(*x))])
            model.double()
            with torch.no_grad():
                answers.append([o.detach().float() for o in as_outputs(model(*[_double(v) for v in x]))])
            model.float()
            del x
    except Exception as e:  # an op without a float64 kernel: no accurate answer to compare
        row["float64_error"] = f"{type(e).__name__}: {e}"[:200]
        return row
    worst_l2, worst_var, ok = 0.0, 0.0, True
    for k in range(3):
        for i, (r, a) in enumerate(zip(refs[k], answers[k])):
            good, why, stats = verify.compare(r, a, ATOL, RTOL, REL_L2)
            ok = ok and good
            worst_l2 = max(worst_l2, stats.get("rel_l2_err", float("inf")))
            if not good:
                row.setdefault("miss", why[:200])
            if degenerate and k > 0 and not row["constant"]:
                err, _ = verify.variation_error(refs[0][i], r, answers[0][i], a)
                worst_var = max(worst_var, err)
                ok = ok and err <= verify.VARIATION_REL_L2
    row.update(passes=ok, worst_rel_l2=worst_l2,
               margin_rel_l2=REL_L2 / worst_l2 if worst_l2 > 0 else float("inf"))
    if degenerate:
        row.update(worst_variation_err=worst_var,
                   margin_variation=verify.VARIATION_REL_L2 / worst_var if worst_var > 0 else float("inf"))
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", required=True, help="KernelBench's KernelBench/ folder")
    p.add_argument("--problems", required=True, help="a bench_kernelbench.py --out: its task_error rows")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    with open(a.problems) as f:
        picks = [(r["level"], r["problem"]) for r in json.load(f)["rows"] if "task_error" in (r.get("flags") or [])]
    rows = []
    with tempfile.TemporaryDirectory(prefix="kb_margin_") as work:
        for lv, prob in picks:
            t0 = time.perf_counter()
            try:
                row = one(os.path.join(a.root, f"level{lv}", prob), a.device, work)
            except Exception as e:
                row = {"error": f"{type(e).__name__}: {e}"[:300]}
            row.update(level=lv, problem=prob, wall_s=round(time.perf_counter() - t0, 2))
            rows.append(row)
            if a.device.startswith("cuda"):
                torch.cuda.empty_cache()
            print(json.dumps(row), flush=True)
            with open(a.out, "w") as f:
                json.dump({"rows": rows}, f, indent=1)
    summary = {"problems": len(rows), "task_error": sum("task_error" in r for r in rows),
               "param_scaled": sum(r.get("param_scale", 1.0) != 1.0 for r in rows),
               "degenerate": sum(bool(r.get("degenerate")) and not r.get("constant") for r in rows),
               "constant": sum(bool(r.get("constant")) for r in rows),
               "accurate_answer_passes": sum(r.get("passes") is True for r in rows),
               "no_float64": sum("float64_error" in r for r in rows)}
    with open(a.out, "w") as f:
        json.dump({"summary": summary, "rows": rows}, f, indent=1)
    print("SUMMARY " + json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
