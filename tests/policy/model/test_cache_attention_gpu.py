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


def generate(path, prompts, mode, max_batch=3, prefill_chunk=128, max_context=2048, shares=0, block=0,
             cache_tokens=0):
    """`block` > 0: the paged layout in blocks of that many tokens (a pool of `cache_tokens`, 0: the default)."""
    paged = ["--kv-layout", "paged", "--kv-block-size", block, "--kv-cache-tokens", cache_tokens] if block else []
    proc = run_tool("generate", "--model", path, "--device", "cuda", "--dtype", "bfloat16", "--cache-attention", mode,
                    "--prompts", ";".join(ids(p) for p in prompts), "--max-new-tokens", 24, "--temperature", 0,
                    "--max-batch", max_batch, "--max-context", max_context, "--prefill-chunk", prefill_chunk,
                    "--flash-decode-shares", shares, *paged)
    return [json.loads(line) for line in proc.stdout.splitlines()]


def agree_with_sdpa_and_transformers(hf, prompts, flash, sdpa, min_same=8, close=0.05):
    """Greedy replies of flash and sdpa agree token for token, with logprobs within `close`, for at
    least `min_same` tokens; where they part, they part on a near tie (flash's and sdpa's logprobs
    of their own tokens there within `close` of each other). flash's logprobs are fp32
    transformers' over the whole generated sequence to bf16 precision (within 0.1)."""
    assert len(flash) == len(sdpa) == len(prompts)
    for prompt, f, s in zip(prompts, flash, sdpa):
        same = 0
        while same < len(f["tokens"]) and f["tokens"][same] == s["tokens"][same]:
            same += 1
        if same < len(f["tokens"]):
            assert abs(f["logprobs"][same] - s["logprobs"][same]) < close, (len(prompt), same, f, s)
        assert same >= min_same, (len(prompt), f["tokens"], s["tokens"])
        for a, b in zip(f["logprobs"][:same], s["logprobs"][:same]):
            assert abs(a - b) < close, (len(prompt), a, b)
        seq = torch.tensor([prompt + f["tokens"]])
        with torch.no_grad():
            logits = hf(seq).logits[0, len(prompt) - 1:-1]
        want = torch.log_softmax(logits, -1).gather(1, torch.tensor(f["tokens"])[:, None])[:, 0]
        assert (torch.tensor(f["logprobs"]) - want).abs().max().item() < 0.1, len(prompt)


def test_flash_cache_attention_matches_sdpa_and_transformers(model):
    path, hf = model
    gen = torch.Generator().manual_seed(1)
    # A short prompt, and two whose chunked prefill continues from cached keys (128 per step).
    prompts = [torch.randint(3, 512, (n,), generator=gen).tolist() for n in (5, 300, 1200)]
    agree_with_sdpa_and_transformers(hf, prompts, generate(path, prompts, "flash"), generate(path, prompts, "sdpa"))


@pytest.mark.parametrize("block,cache_tokens", [(256, 0), (48, 0), (48, 2000)])
def test_paged_flash_matches_slots_flash_and_transformers(model, block, cache_tokens):
    # The paged layout with flash: each run of consecutive blocks of a decode row is one flash
    # sequence per KV head, runs merged by log-sum-exp; a chunked prefill reads a part's
    # run of blocks in place, or gathers the cached keys of a part in several runs first (decoder.hpp cache_attention::flash). Blocks of 48 tokens: a block
    # straddles every 128-token prefill chunk. The default pool gives each row a run of its own;
    # one of 2,000 tokens (41 blocks, 13 a seat) leaves the 1,200-token row's 26 blocks in several
    # runs. CUDA graphs on (paged tables replayed). A row of several runs rounds each run's output
    # to bf16 before the merge, as flash's shares do: on the H200 the 300-token row's logprob was
    # 0.0575 from slot flash's (256-token blocks, each its own sequence then), so the pair agrees
    # to 0.1 (as the shares do); fp32 transformers decides (within 0.1; a wrong merge was 0.40 off).
    path, hf = model
    gen = torch.Generator().manual_seed(1)
    prompts = [torch.randint(3, 512, (n,), generator=gen).tolist() for n in (5, 300, 1200)]
    agree_with_sdpa_and_transformers(hf, prompts, generate(path, prompts, "flash", block=block,
                                                           cache_tokens=cache_tokens),
                                     generate(path, prompts, "flash"), close=0.1)


