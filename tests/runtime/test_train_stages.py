"""The trainer's stages in one local-role process, killed at every stage boundary.

The run: an evaluation round of fresh greedy episodes before training, RFT on demonstrations
(recordings played token-level by the rollout node's replay, real sandbox and judge; a phased lr
schedule, several optimizer steps an iteration, one trajectory a step), value pretraining and
agentic PPO on fresh episodes of the small model, an evaluation round after each stage. The local
role is SIGKILLed right after each stage's last state write ("stage X done"), restarted, and must
resume at the next stage: no episode id consumed twice or skipped, every evaluation round played
once, the final table printed, the last checkpoint servable by `--eval --checkpoint`."""
import json
import os
import pathlib
import signal
import subprocess
import time

import pytest

from cafagent_testlib import REPO, Node, records_in, train_config_head

STAGES = ["rft", "value_pretrain", "agentic_ppo"]


def write_config(tmp_path, task_names=("softmax", "layernorm"), stages=STAGES, eval_episodes=2):
    cfg = tmp_path / "train.toml"
    cfg.write_text(train_config_head(tmp_path, task_names, max_new_tokens=16) + f"""[learner]
actor_lr = 1e-4
critic_lr = 1e-4
[train]
enabled = true
stages = {json.dumps(list(stages))}
episodes_per_iteration = 2
[train.eval]
episodes = {eval_episodes}
temperature = 0.0
max_turns = 1
[train.rft]
# The give-up recording (played for every task): short, so the test stays small; reward -1,
# so min_reward = -1 keeps it.
demonstrations = "{REPO / 'skills' / 'replay' / 'gives_up.jsonl'}"
min_reward = -1
iterations = 2
steps_per_iteration = 3
batch_sequences = 1
lr_schedule = "phases"
lr_phases = [[4, 1e-3], [2, 1e-4]]
[train.value_pretrain]
max_steps = 1
max_turns = 1
[train.agentic_ppo]
iterations = 1
max_turns = 1
temperature = 1.0
actor_lr = 1e-5
""")
    return cfg


def state_of(run):
    return json.loads((run / "train_state.json").read_text())


def start(caf_agent, cfg, log):
    return Node(caf_agent, ["--role", "local", "--config", str(cfg)], log)


@pytest.mark.slow
def test_every_stage_boundary_resumes_after_sigkill(caf_agent, tmp_path):
    cfg = write_config(tmp_path)
    run = tmp_path / "run" / "train"
    # Boundary 0: right after the evaluation before training was written.
    node = start(caf_agent, cfg, tmp_path / "run-base.log")
    node.wait_for("evaluation base (version 0): 2 episodes", timeout=600)
    node.proc.send_signal(signal.SIGKILL)
    node.proc.wait()
    node.kill()
    assert json.loads((run / "eval-base.json").read_text())["episodes"] == 2
    for k, stage in enumerate(STAGES):
        node = start(caf_agent, cfg, tmp_path / f"run-{k}.log")
        # resumed right at the stage after the boundary that was killed
        node.wait_for(f"stage {stage}, step 0, version", timeout=120)
        node.wait_for(f"stage {stage} done after", timeout=600)
        node.proc.send_signal(signal.SIGKILL)
        node.proc.wait()
        node.kill()
        st = state_of(run)
        assert st["stage_index"] == k + 1 and st["stage_step"] == 0 and st["pending"] == [], st
        assert [d["stage"] for d in st["stages_done"]] == STAGES[:k + 1]
    last = start(caf_agent, cfg, tmp_path / "run-last.log")
    assert last.proc.wait(timeout=600) == 0, last.log()[-4000:]
    log = last.log()
    assert "run directory" in log and "(all done)" in log, log[-3000:]
    assert "evaluation rounds (fresh episodes, real judge):" in log, log[-3000:]

    st = state_of(run)
    # Fresh episodes (demonstrations, value pretraining, PPO) consumed exactly once each, in order.
    consumed = [i for c in st["consumed"] for i in c["episode_ids"]]
    assert consumed == list(range(1, st["next_episode_id"])), st["consumed"]
    # RFT: the demonstrations were played once (episodes 1-2, the replay's records: tokens with the
    # loss mask on the recorded turns), consumed by its first iteration; both iterations trained on
    # them: 2 x 3 optimizer steps at the phases' rates.
    rft = [c for c in st["consumed"] if c["stage"] == "rft"]
    assert [c["episode_ids"] for c in rft] == [[1, 2], []], rft
    records = {r["episode_id"]: r for r in records_in(run / "trajectories")}
    for i in (1, 2):
        assert records[i]["tokens"] and sum(records[i]["loss_mask"]) > 0, records[i]["task_id"]
    events = [json.loads(l) for l in (run / "iterations.jsonl").read_text().splitlines()]
    steps = [e for e in events if e["event"] == "step"]
    rft_steps = [e for e in steps if e["stage"] == "rft"]
    assert [e["actor_lrs"] for e in rft_steps] == [[1e-3, 1e-3, 1e-3], [1e-3, 1e-4, 1e-4]], rft_steps
    assert all(e["optimizer_steps"] == 3 for e in rft_steps)
    assert [e["stage"] for e in steps] == ["rft", "rft", "value_pretrain", "agentic_ppo"]
    ppo = steps[-1]
    assert ppo["actor_lrs"] == [1e-5] and set(ppo["tiers"]) <= {"-1", "1", "2", "3"}
    # PPO's episodes were sampled with version 3 (after 2 RFT + 1 VP steps).
    for i in ppo["episode_ids"]:
        assert set(records[i]["policy_versions"]) == {3}, records[i]["policy_versions"]

    # Every evaluation round ran once: episodes 1-2 of its own store, with the version it names.
    versions = {"base": 0, "rft": 2, "value_pretrain": 3, "agentic_ppo": 4}
    for round_, version in versions.items():
        summary = json.loads((run / f"eval-{round_}.json").read_text())
        assert summary["policy_version"] == version and summary["episodes"] == 2, summary
        recs = records_in(run / f"eval-{round_}")
        assert sorted(r["episode_id"] for r in recs) == [1, 2], round_
        for r in recs:
            assert r["mode"] == "eval" and set(r["policy_versions"]) <= {version}, (round_, r["policy_versions"])
        label = "before training" if round_ == "base" else f"after {round_}"
        assert f"\n  {label}" in log and f"version {version}: 2 episodes, mean reward" in log, log[-3000:]
    evaluations = [e["round"] for e in events if e["event"] == "evaluation"]
    assert evaluations == list(versions), evaluations

    # The last checkpoint serves: actor/ has the tokenizer; --eval --checkpoint plays [train.eval].
    ckpt = pathlib.Path(st["checkpoint"])
    assert (ckpt / "actor" / "tokenizer.json").exists() and (ckpt / "actor" / "tokenizer_config.json").exists()
    ev = subprocess.run([str(caf_agent), "--role", "local", "--config", str(cfg), "--eval", "--checkpoint", str(ckpt)],
                        capture_output=True, text=True, timeout=600, cwd=REPO)
    assert ev.returncode == 0, ev.stderr[-3000:]
    assert "eval episodes: 2 records" in ev.stdout, ev.stdout
    assert str(ckpt / "actor") in ev.stderr


