"""The engine's flash cache attention on a CUDA GPU (marker gpu: the device machine only).

policy_model_tool generates with `--cache-attention flash` (decode rows over their own used keys,
chunked prefill continuing a cached prefix) and with `sdpa` (masked kernel) in bfloat16; both must
give the same greedy tokens up to a near tie and logprobs that agree with an fp32 transformers
forward pass over the generated sequence to bf16 precision.
"""
import json

import pytest
import torch

from test_policy_model import ids, run_tool, sharp_qwen2

transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    path = tmp_path_factory.mktemp("flash_model")
    m = sharp_qwen2(path)
    return path, m


def generate(path, prompts, mode):
    proc = run_tool("generate", "--model", path, "--device", "cuda", "--dtype", "bfloat16", "--cache-attention", mode,
                    "--prompts", ";".join(ids(p) for p in prompts), "--max-new-tokens", 24, "--temperature", 0,
                    "--max-batch", 3, "--max-context", 2048, "--prefill-chunk", 128)
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_flash_cache_attention_matches_sdpa_and_transformers(model):
    path, hf = model
    gen = torch.Generator().manual_seed(1)
    # A short prompt, and two whose chunked prefill continues from cached keys (128 per step).
    prompts = [torch.randint(3, 512, (n,), generator=gen).tolist() for n in (5, 300, 1200)]
    flash = generate(path, prompts, "flash")
    sdpa = generate(path, prompts, "sdpa")
    assert len(flash) == len(sdpa) == 3
    for prompt, f, s in zip(prompts, flash, sdpa):
        same = 0
        while same < len(f["tokens"]) and f["tokens"][same] == s["tokens"][same]:
            same += 1
        assert same >= 8, (len(prompt), f["tokens"], s["tokens"])
        for a, b in zip(f["logprobs"][:same], s["logprobs"][:same]):
            assert abs(a - b) < 0.05
        seq = torch.tensor([prompt + f["tokens"]])
        with torch.no_grad():
            logits = hf(seq).logits[0, len(prompt) - 1:-1]
        want = torch.log_softmax(logits, -1).gather(1, torch.tensor(f["tokens"])[:, None])[:, 0]
        assert (torch.tensor(f["logprobs"]) - want).abs().max().item() < 0.1, len(prompt)


def test_flash_in_float32_is_a_clear_error(model):
    path, _ = model
    proc = run_tool("generate", "--model", path, "--device", "cuda", "--dtype", "float32", "--cache-attention", "flash",
                    "--prompts", "1,2,3", check=False)
    assert proc.returncode == 1
    assert "cache_attention 'flash' needs bfloat16 or float16" in proc.stderr
