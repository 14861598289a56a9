"""The Python reward mirror agrees with the shared boundary table (gpu_pool/reward_test.cpp
asserts the same table for the C++ judge)."""
import json
import math
import os

from hack_helpers import ROOT
from caf_agent_eval import reward


def _t(x):
    return float(x) if isinstance(x, str) else x


def test_boundary_table():
    with open(os.path.join(ROOT, "skills", "eval_worker", "caf_agent_eval", "reward_cases.json")) as f:
        cases = json.load(f)["cases"]
    assert len(cases) >= 10
    for c in cases:
        r, _ = reward.robust_reward(c["correct"], _t(c["t"]), _t(c["eager"]), _t(c["compile"]))
        assert r == c["reward"], c["name"]


def test_invalid_time_reason_names_it():
    r, why = reward.robust_reward(True, 1.0, math.nan, 1.0)
    assert r == -1 and "eager" in why


def test_speedup_reward():
    assert reward.speedup_reward(True, 0.5, 1.0) == 2.0
    assert reward.speedup_reward(False, 0.5, 1.0) == -1.0
