"""Hacks that pass the static checks and are caught at run time: by the dispatcher guard,
the trusted comparisons in the parent, the output/layout checks, the timed-call sampling,
deadlines and crash isolation. All share one kernel build (kernels_cpu/)."""
from hack_helpers import assert_rejected

AB = "class ModelNew(nn.Module):\n    def forward(self, a, b):\n"
X = "class ModelNew(nn.Module):\n    def forward(self, x):\n"


def test_input_mutation(judge):
    v = judge("add_relu", AB + "        return caf_ext.add_relu_scratch_b(a, b)\n")
    assert_rejected(v, "input_mutation", "input 1 was modified in place")


def test_input_mutation_only_while_timed(judge):
    # Honest for the 5 checks, scratch space in an input from then on: the timed calls'
    # inputs are compared after the last round (a random sample of its sets).
    src = ("class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           "        self.calls = 0\n    def forward(self, a, b):\n        self.calls += 1\n"
           "        if self.calls > 5:\n            return caf_ext.add_relu_scratch_b(a, b)\n"
           "        return caf_ext.add_relu(a, b)\n")
    v = judge("add_relu", src, mode="profile")
    assert_rejected(v, "input_mutation", "timing input set", "input 1 was modified in place")


def test_uninitialised_output_memory(judge):
    v = judge("add_relu", AB + "        return caf_ext.empty_out(a)\n")
    assert v["reward"] == -1 and ({"mismatch", "nan_inf"} & set(v["flags"])), v


def test_caching_outputs_across_calls(judge):
    src = ("class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           "        self.cache = None\n    def forward(self, a, b):\n"
           "        if self.cache is None:\n            self.cache = caf_ext.add_relu(a, b)\n"
           "        return self.cache\n")
    v = judge("add_relu", src)
    assert_rejected(v, "bad_output", "reuses the buffer of an earlier call")


def test_torch_fallback_in_forward(judge):
    v = judge("add_relu", AB + "        return torch.relu(a + b)\n")
    assert_rejected(v, "torch_fallback", "aten::add.Tensor")




def test_gemm_from_python_is_a_fallback(judge):
    src = ("class ModelNew(nn.Module):\n    def __init__(self, i, o):\n        super().__init__()\n"
           "        self.linear = nn.Linear(i, o)\n    def forward(self, x):\n"
           "        y = torch.mm(x, self.linear.weight.t())\n"
           "        return caf_ext.add_relu(y, y)\n")
    v = judge("linear_bias_gelu", src)
    assert_rejected(v, "torch_fallback", "aten::mm")


def test_behaves_differently_while_timed(judge):
    # Correct for the 5 verification calls, garbage afterwards (detects timing by call count).
    src = ("class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           "        self.calls = 0\n    def forward(self, a, b):\n        self.calls += 1\n"
           "        if self.calls <= 5:\n            return caf_ext.add_relu(a, b)\n"
           "        return caf_ext.empty_out(a)\n")
    v = judge("add_relu", src, mode="profile", options={"timing": {"compile_baseline": False}})
    assert_rejected(v, "timed_mismatch", "behaves differently while timed")
    assert all(c["passed"] for c in v["checks"])  # it did fool the plain checks


def test_spoofed_pass_output(judge):
    v = judge("add_relu", AB + "        print('PASS: all checks passed, speedup 9.9x')\n"
                               "        return caf_ext.empty_out(a)\n")
    assert v["reward"] == -1 and "PASS" in v["log"], v


def test_system_exit_zero(judge):
    v = judge("add_relu", AB + "        raise SystemExit(0)\n")
    assert_rejected(v, "exception", "SystemExit")


def test_fake_tensor_subclass_output(judge):
    src = ("class Fake(torch.Tensor):\n    pass\n\n" + AB +
           "        return caf_ext.add_relu(a, b).as_subclass(Fake)\n")
    v = judge("add_relu", src)
    assert_rejected(v, "bad_output", "not a plain torch.Tensor")


def test_shape_hard_coding(judge):
    v = judge("add_relu", AB + "        return caf_ext.add_relu(a.view(16, 4096), b.view(16, 4096))\n")
    assert_rejected(v, "exception", "check 2/5")


