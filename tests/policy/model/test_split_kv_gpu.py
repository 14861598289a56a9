"""Split-KV decode (engine_options::split_kv_decode, fused_ops.hpp's split_kv_decode) against the
flash kernel it replaces, on the GPU in bf16 with CUDA graphs and the fused kernels (marker gpu:
the device machine only).

Both read the same cache and keys; they differ in the order of the softmax's sums (and flash
rounds the probabilities to bf16 before multiplying the values), so greedy replies agree up to a
near tie, with logprobs equal to bf16 precision. Two shapes: the 5-episode conversation of
test_fused_kernels_gpu.py (a few hundred keys, 2-3 splits) and 2 episodes after a 3,000-token
first prompt (about 12 splits a row)."""
import json

import pytest

from test_fused_kernels_gpu import agree_to_near_ties, conversation
from test_policy_model import run_tool, sharp_qwen2

pytestmark = pytest.mark.gpu


def long_conversation(path, split):
    proc = run_tool("agent-bench", "--model", path, "--device", "cuda", "--dtype", "bfloat16", "--cache-attention",
                    "flash", "--vocab", 512, "--episodes", 2, "--turns", 2, "--system", 3000, "--obs", 60, "--reply",
                    48, "--temperature", 0, "--print", "--max-batch", 2, "--max-context", 4096, "--prefill-chunk", 512,
                    *(["--split-kv"] if split else []))
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return {(r["episode"], r["turn"]): r for r in lines if "episode" in r}, next(r for r in lines if "generated" in r)


def test_split_kv_decode_agrees_with_flash_over_a_conversation(cuda, tmp_path):
    sharp_qwen2(tmp_path)
    on, on_summary = conversation(tmp_path, fused=True, extra=("--split-kv",))
    off, off_summary = conversation(tmp_path, fused=True)
    assert on_summary["split_kv_launches"] > 0 and off_summary["split_kv_launches"] == 0
    assert on_summary["graph_captures"] > 0 and len(on) == len(off) == 5 * 4
    compared, generated = agree_to_near_ties(on, off)
    assert compared >= generated // 4, (compared, generated)


def test_split_kv_decode_agrees_with_flash_after_a_long_prompt(cuda, tmp_path):
    sharp_qwen2(tmp_path)
    on, on_summary = long_conversation(tmp_path, split=True)
    off, _ = long_conversation(tmp_path, split=False)
    assert on_summary["split_kv_launches"] > 0 and len(on) == len(off) == 2 * 2
    compared, generated = agree_to_near_ties(on, off)
    assert compared >= generated // 4, (compared, generated)
