"""Tasks the judge cannot judge soundly are refused at load with the reason (verdict flag
`task_error`, status ok: the task's fault, neither the submission's nor the slot's), never
judged: a reference that raises, a model.py that does not
load, a task too large for the slot (estimated on meta tensors, nothing allocated)."""
import pytest

HEADER = "import torch\nimport torch.nn as nn\n\n"
INPUTS = "\ndef get_inputs():\n    return [torch.randn(16, 4096)]\n\ndef get_init_inputs():\n    return []\n"
CONSTANT_WRITER = ("import torch\nimport torch.nn as nn\nimport caf_ext\n\n"
                   "class ModelNew(nn.Module):\n    def forward(self, x):\n"
                   "        return torch.zeros(x.shape[0], 64)\n")


def model(forward_body: str, inputs: str = INPUTS) -> str:
    return (HEADER + "class Model(nn.Module):\n    def forward(self, x):\n" + forward_body + inputs)


TASKS = {
    # name: (model.py, words of the reason)
    "reference_raises_shape_mismatch": (
        HEADER + "class Model(nn.Module):\n    def forward(self, predictions, targets):\n"
        "        return torch.mean(torch.clamp(1 - predictions * targets, min=0))\n"
        "\ndef get_inputs():\n    return [torch.randn(128), torch.randint(0, 2, (64,)).float() * 2 - 1]\n"
        "\ndef get_init_inputs():\n    return []\n",
        "the task's reference raised: RuntimeError: The size of tensor a (128) must match"),
    "model_py_does_not_load": (HEADER + "class Model(nn.Module:\n", "the task's model.py failed to load"),
    "too_large_for_the_slot": (model("        return x * 2\n", "\ndef get_inputs():\n    return "
                                     "[torch.randn(1 << 17, 1 << 16)]\n\ndef get_init_inputs():\n    return []\n"),
                               "task too large for this slot"),
}


def evaluate(judge, name, model_py, src=CONSTANT_WRITER, mode="verify"):
    resp = judge.client.evaluate(name, model_py, {"model_new.py": src}, mode=mode)
    assert resp["status"] == "ok", resp.get("error")  # not an infrastructure error
    return resp["verdict"]


@pytest.mark.parametrize("name", sorted(TASKS))
def test_task_is_refused_with_its_reason(judge, name):
    model_py, words = TASKS[name]
    v = evaluate(judge, name, model_py)
    assert v["flags"] == ["task_error"], v
    assert words in v["task_error"] and v["reason"].startswith("task error: "), v["reason"]
    assert v["correct"] is False and v["reward"] is None
    assert "Traceback" not in v["reason"]
    again = evaluate(judge, name, model_py, mode="profile" if name != "too_large_for_the_slot" else "verify")
    assert again["flags"] == ["task_error"] and words in again["task_error"]


def test_too_large_names_the_memory_it_needs(judge):
    v = evaluate(judge, "too_large", TASKS["too_large_for_the_slot"][0])
    assert "needs about" in v["reason"] and "one input set 32.00 GiB" in v["reason"], v["reason"]


def test_fresh_rounds_shrink_for_large_inputs_and_the_estimate_follows():
    from caf_agent_eval import options, task_check
    from caf_agent_eval.measure import calls_per_round
    t = options.DEFAULTS["timing"]
    assert calls_per_round(t, 1 << 20) == t["iters_per_round"]  # 1 MiB sets: a full round
    assert calls_per_round(t, 6 << 30) == 1  # KernelBench's 6.4 GB inputs: one call per round
    assert calls_per_round(dict(t, fresh_inputs=False), 6 << 30) == t["iters_per_round"]
    big = {"inputs": 6 << 30, "outputs": 6 << 30, "params": 0, "max_output_elems": 3 << 29}
    fixed = task_check.FIXED_BYTES + task_check.COMPARE_TEMPS * (1 << 24)
    # one call per round on the regular path: 3 + 2*(3+1) input sets, not 3 + 2*(3+10)
    assert (task_check.input_copies("profile", 1), task_check.output_copies("profile", 1)) == (11, 15)
    # the low-memory path (measure.low_memory) holds what a verify holds: 3 and 9
    assert task_check.counted_bytes(big, "profile") == (6 << 30) * (3 + 9) + fixed


