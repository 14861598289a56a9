#!/usr/bin/env python3
"""Writes skills/replay/default.jsonl: recorded assistant turns for the replay policy.

Each episode reads the task, writes an honest CPU kernel and model_new.py, compiles,
verifies, profiles and finishes, so the embedded default exercises real tool calls and
real evaluations. Tasks without a recording use the "*" episode, which gives up (and is
judged -1), so the report shows both outcomes.

    python tools/make_replay.py [--out skills/replay/default.jsonl]
"""
import argparse
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def call(name, **args):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


ADD_RELU_CPP = """#include "caf_kernel.h"

// One pass: out = max(a + b, 0).
torch::Tensor add_relu(torch::Tensor a, torch::Tensor b) {
  CAF_CHECK(a.is_contiguous() && b.is_contiguous() && a.sizes() == b.sizes(), "shape/layout");
  auto out = torch::empty_like(a);
  const float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* po = out.data_ptr<float>();
  const int64_t n = a.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = pa[i] + pb[i];
    po[i] = v > 0.f ? v : 0.f;
  }
  return out;
}

CAF_REGISTER(m) { m.def("add_relu", &add_relu); }
"""

ROW_SUM_CPP = """#include "caf_kernel.h"

// Row sums with 8 independent accumulators (keeps the adds pipelined).
torch::Tensor row_sum(torch::Tensor x) {
  CAF_CHECK(x.dim() == 2 && x.is_contiguous(), "2-D contiguous input");
  auto out = torch::empty({x.size(0), 1}, x.options());
  const int64_t rows = x.size(0), n = x.size(1);
  const float* px = x.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
      for (int k = 0; k < 8; ++k) acc[k] += px[r * n + j + k];
    float s = 0.f;
    for (; j < n; ++j) s += px[r * n + j];
    for (int k = 0; k < 8; ++k) s += acc[k];
    po[r] = s;
  }
  return out;
}

CAF_REGISTER(m) { m.def("row_sum", &row_sum); }
"""

MODEL_NEW = """import torch
import torch.nn as nn
import caf_ext


class ModelNew(nn.Module):
    def __init__(self, *init_inputs):
        super().__init__()

    def forward(self, {args}):
        return caf_ext.{fn}({args})
"""


def honest(task, fn, args, cpp):
    return {"task_id": task, "turns": [
        "I will read the task and the skill notes first.\n" + call("Read", file_path="model.py"),
        "A single fused pass is enough. Writing the kernel.\n" +
        call("Write", file_path=f"kernels/{fn}.cpp", content=cpp),
        "Now ModelNew; reading the starting file first.\n" + call("Read", file_path="model_new.py"),
        call("Write", file_path="model_new.py", content=MODEL_NEW.format(fn=fn, args=args)),
        call("Bash", command="./compile"),
        call("Bash", command="verify"),
        call("Bash", command="profile"),
        "The kernel is correct; profiling is done. Finished.",
    ]}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "skills" / "replay" / "default.jsonl"))
    out = pathlib.Path(p.parse_args().out)
    out.parent.mkdir(parents=True, exist_ok=True)
    episodes = [
        honest("add_relu", "add_relu", "a, b", ADD_RELU_CPP),
        honest("row_sum", "row_sum", "x", ROW_SUM_CPP),
        {"task_id": "*", "turns": [
            call("Read", file_path="model.py"),
            call("Glob", pattern="**/*"),
            "Checking what the starting file does.\n" + call("Bash", command="verify"),
            "I could not finish a kernel for this task in time.",
        ]},
    ]
    out.write_text("".join(json.dumps(e) + "\n" for e in episodes))
    print(out)


if __name__ == "__main__":
    main()
