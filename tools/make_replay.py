#!/usr/bin/env python3
"""Writes skills/replay/*.jsonl: recorded assistant turns for the replay policy.

default.jsonl holds one honest episode per bundled task (skills/tasks): it reads the task,
writes a C++ CPU kernel and model_new.py, compiles, verifies and finishes: the replay run that
shows the whole loop (config/replay.toml). Every kernel is correct on the judge's inputs, so each
episode earns reward >= 1 from the real judge. Tasks without a recording (e.g. a datasets/
sample) replay the "*" episode, which gives up and is judged -1.

demonstrations.jsonl holds the same kernels in the short form the small model learns: the
embedded default's rejection fine-tuning plays them ([train.rft] demonstrations,
docs/TRAINING.md). Short and alike on purpose (three turns, one layout for every kernel, the
task's name first in the first turn) so the small model can learn them.

cuda_demonstrations.jsonl holds the same three turns with a CUDA kernel per task (a .cu and its
.cpp) for the GPU judge: the scripted replies of the H200 iteration (config/h200-iteration.toml).

gives_up.jsonl holds that giving-up episode alone for every task: the negatives (reward -1).

    python tools/make_replay.py [--out-dir skills/replay]
"""
import argparse
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def call(name, **args):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


# Each kernel: name, the C++ parameter list, the pointers it reads, and the body of the loop
# nest. One layout for all of them keeps the demonstrations easy to learn.
HEADER = '#include "caf_kernel.h"\n#include <cmath>\n\n'


def kernel(fn, params, body):
    return (HEADER + f"torch::Tensor {fn}({params}) {{\n" + body +
            f"}}\n\nCAF_REGISTER(m) {{ m.def(\"{fn}\", &{fn}); }}\n")


ELEMENTWISE = """  auto out = torch::empty_like({a});
  const float* pa = {a}.data_ptr<float>();
  const float* pb = {b}.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t i = 0; i < {a}.numel(); ++i) {{
{expr}  }}
  return out;
"""

ROWS = """  auto out = torch::empty({shape}, x.options());
  const int64_t rows = x.size(0), n = x.size(1);
  for (int64_t r = 0; r < rows; ++r) {{
    const float* px = x.data_ptr<float>() + r * n;
    float* po = out.data_ptr<float>() + r * {stride};
{body}  }}
  return out;
"""

KERNELS = {
    "add_relu": kernel("add_relu", "torch::Tensor a, torch::Tensor b", ELEMENTWISE.format(
        a="a", b="b", expr="    po[i] = std::fmax(pa[i] + pb[i], 0.f);\n")),
    "fused_elementwise": kernel("fused_elementwise", "torch::Tensor x, torch::Tensor y", ELEMENTWISE.format(
        a="x", b="y", expr=(
            "    const float u = pa[i], v = pb[i];\n"
            "    float z = std::tanh(u * 2.f + v) * 0.5f + u * v;\n"
            "    z = std::fmax(z, 0.f) - 0.25f;\n"
            "    po[i] = v / (1.f + std::exp(-z));\n"))),
    "row_sum": kernel("row_sum", "torch::Tensor x", ROWS.format(shape="{x.size(0), 1}", stride="1", body=(
        "    double s = 0;\n"
        "    for (int64_t j = 0; j < n; ++j) s += px[j];\n"
        "    po[0] = s;\n"))),
    "softmax": kernel("softmax", "torch::Tensor x", ROWS.format(shape="x.sizes()", stride="n", body=(
        "    float mx = px[0];\n"
        "    for (int64_t j = 0; j < n; ++j) mx = std::fmax(mx, px[j]);\n"
        "    double s = 0;\n"
        "    for (int64_t j = 0; j < n; ++j) s += po[j] = std::exp(px[j] - mx);\n"
        "    for (int64_t j = 0; j < n; ++j) po[j] /= s;\n"))),
    "layernorm": kernel("layernorm", "torch::Tensor x, torch::Tensor w, torch::Tensor b", ROWS.format(
        shape="x.sizes()", stride="n", body=(
            "    double s = 0, ss = 0;\n"
            "    for (int64_t j = 0; j < n; ++j) s += px[j], ss += px[j] * px[j];\n"
            "    const double mean = s / n, inv = 1 / std::sqrt(ss / n - mean * mean + 1e-5);\n"
            "    for (int64_t j = 0; j < n; ++j)\n"
            "      po[j] = (px[j] - mean) * inv * w.data_ptr<float>()[j] + b.data_ptr<float>()[j];\n"))),
    "linear_bias_gelu": kernel("linear_bias_gelu", "torch::Tensor x, torch::Tensor w, torch::Tensor b", ROWS.format(
        shape="{x.size(0), w.size(0)}", stride="w.size(0)", body=(
            "    for (int64_t o = 0; o < w.size(0); ++o) {\n"
            "      const float* pw = w.data_ptr<float>() + o * n;\n"
            "      float v = b.data_ptr<float>()[o];\n"
            "      for (int64_t j = 0; j < n; ++j) v += px[j] * pw[j];\n"
            "      po[o] = 0.5f * v * (1.f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));\n"
            "    }\n"))),
}

