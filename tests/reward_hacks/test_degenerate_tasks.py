"""Degenerate tasks are judged, not refused: a task whose output barely depends on its input
(a sum of 262,144 uniform values per row moves by ~0.1% between inputs, inside KernelBench's
atol/rtol of 1e-2; KernelBench's deep random networks, large-K matmuls and losses are the same
class) is judged on how its outputs change between two seeded inputs as well
(job._variation). A constant, or the answer for one fixed input, passes KernelBench's own
elementwise test there and must still get -1; an honest kernel passes both. The verdict says
both: `kernelbench_correct` (KernelBench's test) and `correct` (the stricter, which the reward
uses)."""
import math

import pytest
import torch

from caf_agent_eval import task_check, verify
from caf_agent_eval.task import Task

ROW_SUM_TASK = ("import torch\nimport torch.nn as nn\n\n"
                "class Model(nn.Module):\n    def forward(self, x):\n"
                "        return torch.sum(x, dim=1, keepdim=True)\n\n"
                "def get_inputs():\n    return [torch.rand(64, 262144)]\n\n"
                "def get_init_inputs():\n    return []\n")
HEADER = "import torch\nimport torch.nn as nn\nimport caf_ext\n\n"
HONEST = HEADER + "class ModelNew(nn.Module):\n    def forward(self, x):\n        return caf_ext.row_sum(x)\n"
# The mean answer, written without looking at the input: inside atol/rtol on every check.
CONSTANT = (HEADER + "class ModelNew(nn.Module):\n    def forward(self, x):\n"
            "        return caf_ext.fill_rows(x, 1, 131072.0)\n")
# The right computation on an input of its own: a real answer, for the wrong input.
FIXED_INPUT = (HEADER + "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
               "        self.x = torch.rand(64, 262144)\n"
               "    def forward(self, x):\n        return caf_ext.row_sum(self.x)\n")


# KernelBench level2/9 at a smaller size: relu((linear(x) - 2) * 1.5) of uniform inputs is
# all zeros as initialised (the linear layer's spread is ~0.33): the judge scales the
# parameters (task_check.PARAM_SCALES: by 2, the first factor), where some outputs are positive.
FLAT_RELU_TASK = ("import torch\nimport torch.nn as nn\n\n"
                  "class Model(nn.Module):\n    def __init__(self, i, o):\n        super().__init__()\n"
                  "        self.linear = nn.Linear(i, o)\n"
                  "    def forward(self, x):\n        return torch.relu((self.linear(x) - 2.0) * 1.5)\n\n"
                  "def get_inputs():\n    return [torch.rand(64, 4096)]\n\n"
                  "def get_init_inputs():\n    return [4096, 256]\n")
FLAT_RELU_HONEST = (HEADER + "class ModelNew(nn.Module):\n    def __init__(self, i, o):\n"
                    "        super().__init__()\n        self.linear = nn.Linear(i, o)\n"
                    "    def forward(self, x):\n        return caf_ext.linear_sub_mul_relu("
                    "x, self.linear.weight, self.linear.bias, 2.0, 1.5)\n")
FLAT_RELU_ZEROS = (HEADER + "class ModelNew(nn.Module):\n    def __init__(self, i, o):\n"
                   "        super().__init__()\n        self.linear = nn.Linear(i, o)\n"
                   "    def forward(self, x):\n        return caf_ext.fill_rows(x, 256, 0.0)\n")


# The output changes with the input by less than float rounding (5 + 1e-9 x is 5.0 in float32):
# for the judge the same for every input, as KernelBench's level2/80, 2/83 and 3/28 are.
FLAT_TASK = ROW_SUM_TASK.replace("torch.sum(x, dim=1, keepdim=True)", "5.0 + 1e-9 * x[:, :1]")


def evaluate(judge, src, mode="verify", task=("row_sum_256k", ROW_SUM_TASK)):
    from hack_helpers import FAST_TIMING, cpu_kernels
    files = dict(cpu_kernels())
    files["model_new.py"] = src
    resp = judge.client.evaluate(task[0], task[1], files, mode=mode, options=FAST_TIMING)
    assert resp["status"] == "ok", resp.get("error")
    return resp["verdict"]


def test_the_task_is_degenerate_and_judged(judge):
    v = evaluate(judge, HONEST)
    assert "task_error" not in v["flags"], v["reason"]
    assert "does not depend on its input within atol=0.01" in v["task_degenerate"]
    assert v["correct"] is True and v["kernelbench_correct"] is True, v["reason"]
    errs = [c["variation_rel_err"] for c in v["checks"] if "variation_rel_err" in c]
    assert len(errs) == 4 and max(errs) < verify.VARIATION_REL_L2, v["checks"]  # checks 2-5 against check 1


@pytest.mark.parametrize("src", [CONSTANT, FIXED_INPUT], ids=["constant", "fixed_input"])
def test_an_answer_that_ignores_the_input_gets_minus_one(judge, src):
    v = evaluate(judge, src)
    assert v.get("kernelbench_correct") is True, (v["flags"], v["reason"])  # KernelBench's own test passes it
    assert v["correct"] is False and v["reward"] == -1, v
    assert "variation_mismatch" in v["flags"], v["flags"]
    assert "does not change with the input as the reference's does" in v["reason"], v["reason"]
    assert all(c["index"] < 5 for c in v["checks"]) and len(v["checks"]) == 5  # every check ran


def test_profile_of_an_honest_kernel_on_a_degenerate_task_gets_a_reward(judge):
    v = evaluate(judge, HONEST, mode="profile")
    assert v["correct"] is True, v["reason"]
    assert v["reward"] in (1, 2, 3), v  # timed calls also pass the variation check
    assert v["timings"]["candidate_ms"] > 0


