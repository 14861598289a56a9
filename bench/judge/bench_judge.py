#!/usr/bin/env python3
"""Benchmarks of the judge: warm verify+profile wall time, extension compile time, and the
coefficient of variation of repeated profiles.

    .venv/bin/python bench/judge/bench_judge.py --device cpu  --out bench/results/x.json
    .venv/bin/python bench/judge/bench_judge.py --device cuda --out bench/results/x.json

Targets (H200): verify+profile <= 3 s warm, compile <= 8 s, CV <= 1% for tasks >= 100 us.
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
MODEL_NEW = ("import torch\nimport torch.nn as nn\nimport caf_ext\n\nclass ModelNew(nn.Module):\n"
             "    def forward(self, a, b):\n        return caf_ext.add_relu(a, b)\n")
CPU_KERNEL = os.path.join(ROOT, "tests", "reward_hacks", "kernels_cpu", "elementwise.cpp")
CUDA_KERNEL = os.path.join(ROOT, "tests", "reward_hacks", "cuda", "kernels_cuda", "elementwise.cu")

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


def compile_time(flavour: str) -> dict:
    """A small extension with a fresh nonce (no build-cache hit; ccache may still help)."""
    src = (SMALL_CU if flavour == "cuda" else SMALL_CPP).format(nonce=secrets.token_hex(8))
    name = "kernels/scale.cu" if flavour == "cuda" else "kernels/scale.cpp"
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        res = build.build({name: src, "model_new.py": ""}, flavour, d)
        dt = time.perf_counter() - t0
    return {"ok": res.ok, "seconds": dt, "log": res.log[-500:]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--rows", type=int, default=None)
    p.add_argument("--cols", type=int, default=None)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--task", default="add_relu", choices=["add_relu", "sin_chain"],
                   help="sin_chain: compute-bound (x = sin(x) + b, --iters times), CUDA only")
    p.add_argument("--iters", type=int, default=64, help="sin_chain length")
    p.add_argument("--build-root", default=None,
                   help="build cache for the worker (default: a fresh temp dir, cold build)")
    p.add_argument("--no-compile-bench", action="store_true", help="skip the compile timing")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    cuda = a.device.startswith("cuda")
    device = "cuda:0" if a.device == "cuda" else a.device
    # Rationale: on the H200 16384x8192 fp32 (3 x 512 MiB moved) takes ~0.3 ms, above the
    # 100 us bar of the CV target; on a CPU a 64x4096 tensor keeps one run short.
    rows = a.rows or (16384 if cuda else 64)
    cols = a.cols or (8192 if cuda else 4096)
    sin = a.task == "sin_chain"
    task = SIN_TASK.format(rows=rows, cols=cols, iters=a.iters) if sin else TASK.format(rows=rows, cols=cols)
    kernel_path = CUDA_KERNEL if cuda else CPU_KERNEL
    files = {"model_new.py": SIN_MODEL_NEW.format(iters=a.iters) if sin else MODEL_NEW,
             "kernels/" + os.path.basename(kernel_path): open(kernel_path).read()}
    out = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                       "python": platform.python_version()},
           "device": device, "task": f"{a.task}{a.iters if sin else ''} {rows}x{cols} fp32", "threads": a.threads}
    if cuda:
        import torch
        out["machine"]["gpu"] = torch.cuda.get_device_name(0)
        out["machine"]["torch"] = torch.__version__
    if not a.no_compile_bench:
        out["compile"] = compile_time("cuda" if cuda else "cpu")
        print(f"compile {out['compile']['seconds']:.1f} s ok={out['compile']['ok']}",
              file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        client = WorkerClient(device=device, threads=a.threads, build_root=a.build_root or tmp)
        try:
            t0 = time.perf_counter()
            first = client.evaluate("bench", task, files, mode="profile")
            out["cold_profile_s"] = time.perf_counter() - t0  # build + baselines + compile
            print(f"cold profile {out['cold_profile_s']:.1f} s", file=sys.stderr, flush=True)
            assert first["status"] == "ok" and first["verdict"]["correct"], first
            walls, cands, verdicts = [], [], []
            for _ in range(a.repeats):
                t0 = time.perf_counter()
                r = client.evaluate("bench", task, files, mode="profile")
                walls.append(time.perf_counter() - t0)
                v = r["verdict"]
                assert v["correct"], v["reason"]
                cands.append(v["timings"]["candidate_ms"])
                verdicts.append(v)
                print(f"warm {walls[-1]:.2f} s cand {cands[-1]:.4f} ms reward {v['reward']} "
                      f"iters {v['timings']['iterations']}", file=sys.stderr, flush=True)
        finally:
            client.close()
    out["warm_verify_profile_s"] = {"median": statistics.median(walls), "min": min(walls),
                                    "max": max(walls), "all": walls}
    mean = statistics.mean(cands)
    out["candidate_ms"] = {"median": statistics.median(cands), "all": cands,
                           "cv": statistics.stdev(cands) / mean if len(cands) > 1 else 0.0}
    last = verdicts[-1]
    out["rewards"] = [v["reward"] for v in verdicts]
    out["tiers_seen"] = sorted(set(out["rewards"]))
    out["eval_wall_s"] = [v.get("eval_wall_s") for v in verdicts]
    out["iterations"] = [v["timings"]["iterations"] for v in verdicts]
    out["eager_ms"] = [v["timings"].get("eager_ms") for v in verdicts]
    out["compile_ms"] = [v["timings"].get("compile_ms") for v in verdicts]
    out["last_verdict"] = {k: last[k] for k in ("speedup_eager", "speedup_compile", "reward")}
    out["last_verdict"]["timings"] = last["timings"]
    text = json.dumps(out, indent=1)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