# CUDA kernels of the same tasks (the GPU judge's demonstrations, cuda_demonstrations.jsonl):
# per task a .cu (device code and a plain launcher, caf_cuda.h only) and a .cpp (allocation,
# the launch on torch's stream, registration). One thread per element, or one 256-thread block
# per row with warp-shuffle reductions.
CU_HEADER = '#include "caf_cuda.h"\n\n'
BLOCK_REDUCE = """// Sum (or max) over the block's 256 threads: warp shuffles, then one slot per warp.
__device__ float block_reduce(float v, float* red, bool take_max) {
  for (int s = 16; s; s >>= 1) {
    const float o = __shfl_xor_sync(0xffffffff, v, s);
    v = take_max ? fmaxf(v, o) : v + o;
  }
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  float t = red[0];
  for (int w = 1; w < blockDim.x / 32; ++w) t = take_max ? fmaxf(t, red[w]) : t + red[w];
  __syncthreads();
  return t;
}

"""


def cuda_pair(fn, params, launch_args, alloc, kernel_src, launch_params, launch_body, extra_device=""):
    cu = (CU_HEADER + extra_device + kernel_src +
          f"\nvoid {fn}_launch({launch_params}, cudaStream_t s) {{\n{launch_body}}}\n")
    cpp = ('#include "caf_kernel.h"\n\n' + f"void {fn}_launch({launch_params}, cudaStream_t s);\n\n" +
           f"torch::Tensor {fn}({params}) {{\n{alloc}  {fn}_launch({launch_args}, caf::stream());\n"
           "  return out;\n}\n\n" + f'CAF_REGISTER(m) {{ m.def("{fn}", &{fn}); }}\n')
    return cu, cpp


ELEMENT_KERNEL = """__global__ void {fn}_k(const float* a, const float* b, float* o, int64_t n) {{
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
{expr}}}
"""
EW_LAUNCH = "  {fn}_k<<<caf::blocks_for(n, 256), 256, 0, s>>>(a, b, o, n);\n"
EW_PARAMS = "const float* a, const float* b, float* o, int64_t n"
ROW_LAUNCH = "  {fn}_k<<<static_cast<unsigned>(rows), 256, 0, s>>>({args});\n"


def ew(fn, a, b, expr):
    return cuda_pair(fn, f"torch::Tensor {a}, torch::Tensor {b}",
                     f"{a}.data_ptr<float>(), {b}.data_ptr<float>(), out.data_ptr<float>(), {a}.numel()",
                     f"  auto out = torch::empty_like({a});\n", ELEMENT_KERNEL.format(fn=fn, expr=expr),
                     EW_PARAMS, EW_LAUNCH.format(fn=fn))


