"""Gradient parity of the learner's packed training forward (learner_tool grad) with transformers.

Tiny random Llama, Qwen2 and Qwen3 checkpoints are written by transformers; the C++ side packs
three sequences into one row and computes loss = sum over masked tokens of log p(token | prefix)
and every parameter's gradient; transformers computes the same loss with one unpacked forward per
sequence in fp32. The loss and each gradient must agree to a relative 1e-4.
"""
import json
import os
import pathlib
import subprocess

import pytest
import torch

transformers = pytest.importorskip("transformers")
from cafagent_testlib import tiny_decoder_families  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
TOOL = pathlib.Path(os.environ.get("CAF_AGENT_BUILD_DIR", REPO / "build")) / "learner/learner_tool"
# Rationale: fp32 on CPU; the two sides differ only by summation order (~1e-6 relative).
REL_TOL = 1e-4
VOCAB = 128
LENGTHS = [9, 5, 12]


FAMILIES = tiny_decoder_families(VOCAB, max_positions=64)


def _randomize(model):
    # Rationale: transformers' init gives near-uniform logits and leaves biases and norms at
    # trivial values; larger random values make every parameter's gradient count.
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            p.copy_(1.0 + 0.2 * noise if "norm" in name else 0.15 * noise)


@pytest.fixture(scope="module")
def batch():
    gen = torch.Generator().manual_seed(1)
    seqs = [torch.randint(0, VOCAB, (n,), generator=gen) for n in LENGTHS]
    masks = []
    for n in LENGTHS:
        m = (torch.rand(n, generator=gen) < 0.6).float()
        m[0] = 0  # the first token has no predecessor
        masks.append(m)
    offsets = [0]
    for n in LENGTHS:
        offsets.append(offsets[-1] + n)
    return seqs, masks, {"tokens": torch.cat(seqs).tolist(), "seq_offsets": offsets,
                         "loss_mask": torch.cat(masks).tolist(), "rewards": [0.0] * len(LENGTHS)}


def _reference(model, seqs, masks):
    model.zero_grad()
    loss = 0
    for s, m in zip(seqs, masks):
        logp = torch.log_softmax(model(s[None]).logits[0, :-1].float(), -1)
        loss = loss + (logp.gather(1, s[1:, None])[:, 0] * m[1:]).sum()
    loss.backward()
    return loss.item(), {n: p.grad.clone() for n, p in model.named_parameters()}


def _run_tool(*args):
    if not TOOL.exists():
        if os.environ.get("CAF_AGENT_ALLOW_SKIP") == "1":
            pytest.skip(f"{TOOL} not built")
        pytest.fail(f"{TOOL} not built (cmake --build <build> --target learner_tool)")
    proc = subprocess.run([str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"learner_tool {args[0]} failed: {proc.stderr}"


VARIANTS = {
    "plain": ["--chunk", 0],
    "chunked_recomputed": ["--chunk", 4, "--checkpoint-layers"],
    "chunked_kept": ["--chunk", 4, "--no-head-recompute"],
}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("family", FAMILIES)
def test_loss_and_gradients_match_transformers(family, variant, batch, tmp_path):
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(FAMILIES[family](),
                                                          attn_implementation="eager").float()
    _randomize(model)
    model.save_pretrained(tmp_path / "model")
    seqs, masks, batch_json = batch
    (tmp_path / "batch.json").write_text(json.dumps(batch_json))
    extra = VARIANTS[variant]
    _run_tool("grad", "--model", tmp_path / "model", "--batch", tmp_path / "batch.json",
              "--out", tmp_path / "grads.safetensors", *extra)
    got = load_file(tmp_path / "grads.safetensors")
    want_loss, want_grads = _reference(model, seqs, masks)
    assert abs(got["loss"].item() - want_loss) <= REL_TOL * max(1.0, abs(want_loss))
    compared = 0
    for name, want in want_grads.items():
        key = "grad." + name
        assert key in got, f"no gradient for {name}"
        scale = want.abs().max().item()
        diff = (got[key] - want).abs().max().item()
        assert diff <= REL_TOL * max(scale, 1e-6), f"{name}: max diff {diff:.3g} vs max |grad| {scale:.3g}"
        compared += 1
    assert compared == len(want_grads) and compared >= 20
