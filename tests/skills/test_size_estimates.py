"""The judge's size estimates of a task (skills/eval_worker/caf_agent_eval/task_check.py:
estimate_gib, cached_estimates), which the KernelBench bench and the baseline driver use to pack
jobs onto a GPU: computed on meta tensors, cached by source and formula, the same in spawned
processes."""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "skills", "eval_worker"))

from caf_agent_eval import task_check  # noqa: E402


def task(rows: int) -> str:
    return ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
            "    def forward(self, x):\n        return x * 2\n\n"
            f"def get_inputs():\n    return [torch.randn({rows}, 4096)]\n\n"
            "def get_init_inputs():\n    return []\n")


BIG = task(1 << 17)      # one 2 GiB fp32 input, nothing allocated: meta tensors
MID = task(1 << 14)       # 256 MiB: the regular timing path
SMALL = task(1 << 10)
BROKEN = "import torch\nclass Model(torch.nn.Module:\n"


def test_estimates_scale_with_the_inputs_and_a_profile_holds_more_than_a_verify():
    verify = task_check.estimate_gib("big", BIG, "verify")
    profile = task_check.estimate_gib("big", BIG, "profile")
    small = task_check.estimate_gib("small", SMALL, "verify")
    assert verify > 2 * 2  # at least the input and the output, 2 GiB each, held once
    # 2 GiB in and out: the low-memory timing path (measure.low_memory) holds no more than
    # the checks; a profile job needs what its verify needs, with the timing phase's margin
    assert verify <= profile <= verify * task_check.PROFILE_GPU_MARGIN / task_check.GPU_MARGIN + 0.01
    # 256 MiB in and out: the regular path, whose warm-up sets and rounds come on top
    assert task_check.estimate_gib("mid", MID, "profile") > task_check.estimate_gib("mid", MID, "verify")
    assert small < verify
    assert task_check.estimate_gib("broken", BROKEN, "verify") is None


def test_the_cache_is_keyed_by_source_and_mode(tmp_path):
    path = str(tmp_path / "estimates.json")
    first = task_check.cached_estimates([("big", BIG), ("broken", BROKEN)], "verify", path)
    assert first[0] == task_check.estimate_gib("big", BIG, "verify") and first[1] is None
    cache = json.load(open(path))
    assert len(cache) == 2
    # Read from the cache, not computed again: a planted value comes back.
    planted = {k: 123.0 for k in cache}
    json.dump(planted, open(path, "w"))
    assert task_check.cached_estimates([("renamed", BIG)], "verify", path) == [123.0]
    # Another mode and another source miss the cache and are added to it.
    got = task_check.cached_estimates([("big", BIG), ("small", SMALL)], "profile", path)
    assert got == [task_check.estimate_gib("big", BIG, "profile"), task_check.estimate_gib("small", SMALL, "profile")]
    assert len(json.load(open(path))) == 4


def test_spawned_processes_give_the_same_estimates(tmp_path):
    items = [("big", BIG), ("small", SMALL), ("broken", BROKEN)]
    serial = task_check.cached_estimates(items, "profile")
    assert task_check.cached_estimates(items, "profile", str(tmp_path / "e.json"), procs=2) == serial