CUDA_KERNELS = {
    "add_relu": ew("add_relu", "a", "b", "  o[i] = fmaxf(a[i] + b[i], 0.f);\n"),
    "fused_elementwise": ew("fused_elementwise", "x", "y", (
        "  const float u = a[i], v = b[i];\n"
        "  float z = tanhf(u * 2.f + v) * 0.5f + u * v;\n"
        "  z = fmaxf(z, 0.f) - 0.25f;\n"
        "  o[i] = v / (1.f + expf(-z));\n")),
    "row_sum": cuda_pair(
        "row_sum", "torch::Tensor x", "x.data_ptr<float>(), out.data_ptr<float>(), x.size(0), x.size(1)",
        "  auto out = torch::empty({x.size(0), 1}, x.options());\n",
        """__global__ void row_sum_k(const float* x, float* o, int64_t n) {
  __shared__ float red[32];
  const float* px = x + blockIdx.x * n;
  float s = 0.f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += px[j];
  s = block_reduce(s, red, false);
  if (threadIdx.x == 0) o[blockIdx.x] = s;
}
""", "const float* x, float* o, int64_t rows, int64_t n", ROW_LAUNCH.format(fn="row_sum", args="x, o, n"),
        BLOCK_REDUCE),
    "softmax": cuda_pair(
        "softmax", "torch::Tensor x", "x.data_ptr<float>(), out.data_ptr<float>(), x.size(0), x.size(1)",
        "  auto out = torch::empty_like(x);\n",
        """__global__ void softmax_k(const float* x, float* o, int64_t n) {
  __shared__ float red[32];
  const float* px = x + blockIdx.x * n;
  float* po = o + blockIdx.x * n;
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, px[j]);
  mx = block_reduce(mx, red, true);
  float s = 0.f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += expf(px[j] - mx);
  const float inv = 1.f / block_reduce(s, red, false);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) po[j] = expf(px[j] - mx) * inv;
}
""", "const float* x, float* o, int64_t rows, int64_t n", ROW_LAUNCH.format(fn="softmax", args="x, o, n"),
        BLOCK_REDUCE),
    "layernorm": cuda_pair(
        "layernorm", "torch::Tensor x, torch::Tensor w, torch::Tensor b",
        "x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), x.size(0), x.size(1)",
        "  auto out = torch::empty_like(x);\n",
        """__global__ void layernorm_k(const float* x, const float* w, const float* b, float* o, int64_t n) {
  __shared__ float red[32];
  const float* px = x + blockIdx.x * n;
  float* po = o + blockIdx.x * n;
  float s = 0.f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += px[j];
  const float mean = block_reduce(s, red, false) / n;
  float ss = 0.f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) ss += (px[j] - mean) * (px[j] - mean);
  const float inv = rsqrtf(block_reduce(ss, red, false) / n + 1e-5f);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) po[j] = (px[j] - mean) * inv * w[j] + b[j];
}
""", "const float* x, const float* w, const float* b, float* o, int64_t rows, int64_t n",
        ROW_LAUNCH.format(fn="layernorm", args="x, w, b, o, n"), BLOCK_REDUCE),
    "linear_bias_gelu": cuda_pair(
        "linear_bias_gelu", "torch::Tensor x, torch::Tensor w, torch::Tensor b",
        "x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), x.size(0), "
        "w.size(0), x.size(1)",
        "  auto out = torch::empty({x.size(0), w.size(0)}, x.options());\n",
        """__global__ void linear_bias_gelu_k(const float* x, const float* w, const float* b, float* o,
                                   int64_t rows, int64_t outs, int64_t n) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i >= rows * outs) return;
  const int64_t r = i / outs, c = i % outs;
  const float* px = x + r * n;
  const float* pw = w + c * n;
  float v = b[c];
  for (int64_t j = 0; j < n; ++j) v += px[j] * pw[j];
  o[i] = 0.5f * v * (1.f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
}
""", "const float* x, const float* w, const float* b, float* o, int64_t rows, int64_t outs, int64_t n",
        "  linear_bias_gelu_k<<<caf::blocks_for(rows * outs, 256), 256, 0, s>>>(x, w, b, o, rows, outs, n);\n"),
}

# model_new.py per task: the modules whose parameters the judge loads, and the kernel call.
MODEL_NEW = "import torch.nn as nn\nimport caf_ext\n\n\nclass ModelNew(nn.Module):\n{init}{forward}"
INIT = "    def __init__(self, {args}):\n        super().__init__()\n        {body}\n\n"
FORWARD = "    def forward(self, {args}):\n        return caf_ext.{fn}({call})\n"

