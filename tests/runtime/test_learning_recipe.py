"""The embedded default learns (docs/TRAINING.md): `./x run` with config/local.toml as it is
(`caf-agent --role local`, the small model, the six bundled tasks, [train] enabled) must take
the mean reward of fresh greedy episodes, judged by the real judge, from -1 before training to
at least +1 after RFT on the recorded demonstrations, and PPO on fresh episodes must not lower
it (no task it solved fails after PPO; see check_rounds for the speed tiers). Only the run and workspace directories are moved (to the test's own); every recipe number
is config/local.toml's.

Slow (minutes of CPU; about 10 on the 2-core machine): marked `slow`, so CI leaves it out. The
seeds are config/local.toml's (policy.seed, the demonstrations' order, the learner's).
"""
import json
import re
import subprocess
import time

import pytest

from cafagent_testlib import REPO

pytestmark = pytest.mark.slow


def recipe_config(tmp_path, workspace_root):
    text = (REPO / "config" / "local.toml").read_text()
    for key, value in (("run_dir", tmp_path / "run"), ("workspace_root", workspace_root)):
        text, n = re.subn(rf'^{key} = "[^"]*"', f'{key} = "{value}"', text, count=1, flags=re.M)
        assert n == 1, key
    assert re.search(r"^enabled = true", text, re.M), "config/local.toml: [train] enabled must be true"
    cfg = tmp_path / "local.toml"
    cfg.write_text(text)
    return cfg


def test_x_run_learns_the_bundled_tasks(caf_agent, tmp_path, workspace_root):
    tasks = sorted(p.stem for p in (REPO / "skills" / "tasks").glob("*.py"))
    cfg = recipe_config(tmp_path, workspace_root)
    started = time.monotonic()
    res = subprocess.run([str(caf_agent), "--role", "local", "--config", str(cfg)],
                         capture_output=True, text=True, timeout=1800, cwd=REPO)
    wall = time.monotonic() - started
    assert res.returncode == 0, res.stderr[-4000:]
    print(res.stdout[-2500:], f"\nwall {wall:.0f} s")
    check_rounds(tmp_path / "run" / "train", tasks)
    assert "evaluation rounds (fresh episodes, real judge):" in res.stdout + res.stderr


def check_rounds(run, tasks):
    rounds = {r: json.loads((run / f"eval-{r}.json").read_text()) for r in ("base", "rft", "agentic_ppo")}
    for name, r in rounds.items():
        # Fresh episodes of every bundled task, none aborted, played greedily.
        assert sorted(x["task_id"] for x in r["records"]) == tasks, name
        assert r["aborted"] == 0 and r["temperature"] == 0.0, (name, r["summary"])
    assert rounds["base"]["policy_version"] == 0
    assert rounds["rft"]["policy_version"] > 0
    assert rounds["agentic_ppo"]["policy_version"] > rounds["rft"]["policy_version"]
    per_task = {n: {x["task_id"]: x["reward"] for x in r["records"]} for n, r in rounds.items()}
    assert rounds["base"]["mean_reward"] == -1, per_task["base"]
    assert rounds["rft"]["mean_reward"] >= 1, per_task["rft"]
    # PPO does not lower what RFT reached: no task correct after RFT is wrong after PPO, and the
    # mean stays >= 1. The speed tiers (2, 3) of a correct kernel are the judge's timing on a shared
    # CPU: the same tokens scored fused_elementwise 2 in one round and 3 in the next, so the rounds'
    # means are compared on correctness (reward capped at 1), not on those tiers.
    correct = {n: {t for t, r in p.items() if r >= 1} for n, p in per_task.items()}
    assert correct["rft"] <= correct["agentic_ppo"], per_task
    assert rounds["agentic_ppo"]["mean_reward"] >= 1, per_task
    capped = {n: sum(min(r, 1) for r in p.values()) for n, p in per_task.items()}
    assert capped["agentic_ppo"] >= capped["rft"], per_task
    # The RFT data were the played demonstrations (token-level records, real judge), not the rounds.
    events = [json.loads(line) for line in (run / "iterations.jsonl").read_text().splitlines()]
    steps = [e for e in events if e["event"] == "step"]
    rft = [e for e in steps if e["stage"] == "rft"]
    assert rft[0]["episode_ids"] == list(range(1, len(tasks) + 1)) and not rft[0]["reused_data"], rft[0]
    assert all(e["reused_data"] for e in rft[1:]) and rft[0]["kept"] == len(tasks)
    assert [e["stage"] for e in steps[len(rft):]] == ["agentic_ppo"] * (len(steps) - len(rft))