def test_skipping_part_of_the_batch(judge):
    src = AB + ("        out = caf_ext.empty_out(a)\n        h = a.shape[0] // 2\n"
                "        out[:h].copy_(caf_ext.add_relu(a[:h].contiguous(), b[:h].contiguous()))\n"
                "        return out\n")
    v = judge("add_relu", src)
    assert v["reward"] == -1 and ({"mismatch", "nan_inf"} & set(v["flags"])), v


def test_constant_output_within_atol(judge):
    # softmax over 4096 columns is ~2.4e-4 everywhere: zeros pass atol=1e-2 elementwise.
    v = judge("softmax", X + "        return torch.zeros_like(x)\n")
    assert_rejected(v, "mismatch", "relative L2 error")


def test_output_aliases_input(judge):
    v = judge("add_relu", AB + "        return caf_ext.add_relu_into_a(a, b)\n")
    assert_rejected(v, "bad_output", "aliases input 0")


def test_nan_output(judge):
    v = judge("add_relu", AB + "        out = caf_ext.add_relu(a, b)\n        out[0, 0] = float('nan')\n"
                               "        return out\n")
    assert_rejected(v, "nan_inf", "NaN/Inf at index (0, 0)")


def test_expanded_view_output(judge):
    v = judge("add_relu", AB + "        return caf_ext.add_relu(a[:1].contiguous(), b[:1].contiguous())"
                               ".expand(a.shape[0], -1)\n")
    assert_rejected(v, "bad_output", "expanded view")


def test_lowered_precision_beyond_tolerance(judge):
    v = judge("add_relu", AB + "        return caf_ext.add_relu_lowprec(a, b)\n")
    assert_rejected(v, "mismatch", "outside atol=0.01")


def test_ignoring_reference_weights(judge):
    # LayerNorm with default (unit) affine parameters instead of the reference's.
    src = ("class ModelNew(nn.Module):\n    def __init__(self, dim):\n        super().__init__()\n"
           "        self.dim = dim\n    def forward(self, x):\n"
           "        w = torch.ones(self.dim)\n        return caf_ext.layernorm(x, w, torch.zeros(self.dim), 1e-5)\n")
    v = judge("layernorm", src)
    assert_rejected(v, "init", "Unexpected key(s) in state_dict")


def test_wrong_dtype(judge):
    v = judge("add_relu", AB + "        return caf_ext.add_relu(a, b).to(torch.float64)\n")
    assert_rejected(v, "mismatch", "dtype torch.float64")


def test_huge_output(judge):
    v = judge("add_relu", AB + "        return caf_ext.empty_out(a.new_empty(a.shape[0] * 64, a.shape[1]))\n")
    assert_rejected(v, "exception", "elements, expected")


def test_missing_op(judge):
    v = judge("add_relu", AB + "        return caf_ext.add_relu_that_does_not_exist(a, b)\n")
    assert_rejected(v, "exception", "add_relu_that_does_not_exist")


def test_infinite_loop_is_killed(judge):
    v = judge("add_relu", AB + "        while True:\n            pass\n", options={"call_timeout_s": 3.0})
    assert_rejected(v, "timeout", "check 1/5")


def test_segfault_is_contained(judge):
    v = judge("add_relu", AB + "        return caf_ext.segfault(a)\n")
    assert_rejected(v, "crashed", "SIGSEGV")


def test_compile_error_keeps_log(judge):
    bad = {"kernels/bad.cpp": '#include "caf_kernel.h"\ntorch::Tensor f(torch::Tensor a) { return a }\n'}
    v = judge("add_relu", AB + "        return caf_ext.f(a)\n", kernels=bad)
    assert_rejected(v, "compile", "compile error")
    assert "error" in v["compile_log"] and len(v["compile_log"]) <= 17 * 1024


def test_judge_survives_and_still_passes_honest_work(judge):
    # After crashes, hangs and compile errors above, the same worker still judges correctly.
    v = judge("add_relu", AB + "        return caf_ext.add_relu(a, b)\n")
    assert v["correct"] is True, v["reason"]
