"""The embedded default's learning recipe, offline and end to end (docs/TRAINING.md):

  1. the recorded honest episodes of every bundled task (skills/replay/default.jsonl) are played
     token-level through the real sandbox and judge, so each record holds the exact tokens of the
     conversation under the small model's chat template;
  2. `trajectory_tool batch --stage rft` keeps the clean successes, `learner_tool step --stage rft`
     fine-tunes the small model on them (RECIPE below);
  3. the checkpoint's actor serves fresh `--role local` episodes (libtorch backend, real judge):
     their mean reward must be >= +1, where the base model's is -1;
  4. one PPO step on those fresh records must not lower the mean reward of the next fresh round.

Slow (minutes of CPU): marked `slow`, so CI leaves it out. Fixed seeds throughout.
"""
import json
import shutil
import subprocess

import pytest

from cafagent_testlib import REPO, build_dir, records_in, store_of, tiny_model
from test_local_job import check_replay_tokens, local_config

pytestmark = pytest.mark.slow

# The recipe; docs/TRAINING.md gives the measurements behind each number and the [train] keys.
RECIPE = {
    # RFT in phases (steps, lr), each a learner_tool run from the previous actor with a fresh
    # optimizer. Measured: 450 at 1e-2 then 90 at 3e-3 gave 4 of 6 fresh episodes passing
    # (mean 0.67); the third phase is the projection for the last two.
    "rft_phases": [(450, 1e-2), (90, 3e-3), (150, 1e-3)],
    "rft_batch_sequences": 1,  # trajectories per step (round robin)
    "ppo_lr": 1e-4,
    "temperature": 0.0,        # fresh episodes: greedy decoding (see docs/TRAINING.md)
    "max_new_tokens": 512,
    "seed": 7,
}


def tool(name):
    path = build_dir() / {"trajectory_tool": "rollout/trajectory_tool", "learner_tool": "learner/learner_tool"}[name]
    if not path.exists():
        pytest.fail(f"{path} is not built (cmake --build <build> --target {name})")
    return str(path)


def run_local(caf_agent, cfg, timeout=900):
    res = subprocess.run([str(caf_agent), "--role", "local", "--config", str(cfg)],
                         capture_output=True, text=True, timeout=timeout, cwd=REPO)
    assert res.returncode == 0, res.stderr[-3000:]
    records = records_in(store_of(res.stdout))
    assert records and all(r["termination"] != "aborted" for r in records), \
        [(r["task_id"], r["abort_reason"]) for r in records]
    return store_of(res.stdout), records


def libtorch_config(tmp_path, name, workspace_root, model):
    d = tmp_path / name
    d.mkdir()
    cfg = local_config(d, workspace_root)
    cfg.write_text(cfg.read_text().replace(
        'backend = "replay"',
        f'backend = "libtorch"\nmodel_dir = "{model}"\ntemperature = {RECIPE["temperature"]}\n'
        f'max_new_tokens = {RECIPE["max_new_tokens"]}\nseed = {RECIPE["seed"]}\nmax_batch = 6\nmax_context = 8192'))
    return cfg


def mean_reward(records):
    return sum(r["reward"] for r in records) / len(records)


def serveable(ckpt):
    """The checkpoint's actor/ with the base model's tokenizer files beside it."""
    actor = ckpt / "latest" / "actor"
    if not actor.exists():
        actor = sorted(ckpt.glob("step-*/actor"))[-1]
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tiny_model() / f, actor / f)
    return actor


def train(tmp_path, name, model, batch, stage, steps, lr, extra=()):
    out = tmp_path / name
    res = subprocess.run([tool("learner_tool"), "step", "--model", str(model), "--batch", str(batch),
                          "--stage", stage, "--steps", str(steps), "--lr", str(lr), "--out", str(out), *extra],
                         capture_output=True, text=True, timeout=1800)
    assert res.returncode == 0, res.stderr[-3000:]
    reports = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert len(reports) == steps and all(r["applied"] for r in reports)
    return serveable(out), reports


def pack(store, stage, out):
    res = subprocess.run([tool("trajectory_tool"), "batch", "--store", str(store), "--stage", stage,
                          "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_rft_on_recorded_episodes_then_ppo_learns_the_bundled_tasks(caf_agent, tmp_path, workspace_root):
    tasks = sorted(p.stem for p in (REPO / "skills" / "tasks").glob("*.py"))
    base = tiny_model()

    # Before training: the random model writes no valid tool call.
    _, before = run_local(caf_agent, libtorch_config(tmp_path, "before", workspace_root, base))
    assert mean_reward(before) == -1

    # 1. Demonstrations: the honest recordings, token-level, judged for real.
    demo = tmp_path / "demo"
    demo.mkdir()
    cfg = local_config(demo, workspace_root)
    cfg.write_text(cfg.read_text() + f'model_dir = "{base}"\n')
    demo_store, demos = run_local(caf_agent, cfg)
    assert sorted(r["task_id"] for r in demos) == tasks and all(r["reward"] >= 1 for r in demos)
    check_replay_tokens(demos)

    # 2. RFT.
    summary = pack(demo_store, "rft", tmp_path / "rft.json")
    assert summary["kept"] == len(tasks), summary
    actor, first_nll = base, None
    for i, (steps, lr) in enumerate(RECIPE["rft_phases"]):
        actor, reports = train(tmp_path, f"rft-ckpt-{i}", actor, tmp_path / "rft.json", "rft", steps, lr,
                               ("--batch-sequences", str(RECIPE["rft_batch_sequences"])))
        first_nll = first_nll or reports[0]["nll"]
    assert reports[-1]["nll"] < first_nll

    # 3. Fresh episodes from the fine-tuned weights, judged by the real judge.
    rft_store, after_rft = run_local(caf_agent, libtorch_config(tmp_path, "after-rft", workspace_root, actor))
    assert sorted(r["task_id"] for r in after_rft) == tasks
    rft_mean = mean_reward(after_rft)
    assert rft_mean >= 1, [(r["task_id"], r["reward"], r["verdict"][:200]) for r in after_rft]

    # 4. One PPO step on those fresh records (as sampled) does not lower the reward.
    pack(rft_store, "ppo", tmp_path / "ppo.json")
    ppo_actor, _ = train(tmp_path, "ppo-ckpt", actor, tmp_path / "ppo.json", "ppo", 1, RECIPE["ppo_lr"],
                         ("--temperature", "1"))
    _, after_ppo = run_local(caf_agent, libtorch_config(tmp_path, "after-ppo", workspace_root, ppo_actor))
    assert mean_reward(after_ppo) >= rft_mean, [(r["task_id"], r["reward"]) for r in after_ppo]
