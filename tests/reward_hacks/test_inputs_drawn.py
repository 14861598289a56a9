"""Inputs are drawn, not sent: the worker and its child draw each call's inputs from the same
seed with task.generate_inputs, and the worker compares the child's inputs after each call bit
for bit with its own draw (every honest verify in this suite depends on the two agreeing)."""
import sys

import torch

from caf_agent_eval.task import generate_inputs, load_module_from_source

TASK = ("import torch\nbatch_size = 8\n"
        "def get_inputs():\n    return [torch.randn(batch_size, 16), torch.randint(0, 5, (batch_size,)), 3]\n"
        "def get_init_inputs():\n    return []\n")


def test_the_same_seed_draws_the_same_inputs_and_another_seed_others():
    mod = load_module_from_source(TASK, "caf_test_task")
    a, b = generate_inputs(mod, 7, "cpu"), generate_inputs(mod, 7, "cpu")
    assert all(torch.equal(x, y) for x, y in zip(a[:2], b[:2])) and a[2] == b[2] == 3
    c = generate_inputs(mod, 8, "cpu")
    assert not torch.equal(a[0], c[0])


def test_a_batch_override_is_drawn_and_then_restored():
    mod = load_module_from_source(TASK, "caf_test_task")
    half = generate_inputs(mod, 7, "cpu", batch_override=4)
    assert half[0].shape == (4, 16) and mod.batch_size == 8
    assert generate_inputs(mod, 7, "cpu")[0].shape == (8, 16)


def test_the_childs_task_module_is_not_importable():
    load_module_from_source(TASK, "caf_task_inputs")
    assert "caf_task_inputs" not in sys.modules
