"""The fused LM-head kernels (learner/fused_head.hpp) against the ATen composite on CUDA in bf16:
learner_tool grad's loss (sum of log-probabilities and entropies over the sampled tokens) and
every parameter's gradient, with and without --no-fused-head, at vocabularies that take the
vectorized path (a multiple of 8) and the scalar one, at two temperatures, with the chunk's
logits kept and recomputed."""
import json
import os
import pathlib
import subprocess

import pytest
import torch

transformers = pytest.importorskip("transformers")
from safetensors.torch import load_file  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

REPO = pathlib.Path(__file__).resolve().parents[2]
TOOL = pathlib.Path(os.environ.get("CAF_AGENT_BUILD_DIR", REPO / "build")) / "learner/learner_tool"


def make_model(root, vocab):
    torch.manual_seed(0)
    cfg = transformers.Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, vocab_size=vocab,
                                   max_position_embeddings=256, tie_word_embeddings=True,
                                   bos_token_id=None, eos_token_id=None, pad_token_id=None)
    path = root / f"model-{vocab}"
    transformers.Qwen2ForCausalLM(cfg).save_pretrained(path)
    return path


def grads(model, batch, out, *extra):
    proc = subprocess.run([str(TOOL), "grad", "--model", str(model), "--batch", str(batch), "--out", str(out),
                           "--device", "cuda", "--dtype", "bfloat16", "--entropy", *extra],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return load_file(str(out))


@pytest.mark.parametrize("vocab", [4096, 1001])
@pytest.mark.parametrize("temperature", ["1", "0.7"])
@pytest.mark.parametrize("keep", [True, False])
def test_fused_head_equals_the_composite(tmp_path, vocab, temperature, keep):
    if not TOOL.exists():
        pytest.fail(f"{TOOL} not built")
    model = make_model(tmp_path, vocab)
    bench = subprocess.run([str(TOOL), "bench", "--model", str(model), "--context", "64", "--steps", "1",
                            "--device", "cuda", "--dtype", "bfloat16"], capture_output=True, text=True, timeout=300)
    assert bench.returncode == 0, bench.stderr
    assert json.loads(bench.stdout.splitlines()[0])["fused_head"], "this build has no fused head kernels"

    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, vocab, (300,), generator=g).tolist()
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps({"tokens": tokens, "seq_offsets": [0, 120, 300],
                                 "loss_mask": [0] * 20 + [1] * 100 + [0] * 30 + [1] * 150,
                                 "rewards": [1.0, 0.0]}))
    extra = ["--temperature", temperature, "--chunk", "128"] + (["--no-head-recompute"] if keep else [])
    fused = grads(model, batch, tmp_path / "fused.safetensors", *extra)
    composite = grads(model, batch, tmp_path / "composite.safetensors", *extra, "--no-fused-head")
    assert fused.keys() == composite.keys()
    loss_f, loss_c = fused["loss"].item(), composite["loss"].item()
    assert abs(loss_f - loss_c) <= 1e-3 * abs(loss_c), (loss_f, loss_c)
    for name, want in composite.items():
        if not name.startswith("grad."):
            continue
        scale = want.abs().max().item()
        diff = (fused[name] - want).abs().max().item()
        assert scale > 0 and diff <= 2e-2 * scale, (name, diff, scale)
