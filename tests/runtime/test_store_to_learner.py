"""From rollout to learner: the records a real `--role local` run stored are packed into a
training batch as they are (trajectory_tool), a PPO step of the learner trains on them
(learner_tool), the trainer's recomputed log-probabilities agree with what the sampler
recorded, and the updated weights are served by the engine of the next run."""
import json
import os
import pathlib
import subprocess

import pytest

from cafagent_testlib import REPO, build_dir, records_in, store_of, tiny_model
from test_local_job import local_config


def tool(name):
    path = build_dir() / {"trajectory_tool": "rollout/trajectory_tool", "learner_tool": "learner/learner_tool"}[name]
    if not path.exists():
        pytest.fail(f"{path} is not built (cmake --build <build> --target {name})")
    return str(path)


def libtorch_config(tmp_path, workspace_root, model):
    cfg = local_config(tmp_path, workspace_root)
    cfg.write_text(cfg.read_text().replace('backend = "replay"', f'backend = "libtorch"\nmodel_dir = "{model}"\n'
                                           'max_new_tokens = 32\nmax_batch = 2\nseed = 11\nmax_context = 8192'))
    return cfg


def test_stored_records_train_the_learner_and_the_new_weights_serve(caf_agent, tmp_path, workspace_root):
    import torch
    from safetensors.torch import load_file

    model = tiny_model()
    run = subprocess.run([str(caf_agent), "--role", "local", "--config",
                          str(libtorch_config(tmp_path, workspace_root, model)), "--episodes", "2"],
                         capture_output=True, text=True, timeout=600, cwd=REPO)
    assert run.returncode == 0, run.stderr[-3000:]
    store = store_of(run.stdout)
    assert len(records_in(store)) == 2

    batch = tmp_path / "batch.json"
    packed = subprocess.run([tool("trajectory_tool"), "batch", "--store", str(store), "--stage", "ppo",
                             "--out", str(batch)], capture_output=True, text=True, timeout=60)
    assert packed.returncode == 0, packed.stderr
    summary = json.loads(packed.stdout)
    assert summary["kept"] == 2 and summary["records"] == 2, summary
    data = json.loads(batch.read_text())
    records = {r["episode_id"]: r for r in records_in(store)}
    # The batch holds the stored tokens verbatim, trajectory after trajectory.
    assert data["tokens"] == [t for i in data["episode_ids"] for t in records[i]["tokens"]]
    assert data["rewards"] == [float(records[i]["reward"]) for i in data["episode_ids"]]

    # A random model earns no positive reward, so RFT has nothing to learn from; it says so.
    rft = subprocess.run([tool("trajectory_tool"), "batch", "--store", str(store), "--stage", "rft",
                          "--out", str(tmp_path / "rft.json")], capture_output=True, text=True, timeout=60)
    assert rft.returncode == 1 and "no record" in rft.stderr
    assert json.loads(rft.stdout)["dropped"].get("reward below the RFT threshold") == 2

    ckpt = tmp_path / "ckpt"
    step = subprocess.run([tool("learner_tool"), "step", "--model", str(model), "--batch", str(batch),
                           "--stage", "ppo", "--lr", "1e-3", "--critic-lr", "1e-3", "--out", str(ckpt)],
                          capture_output=True, text=True, timeout=300)
    assert step.returncode == 0, step.stderr[-2000:]
    report = json.loads(step.stdout.strip().splitlines()[-1])
    assert report["applied"] and report["sequences"] == 2, report
    # The trainer recomputes the sampler's log-probabilities of the very tokens it sampled
    # (fp32 on both sides): the records were stored without re-tokenising anything.
    assert report["mismatch_abs_delta_max"] < 1e-3, report

    actor = next(p.parent for p in ckpt.rglob("model.safetensors") if p.parent.name == "actor")
    before, after = load_file(str(model / "model.safetensors")), load_file(str(actor / "model.safetensors"))
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert changed, "the PPO step changed no weight"
    for f in ("tokenizer.json", "tokenizer_config.json"):
        if (model / f).exists() and not (actor / f).exists():
            (actor / f).write_bytes((model / f).read_bytes())

    (tmp_path / "second").mkdir()
    again = subprocess.run([str(caf_agent), "--role", "local", "--config",
                            str(libtorch_config(tmp_path / "second", workspace_root, actor)), "--episodes", "1"],
                           capture_output=True, text=True, timeout=600, cwd=REPO)
    assert again.returncode == 0, again.stderr[-3000:]
    second = records_in(store_of(again.stdout))
    assert len(second) == 1 and second[0]["tokens"] and second[0]["termination"] != "aborted"
