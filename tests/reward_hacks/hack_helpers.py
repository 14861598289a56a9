"""Helpers of the reward-hack suite: the shared kernel library (kernels_cpu/, built once,
cached by content hash), task sources, the Judge wrapper and assertions.

Every submission goes through the real worker protocol, exactly as production sends it.
"""
from __future__ import annotations

import glob
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "skills", "eval_worker"))

from caf_agent_eval.client import WorkerClient  # noqa: E402

KERNELS_CPU = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels_cpu")

# Rationale: short timing for the suite's budget (8 min on 2 cores); still >= 20 iterations
# per measurement, enough for the order-statistic CI.
FAST_TIMING = {"timing": {"budget_s": 0.5, "min_iters": 20, "max_iters": 120, "rel_ci": 0.02}}
# CAF_SUITE_TIMING (JSON of timing options) runs the suite under another timing method, e.g.
# the GPU suite with '{"flush_in_stream": true}' before that method becomes the default.
FAST_TIMING["timing"].update(json.loads(os.environ.get("CAF_SUITE_TIMING") or "{}"))


def build_root() -> str:
    """Content-hashed build cache shared across sessions (safe: the key is the sources)."""
    return os.environ.get("CAF_EVAL_BUILD_ROOT") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "caf_agent", "eval_build")


def task_source(name: str) -> str:
    with open(os.path.join(ROOT, "skills", "tasks", f"{name}.py")) as f:
        return f.read()


def cpu_kernels() -> dict:
    """The shared kernel library as a submission's kernels/** entries."""
    return {f"kernels/{os.path.basename(p)}": open(p).read()
            for p in sorted(glob.glob(os.path.join(KERNELS_CPU, "*.cpp")))}


MODEL_NEW_HEADER = "import torch\nimport torch.nn as nn\nimport caf_ext\n\n"


class Judge:
    """Submits (task, model_new.py source, extra files) and returns the verdict map."""

    def __init__(self, client: WorkerClient):
        self.client = client

    def __call__(self, task: str, model_new: str, mode: str = "verify", kernels: dict | None = None,
                 options: dict | None = None, header: bool = True) -> dict:
        files = dict(cpu_kernels() if kernels is None else kernels)
        files["model_new.py"] = (MODEL_NEW_HEADER if header else "") + model_new
        opts = dict(FAST_TIMING)
        opts.update(options or {})
        resp = self.client.evaluate(task, task_source(task), files, mode=mode, options=opts)
        assert resp["status"] == "ok", resp.get("error")
        return resp["verdict"]


def assert_rejected(v: dict, flag: str, *words: str) -> None:
    """The hack got reward -1 with the expected flag and reason words."""
    assert v["correct"] is False, v
    assert v["reward"] == -1, v
    assert flag in v["flags"], (flag, v["flags"], v["reason"])
    for w in words:
        assert w in v["reason"], (w, v["reason"])
