"""One agentic PPO iteration with scripted replies ([policy] script): the libtorch engine
teacher-forces the recorded demonstrations, so the records hold the script's tokens with the
model's own log-probabilities (checked against transformers), PPO trains on them, the weights go
to the in-process engine, and the trainer reports the iteration's phase times (generation,
judging, old-log-prob recomputation, update, weight sync). The CPU twin of
config/h200-iteration.toml (bench/train/run_h200.sh); the judge is simulated to keep it fast."""
import json
import math
import shutil
import subprocess

import pytest

from cafagent_testlib import REPO, records_in, tiny_model

TASKS = ("add_relu", "row_sum")
TEMPERATURE = 0.7


def write_config(tmp_path, ws, extra_policy=""):
    tasks = tmp_path / "tasks"
    tasks.mkdir(exist_ok=True)
    for name in TASKS:
        shutil.copy(REPO / "skills" / "tasks" / f"{name}.py", tasks / f"{name}.py")
    cfg = tmp_path / "scripted.toml"
    cfg.write_text(f"""
[cluster]
port = 0
[runtime]
run_dir = "{tmp_path / 'run'}"
[rollout]
max_concurrent_episodes = 2
tasks_dir = "{tasks}"
skill_file = "{REPO / 'skills' / 'compact' / 'SKILL.md'}"
prompt_tools = ["Read", "Write", "Bash"]
[gpu_pool]
backend = "sim"
[sandbox]
workspace_root = "{ws}"
[policy]
backend = "libtorch"
model_dir = "{tiny_model()}"
script = "{REPO / 'skills' / 'replay' / 'demonstrations.jsonl'}"
sim_eval_ms_mean = 50
max_batch = 2
max_context = 4096
max_new_tokens = 1024
{extra_policy}
[learner]
actor_lr = 1e-4
[train]
enabled = true
stages = ["agentic_ppo"]
episodes_per_iteration = 2
[train.eval]
episodes = 0
[train.agentic_ppo]
iterations = 1
max_turns = 4
temperature = {TEMPERATURE}
""")
    return cfg


def run(caf_agent, cfg, timeout=600):
    return subprocess.run([str(caf_agent), "--role", "local", "--config", str(cfg)],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)


def reference_logprobs(tokens, temperature):
    """log softmax(logits / T) of the small model at every position (transformers, fp32)."""
    import torch
    import transformers
    model = transformers.AutoModelForCausalLM.from_pretrained(str(tiny_model()), dtype=torch.float32).eval()
    with torch.no_grad():
        logits = model(torch.tensor([tokens])).logits[0].float()
    logp = torch.log_softmax(logits / temperature, -1)
    return [0.0] + [logp[i - 1, tokens[i]].item() for i in range(1, len(tokens))]


def test_scripted_iteration_records_the_models_logprobs_and_reports_its_phases(caf_agent, tmp_path, workspace_root):
    res = run(caf_agent, write_config(tmp_path, workspace_root))
    assert res.returncode == 0, res.stderr[-4000:]
    assert "replies teacher-forced from" in res.stderr
    train = tmp_path / "run" / "train"
    records = records_in(train / "trajectories")
    assert sorted(r["task_id"] for r in records) == sorted(TASKS)
    script = {json.loads(l)["task_id"]: json.loads(l)["turns"]
              for l in (REPO / "skills" / "replay" / "demonstrations.jsonl").read_text().splitlines()}
    for r in records:
        # The script's turns, token for token (the episode appends what the engine returned).
        assert r["turn_texts"] == script[r["task_id"]][:len(r["turn_texts"])], r["task_id"]
        assert r["termination"] == "finished", r["termination"]
        want = reference_logprobs(list(r["tokens"]), TEMPERATURE)
        sampled = [i for i, m in enumerate(r["loss_mask"]) if m]
        assert len(sampled) > 100
        # The engine's log-probabilities of the forced tokens: the model's own, not replay's 0.
        assert all(r["logprobs"][i] < 0 for i in sampled), r["task_id"]
        worst = max(abs(r["logprobs"][i] - want[i]) for i in sampled)
        assert worst < 2e-3, (r["task_id"], worst)
    events = [json.loads(l) for l in (train / "iterations.jsonl").read_text().splitlines()]
    step = next(e for e in events if e["event"] == "step")
    assert step["stage"] == "agentic_ppo" and step["kept"] == 2
    phases = [e for e in events if e["event"] == "phases"]
    assert len(phases) == 1, events
    p = phases[0]
    assert p["episodes"] == 2 and p["policy_version"] == 1
    for key in ("rollout_wall_s", "generation_s", "judging_s", "old_logprob_s", "update_s", "weight_sync_s",
                "weight_stage_s", "publish_s"):
        assert key in p and math.isfinite(p[key]) and p[key] > 0, (key, p)
    assert p["generation_s"] <= 2 * p["rollout_wall_s"] + 1e-6  # two episodes side by side
    assert p["weight_sync_s"] < 1.0  # in process: tensors to the engine, no disk
    assert "phases (v1): rollout_wall" in res.stderr


def test_a_script_needs_the_libtorch_backend_and_an_existing_file(caf_agent, tmp_path, workspace_root):
    cfg = write_config(tmp_path, workspace_root)
    bad = tmp_path / "bad.toml"
    bad.write_text(cfg.read_text().replace(str(REPO / "skills" / "replay" / "demonstrations.jsonl"),
                                           str(tmp_path / "missing.jsonl")))
    res = run(caf_agent, bad, timeout=60)
    assert res.returncode != 0 and "policy.script" in res.stderr, res.stderr[-2000:]
    replay = tmp_path / "replay.toml"
    replay.write_text(cfg.read_text().replace('backend = "libtorch"', 'backend = "replay"'))
    res = run(caf_agent, replay, timeout=60)
    assert res.returncode != 0 and "script" in res.stderr and "libtorch" in res.stderr, res.stderr[-2000:]
