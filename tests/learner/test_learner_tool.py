"""learner_tool step: one PPO / RFT / value-pretraining step on a stored batch file, its report,
and the checkpoint it writes (the actor loads in transformers); bad batches are clear errors."""
import json
import os
import pathlib
import subprocess

import pytest
import torch

transformers = pytest.importorskip("transformers")

REPO = pathlib.Path(__file__).resolve().parents[2]
TOOL = pathlib.Path(os.environ.get("CAF_AGENT_BUILD_DIR", REPO / "build")) / "learner/learner_tool"


def run(*args):
    if not TOOL.exists():
        if os.environ.get("CAF_AGENT_ALLOW_SKIP") == "1":
            pytest.skip(f"{TOOL} not built")
        pytest.fail(f"{TOOL} not built (cmake --build <build> --target learner_tool)")
    return subprocess.run([str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("learner_tool")
    torch.manual_seed(0)
    cfg = transformers.Qwen2Config(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, vocab_size=64,
                                   max_position_embeddings=32, tie_word_embeddings=True,
                                   bos_token_id=None, eos_token_id=None, pad_token_id=None)
    transformers.Qwen2ForCausalLM(cfg).save_pretrained(root / "model")
    return root / "model"


def batch(tmp_path, **override):
    b = {"tokens": [1, 5, 9, 2, 7, 3, 4, 8, 6, 10], "seq_offsets": [0, 6, 10],
         "loss_mask": [0, 0, 1, 0, 1, 1, 0, 1, 1, 1], "rewards": [1.0, 0.0],
         "sampler_logp": [0, 0, -4.1, 0, -4.2, -4.0, 0, -4.1, -4.2, -4.1]}
    b.update(override)
    path = tmp_path / "batch.json"
    path.write_text(json.dumps(b))
    return path


@pytest.mark.parametrize("stage", ["ppo", "rft", "vp"])
def test_step_reports_and_writes_a_loadable_checkpoint(model_dir, stage, tmp_path):
    proc = run("step", "--model", model_dir, "--batch", batch(tmp_path), "--stage", stage,
               "--lr", "1e-3", "--critic-lr", "1e-3", "--out", tmp_path / "ckpt")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["applied"] and report["stage"] == stage and report["sampled_tokens"] == 6
    if stage == "ppo":
        assert report["mismatch_abs_delta_max"] >= 0 and "clip_fraction" in report
    ckpt = tmp_path / "ckpt"
    assert (ckpt / "latest").read_text().strip() == "step-00000001"
    step_dir = ckpt / "step-00000001"
    state = json.loads((step_dir / "trainer_state.json").read_text())
    assert state["version"] == 1 and state["step"] == 1
    actor = transformers.AutoModelForCausalLM.from_pretrained(step_dir / "actor")
    before = transformers.AutoModelForCausalLM.from_pretrained(model_dir)
    changed = any(not torch.equal(a, b) for a, b in zip(actor.state_dict().values(), before.state_dict().values()))
    assert changed == (stage != "vp")  # value pretraining leaves the actor alone
    assert (step_dir / "critic").exists() == (stage != "rft")


def test_bad_batches_are_clear_errors(model_dir, tmp_path):
    proc = run("step", "--model", model_dir, "--batch", batch(tmp_path, seq_offsets=[0, 6, 11]))
    assert proc.returncode == 1 and "offsets" in proc.stderr
    proc = run("step", "--model", model_dir, "--batch", batch(tmp_path, loss_mask=[0] * 10), "--stage", "rft")
    assert proc.returncode == 1 and "masked" in proc.stdout
    proc = run("step", "--model", model_dir, "--batch", batch(tmp_path, tokens=[1] * 9 + [64]), "--stage", "rft")
    assert proc.returncode == 1 and "vocabulary" in proc.stderr
    proc = run("step", "--model", model_dir, "--batch", batch(tmp_path), "--stage", "sft")
    assert proc.returncode == 1 and "unknown training stage" in proc.stderr


def test_step_lr_schedules(model_dir, tmp_path):
    # --phases: steps default to the phases' sum; each report names its step's lr.
    proc = run("step", "--model", model_dir, "--batch", batch(tmp_path), "--stage", "rft",
               "--phases", "2:1e-3,1:1e-4", "--batch-sequences", "1")
    assert proc.returncode == 0, proc.stderr
    lrs = [json.loads(l)["lr"] for l in proc.stdout.splitlines()]
    assert lrs == pytest.approx([1e-3, 1e-3, 1e-4])
    # --cosine: warm-up 1 of 3 steps to --lr 1e-3, then cosine down to --min-lr.
    proc = run("step", "--model", model_dir, "--batch", batch(tmp_path), "--stage", "rft", "--steps", "3",
               "--lr", "1e-3", "--cosine", "--warmup", "1", "--min-lr", "1e-5")
    assert proc.returncode == 0, proc.stderr
    lrs = [json.loads(l)["lr"] for l in proc.stdout.splitlines()]
    assert lrs == pytest.approx([1e-3, 1e-3, 1e-5 + (1e-3 - 1e-5) * 0.5])
    proc = run("step", "--model", model_dir, "--batch", batch(tmp_path), "--stage", "rft", "--phases", "2:x")
    assert proc.returncode == 1 and "--phases: phase '2:x'" in proc.stderr


def test_bench_profile_and_attention_backend(model_dir, tmp_path):
    out = tmp_path / "profile.json"
    proc = run("bench", "--model", model_dir, "--context", 16, "--seq-len", 8, "--steps", 1,
               "--sdpa", "math", "--profile", out)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[0])
    assert report["sdpa"] == "math" and report["tokens_per_second"] > 0
    profile = json.loads(out.read_text())
    assert profile["step_wall_us"] > 0 and isinstance(profile["kernels"], list)
    trace = json.loads((tmp_path / "profile.json.trace.json").read_text())
    assert any(e.get("name", "").startswith("aten::") for e in trace["traceEvents"])
    proc = run("bench", "--model", model_dir, "--context", 16, "--steps", 1, "--sdpa", "fastest")
    assert proc.returncode == 1 and "--sdpa must be" in proc.stderr