MODEL_NEWS = {
    "add_relu": MODEL_NEW.format(init="", forward=FORWARD.format(args="a, b", fn="add_relu", call="a, b")),
    "fused_elementwise": MODEL_NEW.format(
        init="", forward=FORWARD.format(args="x, y", fn="fused_elementwise", call="x, y")),
    "row_sum": MODEL_NEW.format(init="", forward=FORWARD.format(args="x", fn="row_sum", call="x")),
    "softmax": MODEL_NEW.format(init="", forward=FORWARD.format(args="x", fn="softmax", call="x")),
    "layernorm": MODEL_NEW.format(
        init=INIT.format(args="dim", body="self.norm = nn.LayerNorm(dim)"),
        forward=FORWARD.format(args="x", fn="layernorm", call="x, self.norm.weight, self.norm.bias")),
    "linear_bias_gelu": MODEL_NEW.format(
        init=INIT.format(args="in_features, out_features", body="self.linear = nn.Linear(in_features, out_features)"),
        forward=FORWARD.format(args="x", fn="linear_bias_gelu", call="x, self.linear.weight, self.linear.bias")),
}


def honest(task):
    """The whole workflow: read the task and the starting file, write the kernel and ModelNew,
    compile, verify, finish (the replay run that shows real work: config/replay.toml)."""
    return {"task_id": task, "turns": [
        f"Task {task}. Reading model.py and model_new.py.\n" + call("Read", file_path="model.py") + "\n" +
        call("Read", file_path="model_new.py"),
        call("Write", file_path=f"kernels/{task}.cpp", content=KERNELS[task]),
        call("Write", file_path="model_new.py", content=MODEL_NEWS[task]),
        call("Bash", command="./compile"),
        call("Bash", command="verify"),
        f"Task {task}: the kernel compiles and verify passes. Done.",
    ]}


def demonstration(task):
    """The short form the small model learns (RFT, docs/TRAINING.md): read the starting file
    (model.py is in the prompt already), write the kernel and ModelNew in one turn, finish: three
    turns, the task's name first and again in the file and op names. No ./compile or verify turn:
    the judge builds and verifies what the episode leaves (each verify is one more evaluation in
    the slot's queue, the slowest part of a round on CPU)."""
    return {"task_id": task, "turns": [
        f"Task {task}. Reading model_new.py.\n" + call("Read", file_path="model_new.py"),
        call("Write", file_path=f"kernels/{task}.cpp", content=KERNELS[task]) + "\n" +
        call("Write", file_path="model_new.py", content=MODEL_NEWS[task]),
        f"Task {task}: kernel and model_new.py written. Done.",
    ]}


def cuda_demonstration(task):
    """The demonstration's three turns with the task's CUDA kernel (a .cu and its .cpp): what a
    scripted policy plays against the GPU judge (config/h200-iteration.toml)."""
    cu, cpp = CUDA_KERNELS[task]
    return {"task_id": task, "turns": [
        f"Task {task}. Reading model_new.py.\n" + call("Read", file_path="model_new.py"),
        call("Write", file_path=f"kernels/{task}.cu", content=cu) + "\n" +
        call("Write", file_path=f"kernels/{task}.cpp", content=cpp) + "\n" +
        call("Write", file_path="model_new.py", content=MODEL_NEWS[task]),
        f"Task {task}: CUDA kernel and model_new.py written. Done.",
    ]}


GIVES_UP = {"task_id": "*", "turns": [
    call("Read", file_path="model.py"),
    call("Glob", pattern="**/*"),
    "Checking what the starting file does.\n" + call("Bash", command="verify"),
    "I could not finish a kernel for this task in time.",
]}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out-dir", default=str(ROOT / "skills" / "replay"))
    out = pathlib.Path(p.parse_args().out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tasks = sorted(p.stem for p in (ROOT / "skills" / "tasks").glob("*.py"))
    missing = sorted(set(tasks) - set(KERNELS))
    missing += sorted(set(tasks) - set(CUDA_KERNELS))
    if missing:
        raise SystemExit(f"make_replay: no recorded kernel for bundled task(s) {', '.join(missing)}")
    files = {"default.jsonl": [honest(t) for t in tasks] + [GIVES_UP], "gives_up.jsonl": [GIVES_UP],
             "demonstrations.jsonl": [demonstration(t) for t in tasks],
             "cuda_demonstrations.jsonl": [cuda_demonstration(t) for t in tasks]}
    for name, episodes in files.items():
        (out / name).write_text("".join(json.dumps(e) + "\n" for e in episodes))
        print(out / name)


if __name__ == "__main__":
    main()
