"""Training end to end on loopback with real processes: a coordinator running the trainer, a
rollout node serving the small model (libtorch), a GPU-pool node judging on CPU, and the
learner as two CPU shards over gloo. Two PPO iterations; the learner's shard 1 is SIGKILLed in
the middle of iteration 2's step (frozen first, so the other shard is inside the all-reduce)
and restarted; the step fails with a recorded outcome, runs again and the run finishes with
every episode id consumed exactly once, iteration 2's episodes sampled by version 1."""
import json
import os
import signal
import subprocess
import time
import pathlib

import pytest

from cafagent_testlib import REPO, free_port, records_in, train_config_head



def write_config(tmp_path, *, shards, episodes, iterations, master_port):
    cfg = tmp_path / "train.toml"
    cfg.write_text(train_config_head(tmp_path, ("softmax", "layernorm"), max_new_tokens=24) + f"""[learner]
shards = {shards}
master_port = {master_port}
timeout_ms = 60000
actor_lr = 1e-4
critic_lr = 1e-4
[train]
stages = ["agentic_ppo"]
episodes_per_iteration = {episodes}
[train.agentic_ppo]
iterations = {iterations}
max_turns = 2
""")
    return cfg


def train_dir(tmp_path):
    return tmp_path / "run" / "train"


def events(tmp_path):
    lines = (train_dir(tmp_path) / "iterations.jsonl").read_text().splitlines()
    return [json.loads(l) for l in lines]


def check_consumed_once(tmp_path, expected_ids):
    state = json.loads((train_dir(tmp_path) / "train_state.json").read_text())
    consumed = [i for c in state["consumed"] for i in c["episode_ids"]]
    assert sorted(consumed) == expected_ids, state["consumed"]
    assert len(consumed) == len(set(consumed)), consumed
    assert state["pending"] == []
    return state


def versions_by_episode(tmp_path):
    return {r["episode_id"]: r["policy_versions"] for r in records_in(train_dir(tmp_path) / "trajectories")}


def test_two_ppo_iterations_survive_a_learner_shard_killed_mid_step(nodes, tmp_path):
    port, master = free_port(), free_port()
    cfg = write_config(tmp_path, shards=2, episodes=2, iterations=2, master_port=master)
    addr = f"127.0.0.1:{port}"
    coord = nodes("--role", "coordinator", "--config", str(cfg), "--port", str(port), "--train", name="coordinator")
    coord.wait_for("listening on")
    nodes("--role", "gpu-pool", "--config", str(cfg), "--coordinator", addr, name="pool")
    nodes("--role", "rollout", "--config", str(cfg), "--coordinator", addr, name="rollout")
    shard0 = nodes("--role", "learner", "--shard", "0", "--config", str(cfg), "--coordinator", addr, name="shard0")
    shard1 = nodes("--role", "learner", "--shard", "1", "--config", str(cfg), "--coordinator", addr, name="shard1")

    coord.wait_for("iteration 1 (agentic_ppo step 1): 2 episodes", timeout=300)
    coord.wait_for("published version 1", timeout=60)
    # Iteration 2: freeze shard 1 before its batch arrives, so shard 0 enters the step and
    # blocks in the gradient all-reduce; then kill shard 1 there.
    coord.wait_for("iteration 2 (agentic_ppo step 2): playing episodes 3-4", timeout=60)
    shard1.proc.send_signal(signal.SIGSTOP)
    coord.wait_for("step of iteration 2 sent to 2 shards (attempt 1)", timeout=300)
    time.sleep(1.0)
    shard1.proc.send_signal(signal.SIGKILL)
    shard1.proc.wait()
    coord.wait_for("step of iteration 2 (attempt 1) failed", timeout=60)
    restarted = nodes("--role", "learner", "--shard", "1", "--config", str(cfg), "--coordinator", addr,
                      name="shard1-restarted")

    assert coord.proc.wait(timeout=300) == 0, coord.log()
    log = coord.log()
    assert "training finished: version 2" in log, log
    assert "base version reloaded" in restarted.log(), restarted.log()
    state = check_consumed_once(tmp_path, [1, 2, 3, 4])
    assert state["policy_version"] == 2 and state["stages_done"][0]["outcome"] == "iterations"
    # Episodes of iteration k were sampled by version k - 1 (synchronous training).
    versions = versions_by_episode(tmp_path)
    assert set(versions) == {1, 2, 3, 4}
    for ep, v in versions.items():
        assert v and set(v) == {0 if ep <= 2 else 1}, (ep, v)
    ev = events(tmp_path)
    failed = [e for e in ev if e["event"] == "step_failed"]
    assert failed and failed[0]["iteration"] == 2 and failed[0]["attempt"] == 1, failed
    assert "shard" in failed[0]["reason"], failed[0]
    steps = [e for e in ev if e["event"] == "step"]
    assert [(e["iteration"], e["policy_version"]) for e in steps] == [(1, 1), (2, 2)], steps
    assert steps[1]["attempt"] >= 2 and sorted(steps[1]["episode_ids"]) == [3, 4]
    published = [e for e in ev if e["event"] == "published"]
    assert [p["version"] for p in published] == [1, 2]
    for p in published:
        assert len(p["services"]) == 1 and p["services"][0]["ok"] and p["services"][0]["ms"] > 0, p
    # Each committed step left a checkpoint the engine loads (the actor is a Hugging Face dir).
    for step in steps:
        assert (pathlib.Path(step["checkpoint"]) / "actor" / "model.safetensors").exists()


def test_local_role_trains_with_in_process_weights_and_resumes(caf_agent, tmp_path):
    cfg = write_config(tmp_path, shards=1, episodes=2, iterations=1, master_port=free_port())
    run = lambda: subprocess.run([str(caf_agent), "--role", "local", "--config", str(cfg), "--train"],
                                 capture_output=True, text=True, timeout=300, cwd=REPO)
    first = run()
    assert first.returncode == 0, first.stderr[-4000:]
    assert "published version 1 (in process)" in first.stderr, first.stderr[-4000:]
    assert "mean reward" in first.stderr and "tiers -1:" in first.stderr
    state = check_consumed_once(tmp_path, [1, 2])
    assert state["policy_version"] == 1
    published = [e for e in events(tmp_path) if e["event"] == "published"]
    assert published[0]["path"].startswith("inproc:") and all(s["ok"] for s in published[0]["services"])
    # The finished run directory resumes to "nothing left"; one of another config is refused.
    again = run()
    assert again.returncode == 0 and "training finished: version 1" in again.stderr, again.stderr[-3000:]
    check_consumed_once(tmp_path, [1, 2])
    cfg.write_text(cfg.read_text().replace("episodes_per_iteration = 2", "episodes_per_iteration = 3"))
    other = run()
    assert other.returncode == 2, other.stderr[-3000:]
    assert "belongs to another config (train.episodes_per_iteration" in other.stderr, other.stderr[-3000:]