def test_flash_prefill_of_many_parts_in_one_call_matches_transformers(model):
    # Twelve prompts admitted together: one flash call a layer prefills every part (fresh prompts,
    # prompts whose first chunk ended inside them, one-token parts), each over its own slot only.
    path, hf = model
    gen = torch.Generator().manual_seed(2)
    prompts = [torch.randint(3, 512, (n,), generator=gen).tolist() for n in (1, 2, 7, 64, 129, 250, 3, 400, 31, 17, 800, 90)]
    agree_with_sdpa_and_transformers(hf, prompts, generate(path, prompts, "flash", max_batch=12, prefill_chunk=300),
                                     generate(path, prompts, "sdpa", max_batch=12, prefill_chunk=300), min_same=0)
    # The same over the paged layout: one flash call a layer over every part's run of blocks.
    agree_with_sdpa_and_transformers(hf, prompts,
                                     generate(path, prompts, "flash", max_batch=12, prefill_chunk=300, block=64),
                                     generate(path, prompts, "sdpa", max_batch=12, prefill_chunk=300), min_same=0)


@pytest.mark.parametrize("lengths", [(9000,), (8300, 12000)])
def test_flash_decode_of_few_long_rows_cut_into_shares_matches_sdpa_and_transformers(tmp_path, lengths):
    # One or two rows of more than 8,192 keys (2 KV heads): with --flash-decode-shares 16 (128) flash
    # attends each (row, KV head) as 8 or 4 (64 or 32) shares of its keys, merged by log-sum-exp
    # (decoder::decode, merge_shares); without it, as one sequence each. Both agree with sdpa and
    # transformers. Over 8-12k random keys this small model's next token is often a near tie:
    # plain flash and sdpa parted at the first or second token on the H200 (logprobs within 0.05
    # there) and the shares' logprobs were 0.059 from sdpa's where plain flash's were within 0.05
    # (bench/results/2026-12-04-policy-h200-shares-gemv.md), so no common prefix is asked for and
    # the pairs agree to 0.1; what decides is each reply against fp32 transformers over its own
    # tokens (within 0.1; shares merged with a wrong log-sum-exp were 0.40 off).
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    hf = sharp_qwen2(tmp_path, max_positions=16384)
    gen = torch.Generator().manual_seed(3)
    prompts = [torch.randint(3, 512, (n,), generator=gen).tolist() for n in lengths]
    def run(mode, shares=0, block=0):
        return generate(tmp_path, prompts, mode, max_batch=len(lengths), prefill_chunk=2048, max_context=16384,
                        shares=shares, block=block)
    sdpa, flash = run("sdpa"), run("flash")
    agree_with_sdpa_and_transformers(hf, prompts, flash, sdpa, min_same=0, close=0.1)
    for shares in (16, 128):
        agree_with_sdpa_and_transformers(hf, prompts, run("flash", shares=shares), flash, min_same=0, close=0.1)
    # The paged layout: 36-47 blocks of 256 a row, each a flash sequence, merged.
    agree_with_sdpa_and_transformers(hf, prompts, run("flash", block=256), flash, min_same=0, close=0.1)


def test_flash_in_float32_is_a_clear_error(model):
    path, _ = model
    proc = run_tool("generate", "--model", path, "--device", "cuda", "--dtype", "float32", "--cache-attention", "flash",
                    "--prompts", "1,2,3", check=False)
    assert proc.returncode == 1
    assert "cache_attention 'flash' needs bfloat16 or float16" in proc.stderr