def test_profile_of_a_constant_gets_minus_one(judge):
    v = evaluate(judge, CONSTANT, mode="profile")
    assert v["reward"] == -1 and "variation_mismatch" in v["flags"], (v["reason"], v["log"][-3000:])


def test_variation_error_of_constant_exact_and_noisy_answers():
    g = torch.Generator().manual_seed(0)
    a = 1000 + torch.rand(4096, generator=g)
    b = 1000 + torch.rand(4096, generator=g)
    assert verify.variation_error(a, b, a, b)[0] == 0.0
    const = torch.full_like(a, 1000.5)
    assert verify.variation_error(a, b, const, const)[0] == pytest.approx(1.0)
    noisy = 0.01 * torch.randn(4096, generator=g)  # ~3% of the change's size (~0.41 rms)
    err, var = verify.variation_error(a, b, a + noisy, b - noisy)
    assert 0.01 < err < verify.VARIATION_REL_L2 and var > 0
    assert math.isinf(verify.variation_error(a, b, a, b * float("nan"))[0])
    assert math.isinf(verify.variation_error(a, a, a, b)[0])  # the reference does not change, it does


def test_check_reference_marks_degenerate_and_refuses_below_float_rounding(tmp_path):
    t = Task("row_sum", ROW_SUM_TASK, str(tmp_path))
    task_check.check_reference(t, "cpu", 1e-2, 1e-2, 0.05)
    assert "does not depend on its input" in t.degenerate[(1e-2, 1e-2, 0.05)]
    task_check.check_reference(t, "cpu", 1e-4, 1e-4, 0.05)  # tight enough: an ordinary task there
    assert t.degenerate[(1e-4, 1e-4, 0.05)] is None
    flat = Task("flat", FLAT_TASK, str(tmp_path))
    task_check.check_reference(flat, "cpu", 1e-2, 1e-2, 0.05)
    assert "within float rounding" in flat.constant[(1e-2, 1e-2, 0.05)]
    uniform = ROW_SUM_TASK.replace("torch.sum(x, dim=1, keepdim=True)",
                                   "torch.ones(x.shape[0], 64) * (x - 0.5).sum()")
    u = Task("uniform", uniform, str(tmp_path))
    task_check.check_reference(u, "cpu", 1e-2, 1e-2, 0.05)  # constant per call, varies with the input
    assert "is constant within" in u.degenerate[(1e-2, 1e-2, 0.05)]


def test_a_task_flat_as_initialised_is_judged_with_scaled_parameters(judge):
    task = ("flat_relu", FLAT_RELU_TASK)
    v = evaluate(judge, FLAT_RELU_HONEST, task=task)
    assert v["correct"] is True and v["kernelbench_correct"] is True, v["reason"]
    assert v["task_conditioning"]["param_scale"] in task_check.PARAM_SCALES[1:], v.get("task_conditioning")
    assert "does not depend on its input" in v["task_conditioning"]["why"]
    assert "task_degenerate" not in v  # at the scaled parameters the elementwise test decides
    zeros = evaluate(judge, FLAT_RELU_ZEROS, task=task)  # the answer as initialised: all zeros
    assert zeros["correct"] is False and zeros["reward"] == -1 and "mismatch" in zeros["flags"], zeros
    assert zeros["kernelbench_correct"] is False


def test_check_reference_scales_parameters_and_skips_factors_that_overflow(tmp_path):
    # A deep ReLU chain: x2.5 per layer (He's scale) keeps the signal, x64 overflows float32
    # (skipped, never chosen) and x1/64 flattens it.
    deep = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n"
            "        self.net = nn.Sequential(*[m for _ in range(24) for m in (nn.Linear(64, 64), nn.ReLU())])\n"
            "    def forward(self, x):\n        return self.net(x)\n\n"
            "def get_inputs():\n    return [torch.rand(32, 64)]\n\ndef get_init_inputs():\n    return []\n")
    d = Task("deep", deep, str(tmp_path))
    task_check.check_reference(d, "cpu", 1e-2, 1e-2, 0.05)
    key = (1e-2, 1e-2, 0.05)
    assert d.param_scale[key] in (2.0, 2.5) and d.degenerate[key] is None, (d.param_scale, d.degenerate)
    assert "does not depend on its input" in d.degenerate_default[key]
    t = Task("flat_relu", FLAT_RELU_TASK, str(tmp_path))
    task_check.check_reference(t, "cpu", 1e-2, 1e-2, 0.05)
    assert t.param_scale[(1e-2, 1e-2, 0.05)] == 2.0 and t.degenerate[(1e-2, 1e-2, 0.05)] is None
    assert "does not depend on its input" in t.degenerate_default[(1e-2, 1e-2, 0.05)]


def test_a_task_whose_output_never_changes_is_judged_and_never_correct(judge):
    # the constant 5.0 is this task's exact answer: KernelBench's test passes it, the judge's
    # cannot tell it from a kernel, so no reward is earned on such a task (-1, not a task error)
    v = evaluate(judge, CONSTANT.replace("131072.0", "5.0"), task=("flat", FLAT_TASK))
    assert "task_error" not in v["flags"], v["reason"]
    assert v["kernelbench_correct"] is True and v["correct"] is False and v["reward"] == -1, v
    assert "constant_task" in v["flags"] and "within float rounding" in v["task_constant"]
    assert len(v["checks"]) == 5  # every check ran: KernelBench's verdict is decided