def test_demonstrations_and_evaluation_rounds(caf_agent, tmp_path):
    """CI-sized: one task, RFT alone on its demonstration, an evaluation round before and after."""
    cfg = write_config(tmp_path, task_names=("softmax",), stages=["rft"], eval_episodes=2)
    out = subprocess.run([str(caf_agent), "--role", "local", "--config", str(cfg)],
                         capture_output=True, text=True, timeout=600, cwd=REPO)
    assert out.returncode == 0, out.stderr[-4000:]
    run = tmp_path / "run" / "train"
    st = state_of(run)
    assert [c["episode_ids"] for c in st["consumed"]] == [[1], []] and st["stage_data"] == [], st
    events = [json.loads(l) for l in (run / "iterations.jsonl").read_text().splitlines()]
    steps = [e for e in events if e["event"] == "step"]
    assert [e["actor_lrs"] for e in steps] == [[1e-3, 1e-3, 1e-3], [1e-3, 1e-4, 1e-4]], steps
    assert [e["reused_data"] for e in steps] == [False, True]
    (demo,) = [r for r in records_in(run / "trajectories") if r["episode_id"] == 1]
    assert demo["tokens"] and sum(demo["loss_mask"]) > 0  # token-level replay
    assert [e["round"] for e in events if e["event"] == "evaluation"] == ["base", "rft"]
    assert "\n  before training" in out.stdout and "\n  after rft" in out.stdout, out.stdout
    assert json.loads((run / "eval-rft.json").read_text())["policy_version"] == 2
    # The rounds are greedy (train.eval.temperature = 0, while policy.temperature is 1): the two
    # episodes of the one task, with different seeds, sample the same tokens.
    for round_ in ("base", "rft"):
        a, b = sorted(records_in(run / f"eval-{round_}"), key=lambda r: r["episode_id"])
        assert a["tokens"] == b["tokens"] and sum(a["loss_mask"]) > 0, round_


def test_checkpoint_option_names_what_is_missing(caf_agent, tmp_path):
    empty = tmp_path / "step-00000001"
    (empty / "actor").mkdir(parents=True)
    out = subprocess.run([str(caf_agent), "--role", "local", "--eval", "--checkpoint", str(empty)],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 2 and "neither actor/config.json nor config.json" in out.stderr, out.stderr
    (empty / "actor" / "config.json").write_text("{}")
    out = subprocess.run([str(caf_agent), "--role", "local", "--eval", "--checkpoint", str(empty)],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 2 and "tokenizer.json is missing" in out.stderr, out.stderr
    out = subprocess.run([str(caf_agent), "--role", "learner", "--checkpoint", str(empty)],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 2 and "--checkpoint is for the local" in out.stderr, out.stderr
