#!/usr/bin/env python3
"""Benchmarks of the judge: warm verify+profile wall time, extension compile time, and the
coefficient of variation of repeated profiles, for one or more cases on one warm worker.

    .venv/bin/python bench/judge/bench_judge.py --device cpu  --out /tmp/x.json
    .venv/bin/python bench/judge/bench_judge.py --device cuda --case add_relu:16x16384 \
        --case sin_chain:1024x8192:64 --out /tmp/x.json

A case is TASK:ROWSxCOLS[:ITERS] with TASK one of add_relu, sin_chain (CUDA only; ITERS
sin+add steps), axpby (alpha*a+b, the released CUDA Agent workspace's example task).
Targets (H200): verify+profile <= 3 s warm, compile <= 8 s, CV <= 1% for tasks >= 100 us,
one reward tier for tasks >= 1 ms.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "skills", "eval_worker"))

from caf_agent_eval import build  # noqa: E402
from caf_agent_eval.client import WorkerClient  # noqa: E402

TASK = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a, b):
        return torch.relu(a + b)

batch_size = {rows}

def get_inputs():
    return [torch.randn(batch_size, {cols}), torch.randn(batch_size, {cols})]

def get_init_inputs():
    return []
'''
SIN_TASK = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a, b):
        x = a
        for _ in range({iters}):
            x = torch.sin(x) + b
        return x

batch_size = {rows}

def get_inputs():
    return [torch.randn(batch_size, {cols}), torch.randn(batch_size, {cols})]

def get_init_inputs():
    return []
'''
SIN_MODEL_NEW = ("import torch\nimport torch.nn as nn\nimport caf_ext\n\nclass ModelNew(nn.Module):\n"
                 "    def forward(self, a, b):\n        return caf_ext.sin_chain(a, b, {iters})\n")
AXPBY_TASK = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, a, b):
        return self.alpha * a + b

batch_size = {rows}

def get_inputs():
    return [torch.randn(batch_size, {cols}), torch.randn(batch_size, {cols})]

def get_init_inputs():
    return [2.0]
'''
AXPBY_MODEL_NEW = ("import torch\nimport torch.nn as nn\nimport caf_ext\n\nclass ModelNew(nn.Module):\n"
                   "    def __init__(self, alpha):\n        super().__init__()\n        self.alpha = alpha\n\n"
                   "    def forward(self, a, b):\n        return caf_ext.axpby(a, b, self.alpha)\n")
MODEL_NEW = ("import torch\nimport torch.nn as nn\nimport caf_ext\n\nclass ModelNew(nn.Module):\n"
             "    def forward(self, a, b):\n        return caf_ext.add_relu(a, b)\n")
CPU_KERNEL = os.path.join(ROOT, "tests", "reward_hacks", "kernels_cpu", "elementwise.cpp")
CUDA_KERNELS = [os.path.join(ROOT, "tests", "reward_hacks", "cuda", "kernels_cuda", f)
                for f in ("elementwise.cu", "elementwise.cpp")]
AXPBY_KERNEL = os.path.join(ROOT, "bench", "judge", "kernels", "axpby")

SMALL_CPP = '''#include "caf_kernel.h"
// nonce {nonce}
torch::Tensor scale(torch::Tensor a) {{
  auto o = torch::empty_like(a);
  const float* p = a.data_ptr<float>();
  float* q = o.data_ptr<float>();
  for (int64_t i = 0; i < a.numel(); ++i) q[i] = 2.f * p[i];
  return o;
}}
CAF_REGISTER(m) {{ m.def("scale", &scale); }}
'''
SMALL_CU = '''#include "caf_kernel.h"
// nonce {nonce}
__global__ void k(const float* p, float* q, int64_t n) {{
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) q[i] = 2.f * p[i];
}}
torch::Tensor scale(torch::Tensor a) {{
  auto o = torch::empty_like(a);
  k<<<(a.numel() + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      a.data_ptr<float>(), o.data_ptr<float>(), a.numel());
  return o;
}}
CAF_REGISTER(m) {{ m.def("scale", &scale); }}
'''


SPLIT_CU = '''#include "caf_cuda.h"
// nonce {nonce}
__global__ void k(const float* p, float* q, int64_t n) {{
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) q[i] = 2.f * p[i];
}}
void scale_launch(const float* p, float* q, int64_t n, cudaStream_t s) {{
  k<<<caf::blocks_for(n, 256), 256, 0, s>>>(p, q, n);
}}
'''
SPLIT_CPP = '''#include "caf_kernel.h"
// nonce {nonce}
void scale_launch(const float* p, float* q, int64_t n, cudaStream_t s);
torch::Tensor scale(torch::Tensor a) {{
  auto o = torch::empty_like(a);
  scale_launch(a.data_ptr<float>(), o.data_ptr<float>(), a.numel(), caf::stream());
  return o;
}}
CAF_REGISTER(m) {{ m.def("scale", &scale); }}
'''


def compile_time(flavour: str, repeats: int = 3) -> dict:
    """Compile times of a small extension, each with a fresh nonce (no build-cache hit), in one
    build root: the precompiled header (once per worker), then `repeats` builds of the
    workspace layout (CUDA: a light .cu + a .cpp on the precompiled header; CPU: one .cpp),
    then (CUDA) one build of the single-TU layout whose .cu includes the torch headers."""
    def one(files):
        t0 = time.perf_counter()
        res = build.build({**files, "model_new.py": ""}, flavour, d)
        return {"ok": res.ok, "seconds": time.perf_counter() - t0, "steps_s": res.seconds,
                "log": res.log[-800:]}

    def nonce():
        return secrets.token_hex(8)
    out = {}
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        ok, log, where = build.prepare(flavour, d)
        out["pch"] = {"ok": ok and where is not None, "seconds": time.perf_counter() - t0, "log": log[-800:]}
        runs = []
        for _ in range(repeats):
            if flavour == "cuda":
                n = nonce()
                runs.append(one({"kernels/scale.cu": SPLIT_CU.format(nonce=n),
                                 "kernels/scale_op.cpp": SPLIT_CPP.format(nonce=n)}))
            else:
                runs.append(one({"kernels/scale.cpp": SMALL_CPP.format(nonce=nonce())}))
        out["workspace_layout"] = runs
        out["seconds"] = statistics.median(r["seconds"] for r in runs)
        out["ok"] = all(r["ok"] for r in runs)
        if flavour == "cuda":
            out["single_tu_torch_in_cu"] = one({"kernels/scale.cu": SMALL_CU.format(nonce=nonce())})
    return out


def parse_case(text: str, cuda: bool) -> dict:
    """TASK:ROWSxCOLS[:ITERS] -> {task, rows, cols, iters}."""
    parts = text.split(":")
    task = parts[0]
    if task not in ("add_relu", "sin_chain", "axpby") or len(parts) < 2:
        raise SystemExit(f"bad --case {text!r}: TASK:ROWSxCOLS[:ITERS]")
    if task == "sin_chain" and not cuda:
        raise SystemExit("sin_chain runs on CUDA only")
    rows, cols = (int(x) for x in parts[1].lower().split("x"))
    return {"task": task, "rows": rows, "cols": cols, "iters": int(parts[2]) if len(parts) > 2 else 64}


def case_files(c: dict, cuda: bool) -> tuple[str, dict, str]:
    """(model.py text, submission files, label) of a case."""
    rows, cols, iters = c["rows"], c["cols"], c["iters"]
    if c["task"] == "axpby":
        paths = [AXPBY_KERNEL + ".cu", AXPBY_KERNEL + "_op.cpp"] if cuda else [AXPBY_KERNEL + ".cpp"]
        return (AXPBY_TASK.format(rows=rows, cols=cols),
                {"model_new.py": AXPBY_MODEL_NEW,
                 **{"kernels/" + os.path.basename(p): open(p).read() for p in paths}},
                f"axpby {rows}x{cols} fp32")
    paths = CUDA_KERNELS if cuda else [CPU_KERNEL]
    kernel = {"kernels/" + os.path.basename(p): open(p).read() for p in paths}
    if c["task"] == "sin_chain":
        return (SIN_TASK.format(rows=rows, cols=cols, iters=iters),
                {"model_new.py": SIN_MODEL_NEW.format(iters=iters), **kernel},
                f"sin_chain{iters} {rows}x{cols} fp32")
    return TASK.format(rows=rows, cols=cols), {"model_new.py": MODEL_NEW, **kernel}, f"add_relu {rows}x{cols} fp32"


def run_case(client, c: dict, cuda: bool, repeats: int, options: dict | None = None) -> dict:
    """A cold profile (build, baselines), then `repeats` warm profiles of the same files.
    options: evaluation options for every profile (e.g. timing.warmup_s for an A/B)."""
    task, files, label = case_files(c, cuda)
    if options:
        label += " " + json.dumps(options, sort_keys=True)
    out = {"task": label, "options": options}
    t0 = time.perf_counter()
    first = client.evaluate("bench", task, files, mode="profile", options=options)
    out["cold_profile_s"] = time.perf_counter() - t0  # build + baselines + torch.compile
    out["cold_phases_s"] = (first.get("verdict") or {}).get("phases_s")
    out["cold_baseline_cache"] = (first.get("verdict") or {}).get("baseline_cache")
    print(f"[{label}] cold profile {out['cold_profile_s']:.1f} s phases {out['cold_phases_s']}",
          file=sys.stderr, flush=True)
    if not (first["status"] == "ok" and first["verdict"]["correct"]):
        out["failures"] = [{"reason": first.get("error") or first["verdict"].get("reason"),
                            "phases_s": out["cold_phases_s"]}]
        print(f"SUMMARY {label}: cold profile FAILED: {out['failures'][0]}", flush=True)
        return out
    walls, cands, verdicts = [], [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        r = client.evaluate("bench", task, files, mode="profile", options=options)
        walls.append(time.perf_counter() - t0)
        v = r.get("verdict") or {}
        if not v.get("correct"):  # recorded, not fatal: the phases show where a failure spent its time
            out.setdefault("failures", []).append({"reason": r.get("error") or v.get("reason"),
                                                   "phases_s": v.get("phases_s")})
            print(f"[{label}] warm {walls[-1]:.2f} s FAILED: {out['failures'][-1]}", file=sys.stderr, flush=True)
            continue
        cands.append(v["timings"]["candidate_ms"])
        verdicts.append(v)
        print(f"[{label}] warm {walls[-1]:.2f} s cand {cands[-1]:.4f} ms reward {v['reward']} "
              f"iters {v['timings']['iterations']} {v.get('child_start')} baselines {v.get('baseline_cache')} "
              f"child start-up {v.get('child_startup_s')} phases {v.get('phases_s')}",
              file=sys.stderr, flush=True)
    out["warm_verify_profile_s"] = {"median": statistics.median(walls), "min": min(walls),
                                    "max": max(walls), "all": walls}
    if not cands:
        print(f"SUMMARY {label}: every warm profile FAILED: {out['failures'][-1]}", flush=True)
        return out
    mean = statistics.mean(cands)
    out["candidate_ms"] = {"median": statistics.median(cands), "all": cands,
                           "cv": statistics.stdev(cands) / mean if len(cands) > 1 else 0.0}
    out["rewards"] = [v["reward"] for v in verdicts]
    out["tiers_seen"] = sorted(set(out["rewards"]))
    out["eval_wall_s"] = [v.get("eval_wall_s") for v in verdicts]
    out["iterations"] = [v["timings"]["iterations"] for v in verdicts]
    out["eager_ms"] = [v["timings"].get("eager_ms") for v in verdicts]
    out["compile_ms"] = [v["timings"].get("compile_ms") for v in verdicts]
    out["hidden_work_ms"] = [v["timings"].get("hidden_work_ms") for v in verdicts]
    out["gap_median_ms"] = [v["timings"].get("gap_median_ms") for v in verdicts]
    out["in_profile_cv"] = [v["timings"].get("cv") for v in verdicts]
    out["child_start"] = sorted({str(v.get("child_start")) for v in verdicts})
    out["child_startup_s"] = [v.get("child_startup_s") for v in verdicts]  # context, timers, guard
    out["baseline_cache"] = [v.get("baseline_cache") for v in verdicts]  # measured / memory / disk
    phases = {}
    for v in verdicts:
        for k, x in (v.get("phases_s") or {}).items():
            phases.setdefault(k, []).append(x)
    out["phases_median_s"] = {k: statistics.median(x) for k, x in phases.items()}
    last = verdicts[-1]
    out["last_verdict"] = {k: last[k] for k in ("speedup_eager", "speedup_compile", "reward")}
    out["last_verdict"]["timings"] = last["timings"]
    w, cm = out["warm_verify_profile_s"], out["candidate_ms"]
    print(f"SUMMARY {label}: cold {out['cold_profile_s']:.1f} s, warm median {w['median']:.2f} s "
          f"(min {w['min']:.2f}, max {w['max']:.2f}), cand median {cm['median']:.4f} ms, "
          f"CV {100 * cm['cv']:.2f}%, tiers {out['tiers_seen']}, eager {out['eager_ms'][-1]}, "
          f"compile {out['compile_ms'][-1]}, iters {out['iterations']}", flush=True)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--case", action="append", default=[], help="TASK:ROWSxCOLS[:ITERS] (repeatable)")
    p.add_argument("--rows", type=int, default=None, help="single add_relu/sin_chain case (legacy)")
    p.add_argument("--cols", type=int, default=None)
    p.add_argument("--task", default="add_relu", choices=["add_relu", "sin_chain", "axpby"])
    p.add_argument("--iters", type=int, default=64, help="sin_chain length")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--build-root", default=None,
                   help="build cache for the worker (default: a fresh temp dir, cold build)")
    p.add_argument("--no-compile-bench", action="store_true", help="skip the compile timing")
    p.add_argument("--ab", action="append", default=[], metavar="JSON",
                   help="after each case, its profiles again with these evaluation options, e.g. "
                        "'{\"timing\": {\"flush_in_stream\": true}}' (repeatable; an A/B on one worker)")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    cuda = a.device.startswith("cuda")
    device = "cuda:0" if a.device == "cuda" else a.device
    # Rationale (default case): on the H200 16384x8192 fp32 (3 x 512 MiB moved) takes ~0.3 ms,
    # above the 100 us bar of the CV target; on a CPU a 64x4096 tensor keeps one run short.
    cases = [parse_case(x, cuda) for x in a.case] or [
        {"task": a.task, "rows": a.rows or (16384 if cuda else 64),
         "cols": a.cols or (8192 if cuda else 4096), "iters": a.iters}]
    out = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                       "python": platform.python_version()},
           "device": device, "threads": a.threads, "cases": []}
    if cuda:
        import torch
        out["machine"]["gpu"] = torch.cuda.get_device_name(0)
        out["machine"]["torch"] = torch.__version__
    if not a.no_compile_bench:
        cm = out["compile"] = compile_time("cuda" if cuda else "cpu")
        print(f"SUMMARY compile: precompiled header {cm['pch']['seconds']:.2f} s "
              f"(ok={cm['pch']['ok']}); workspace layout, fresh nonce: median {cm['seconds']:.2f} s "
              f"of {[round(r['seconds'], 2) for r in cm['workspace_layout']]} ok={cm['ok']}, steps "
              f"{cm['workspace_layout'][-1]['steps_s']}", flush=True)
        if "single_tu_torch_in_cu" in cm:
            one = cm["single_tu_torch_in_cu"]
            print(f"SUMMARY compile: single TU with torch headers in the .cu {one['seconds']:.2f} s "
                  f"ok={one['ok']}", flush=True)

    def save():
        if a.out:
            with open(a.out, "w") as f:
                f.write(json.dumps(out, indent=1))

    save()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        client = WorkerClient(device=device, threads=a.threads, build_root=a.build_root or tmp)
        try:
            print(client.request({"op": "ping"}, 120), file=sys.stderr, flush=True)
            out["worker_start_s"] = time.perf_counter() - t0
            for c in cases:
                for opts in [None] + [json.loads(x) for x in a.ab]:
                    try:
                        out["cases"].append(run_case(client, c, cuda, a.repeats, opts))
                    except AssertionError as e:  # one case's failure must not lose the others
                        out["cases"].append({"case": c, "options": opts, "error": str(e)[:4000]})
                        print(f"SUMMARY case {c} {opts} FAILED: {str(e)[:1500]}", flush=True)
                    save()
        finally:
            client.close()
    print(json.dumps(out, indent=1), file=sys.stderr)
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
