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

from cafagent_testlib import REPO, Node, free_port, records_in, train_config_head



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


def write_async_config(tmp_path, *, iterations):
    cfg = tmp_path / "train.toml"
    cfg.write_text(train_config_head(tmp_path, ("softmax", "layernorm"), max_new_tokens=16) + f"""[learner]
actor_lr = 1e-4
critic_lr = 1e-4
[train]
stages = ["agentic_ppo"]
episodes_per_iteration = 2
async = true
max_policy_lag = 1
[train.agentic_ppo]
iterations = {iterations}
max_turns = 1
temperature = 1.0
""")
    return cfg


def test_async_training_plays_the_next_iteration_while_the_step_runs(caf_agent, tmp_path):
    """train.async: iteration k + 1's episodes start once iteration k's batch is built, before
    version k is published; each step trains only records within max_policy_lag of its base
    version (the others counted as stale); every episode is recorded and consumed once."""
    cfg = write_async_config(tmp_path, iterations=3)
    out = subprocess.run([str(caf_agent), "--role", "local", "--config", str(cfg), "--train"],
                         capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr[-4000:]
    log = out.stderr
    assert "training finished: version 3" in log and "asynchronous (max_policy_lag 1)" in log, log[-4000:]
    # Iteration k + 1 starts playing before version k is published; the last one plays nothing ahead.
    for k, ids in ((1, "3-4"), (2, "5-6")):
        ahead = log.index(f"iteration {k + 1} (agentic_ppo step {k + 1}): playing episodes {ids} ahead "
                          f"with version {k - 1}")
        assert ahead < log.index(f"published version {k} "), log[-4000:]
        assert log.index(f"step of iteration {k} sent") > ahead  # it plays while the step runs
    assert "iteration 4 (agentic_ppo" not in log and log.count(" ahead with version ") == 2, log[-4000:]

    state = check_consumed_once(tmp_path, [1, 2, 3, 4, 5, 6])
    assert state["format_version"] == 3 and state["ahead"] == [] and state["policy_version"] == 3, state
    records = records_in(train_dir(tmp_path) / "trajectories")
    assert sorted(r["episode_id"] for r in records) == [1, 2, 3, 4, 5, 6]  # each recorded once
    versions = {r["episode_id"]: r["policy_versions"] for r in records}
    steps = [e for e in events(tmp_path) if e["event"] == "step"]
    assert [e["played_ahead"] for e in steps] == [False, True, True], steps
    played_early = 0
    for step in steps:
        base = step["policy_version"] - 1
        ids = sorted(step["episode_ids"])
        for i in ids:
            # Sampled by the running step's base version (played ahead) or by the one published meanwhile.
            assert versions[i] and set(versions[i]) <= {max(base - 1, 0), base}, (step["iteration"], i, versions[i])
            played_early += step["played_ahead"] and min(versions[i]) == base - 1
        # Within the lag: nothing is stale, and the step trained on every record that is not
        # an infrastructure failure.
        stale = sum(1 for i in ids if min(versions[i]) < base - 1)
        assert stale == 0 and step["dropped"].get("stale", 0) == 0, step
        assert step["kept"] == len(ids) - sum(step["dropped"].values()), step
    # The records show it too: episodes of iteration k + 1 sampled by version k - 1.
    assert played_early > 0, versions



def test_async_training_resumes_the_iteration_played_ahead(caf_agent, tmp_path):
    """Killed once version 1 is published (iteration 2 played ahead, planned in train_state.json
    before it played): the resumed run plays the same ids (those with a record are not played
    again) and consumes every episode once. It resumes with max_policy_lag = 0, so a record of
    iteration 2 that version 0 sampled is beyond the lag now: dropped and counted as stale."""
    cfg = write_async_config(tmp_path, iterations=2)
    node = Node(caf_agent, ["--role", "local", "--config", str(cfg), "--train"], tmp_path / "first.log")
    node.wait_for("published version 1 ", timeout=240)
    node.proc.send_signal(signal.SIGKILL)
    node.proc.wait()
    node.kill()
    state = json.loads((train_dir(tmp_path) / "train_state.json").read_text())
    # `ahead` until the iteration becomes the current one (`pending`) right after the publication.
    assert state["pending"] + state["ahead"] == [3, 4] and state["policy_version"] == 1, state
    before = {r["episode_id"]: r["policy_versions"] for r in records_in(train_dir(tmp_path) / "trajectories")}

    cfg.write_text(cfg.read_text().replace("max_policy_lag = 1", "max_policy_lag = 0"))
    again = subprocess.run([str(caf_agent), "--role", "local", "--config", str(cfg), "--train"],
                           capture_output=True, text=True, timeout=300, cwd=REPO)
    assert again.returncode == 0, again.stderr[-4000:]
    assert "playing episodes 3-4 with version 1" in again.stderr, again.stderr[-4000:]
    assert " ahead with version " not in again.stderr  # max_policy_lag = 0: nothing played ahead
    records = records_in(train_dir(tmp_path) / "trajectories")
    ids = sorted(r["episode_id"] for r in records)
    assert len(ids) == len(set(ids)) and ids[:4] == [1, 2, 3, 4], ids  # none played twice
    versions = {r["episode_id"]: r["policy_versions"] for r in records}
    for i, v in before.items():
        assert versions[i] == v  # kept from before the kill
    (it2,) = [e for e in events(tmp_path) if e["event"] in ("step", "no_training_data") and e["iteration"] == 2]
    stale = sum(1 for i in (3, 4) if min(versions[i]) < 1)
    assert it2["dropped"].get("stale", 0) == stale, (it2, versions)
    # Both stale: no training data, so a third iteration (episodes 5-6) took the stage's step 2.
    check_consumed_once(tmp_path, [1, 2, 3, 4] if it2["event"] == "step" else [1, 2, 3, 4, 5, 6])
