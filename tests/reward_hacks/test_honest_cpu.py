"""Honest CPU submissions (C++ extension kernels, some with OpenMP): each must pass every
check, and a profiled one must get the tier its measured speedups imply.

Tier assertions on a loaded 2-core CI box: the reward is asserted to equal the tier computed
from the verdict's own median times (consistency), and only the fused eight-op chain (one
pass instead of eight dispatches, a measured 3x-10x gap) is asserted to beat eager by more
than the 5% margin; closer races are not asserted, because a noisy host can flip them.
"""
import pytest

from caf_agent_eval import reward

AB = "class ModelNew(nn.Module):\n    def forward(self, a, b):\n"
X = "class ModelNew(nn.Module):\n    def forward(self, x):\n"
XY = "class ModelNew(nn.Module):\n    def forward(self, x, y):\n"
LINEAR = ("class ModelNew(nn.Module):\n    def __init__(self, i, o):\n        super().__init__()\n"
          "        self.linear = nn.Linear(i, o)\n    def forward(self, x):\n"
          "        return caf_ext.{fn}(x, self.linear.weight, self.linear.bias)\n")
LAYERNORM = ("class ModelNew(nn.Module):\n    def __init__(self, dim):\n        super().__init__()\n"
             "        self.norm = nn.LayerNorm(dim)\n    def forward(self, x):\n"
             "        return caf_ext.layernorm(x, self.norm.weight, self.norm.bias, self.norm.eps)\n")

VERIFY_CASES = {
    "add_relu_omp": ("add_relu", AB + "        return caf_ext.add_relu_omp(a, b)\n"),
    "softmax": ("softmax", X + "        return caf_ext.softmax(x)\n"),
    "softmax_omp": ("softmax", X + "        return caf_ext.softmax_omp(x)\n"),
    "layernorm_omp": ("layernorm", LAYERNORM),
    "row_sum": ("row_sum", X + "        return caf_ext.row_sum(x)\n"),
    "linear_gelu_library_gemm": ("linear_bias_gelu", LINEAR.format(fn="linear_gelu_blas")),
    "linear_gelu_handwritten_omp": ("linear_bias_gelu", LINEAR.format(fn="linear_gelu_naive")),
    "fused_chain_omp_with_views": ("fused_elementwise", XY +
                                   "        n = x.shape[0]\n"
                                   "        out = caf_ext.fused_chain_omp(x.reshape(-1), y.reshape(-1))\n"
                                   "        return out.view(n, -1)\n"),
}


@pytest.mark.parametrize("name", sorted(VERIFY_CASES))
def test_honest_submission_passes_verification(judge, name):
    task, src = VERIFY_CASES[name]
    v = judge(task, src)
    assert v["correct"] is True, v["reason"]
    assert len(v["checks"]) == 5 and all(c["passed"] for c in v["checks"])
    assert v["flags"] == []


def _tier_consistent(v):
    t = v["timings"]
    expected, _ = reward.robust_reward(True, t["candidate_ms"], t["eager_ms"], t["compile_ms"])
    assert v["reward"] == expected, (v["reward"], t)
    lo, hi = t["ci95"]["candidate"]
    assert lo <= t["candidate_ms"] <= hi
    assert t["iterations"] >= 20


# Rationale: a speed assertion is a benchmark, not a CI test: on a loaded 2-core CI
# machine an 8x64 task measured 1.12x once (0.030 vs 0.034 ms) where a quiet run gives
# 3-10x. CI keeps the correctness and tier-consistency checks of the other tests.
@pytest.mark.slow
def test_fused_chain_beats_eager_by_the_margin(judge):
    v = judge("fused_elementwise", XY + "        return caf_ext.fused_chain(x, y)\n", mode="profile")
    assert v["correct"] is True, v["reason"]
    _tier_consistent(v)
    assert v["speedup_eager"] > 1.05 * 1.5, v["timings"]  # a 1.5x cushion over the margin
    assert v["reward"] >= 2


def test_add_relu_profiled_tier_is_consistent(judge):
    v = judge("add_relu", AB + "        return caf_ext.add_relu(a, b)\n", mode="profile")
    assert v["correct"] is True, v["reason"]
    _tier_consistent(v)
    assert v["reward"] in (1, 2, 3)
    assert v["timings"]["hold_ms"] == 0  # no hold kernel on a CPU
    assert set(v["timings"]["launch_ms"]) == {"candidate", "eager", "compile"}
    assert all(ms > 0 for ms in v["timings"]["launch_ms"].values())
    assert v["timings"]["hold_short"] == []