H200_BYTES = 150_000_000_000  # what torch reports as the H200's total memory (~139.7 GiB)


def test_kernelbench_6gib_activations_fit_a_verify_and_a_profile_on_an_h200():
    # level1/19_ReLU and its neighbours: 4096 x 393216 fp32 in and out (6 GiB each). The
    # copies a verify holds (task_check.input_copies/output_copies: checks drawn one at a time)
    # fit on an H200 (~75 GiB counted, ~96 GiB with the GPU margin: 93.2 GiB measured on the
    # H200, 2026-12-01); the first estimate (31 copies, 186 GiB) refused them there. A
    # profile times them on the low-memory path, which holds no more than the checks.
    from caf_agent_eval import task_check
    relu = {"inputs": 6 << 30, "outputs": 6 << 30, "params": 0, "max_output_elems": 3 << 29}
    counted = task_check.counted_bytes(relu, "verify")
    assert 70 << 30 < counted < 80 << 30, counted / 2**30
    need = task_check.needed_bytes(relu, "verify")
    assert 93.2 * 2**30 < need <= task_check.needed_bytes(relu, "profile") < H200_BYTES, need / 2**30
    assert task_check.counted_bytes(relu, "verify", cuda=False) == counted + (12 << 30)  # the arena copy


def test_a_6gib_task_is_judged_on_a_slot_that_fits_it_and_refused_on_one_that_does_not(tmp_path):
    # check_size on meta tensors (nothing allocated) with the two slot sizes.
    from caf_agent_eval import task_check
    from caf_agent_eval.task import Task
    relu_py = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
               "    def forward(self, x):\n        return torch.relu(x)\n\n"
               "def get_inputs():\n    return [torch.rand(4096, 393216)]\n\n"
               "def get_init_inputs():\n    return []\n")
    t = Task("19_ReLU", relu_py, str(tmp_path))
    task_check.check_size(t, "verify", H200_BYTES)  # judged
    with pytest.raises(task_check.TaskError, match="verify job needs about 9[0-9].[0-9]+ GiB"):
        task_check.check_size(t, "verify", 64 << 30)
    task_check.check_size(t, "profile", H200_BYTES)  # timed on the low-memory path
    with pytest.raises(task_check.TaskError, match="profile job needs .*low-memory timing"):
        task_check.check_size(t, "profile", 64 << 30)


def test_a_reference_state_the_child_cannot_decode_is_the_judges_failure():
    """The reference's state is decoded in the child before any submission code runs, so a
    failure there (e.g. out of memory beside other jobs) is an infrastructure error, not
    the submission's `init` failure (a reference copy of level2/45 got reward -1 that way
    on the H200, 2026-12-03)."""
    from hack_helpers import FAST_TIMING, MODEL_NEW_HEADER, WorkerClient, build_root, cpu_kernels, task_source
    client = WorkerClient(device="cpu", threads=1, build_root=build_root(),
                          env={"CAF_EVAL_TEST_HOOKS": "1", "CAF_EVAL_TEST_BAD_STATE": "1"})
    try:
        files = dict(cpu_kernels())
        files["model_new.py"] = (MODEL_NEW_HEADER + "class ModelNew(nn.Module):\n"
                                 "    def forward(self, a, b):\n        return caf_ext.add_relu(a, b)\n")
        resp = client.evaluate("add_relu", task_source("add_relu"), files, mode="verify", options=FAST_TIMING)
    finally:
        client.close()
    assert resp["status"] == "infra_error", resp
    assert "decoding the reference's state" in resp["error"], resp["error"]
