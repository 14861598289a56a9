"""bench/policy/bench_prefill_attention.py (CPU): the pass's lengths, the pairs its FLOPs count, and
the float32 reference it judges the backends by (bottom-right causal, GQA); the timing itself runs
on the GPU."""
import pathlib
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench/policy"))
import bench_prefill_attention as bench  # noqa: E402


def test_the_pass_spans_the_runs_turns():
    qs, ks = bench.lengths(31, 518)
    assert qs == [518] * 31
    assert ks[0] == 1000 + 518 and ks[-1] == 1000 + 800 * 29 + 518
    assert ks == sorted(ks)


def test_pairs_count_what_a_bottom_right_mask_lets_through():
    qs, ks = [3, 5, 1], [7, 5, 4]
    brute = 0
    for q, k in zip(qs, ks):
        brute += int((torch.arange(k)[None, :] <= torch.arange(q)[:, None] + k - q).sum())
    assert bench.pairs(qs, ks) == brute


def test_the_reference_is_attention_with_the_newest_query_seeing_every_key():
    torch.manual_seed(0)
    qs, ks = [2, 3], [4, 3]
    q = torch.randn(5, 4, 8)
    k = torch.randn(7, 2, 8)
    v = torch.randn(7, 2, 8)
    out = bench.reference(q, k, v, qs, ks, [0, 1], 0.5)
    # Part 0's last query (row 1) sees all 4 keys; its first (row 0) the first 3. Query head 3
    # reads KV head 1 (GQA: heads 2 and 3 share it).
    for row, seen in ((1, 4), (0, 3)):
        s = (q[row, 3] @ k[:seen, 1].T) * 0.5
        expect = s.softmax(-1) @ v[:seen, 1]
        assert torch.allclose(out[0][row, 3], expect, atol=1e-6)
    # Part 1 has no cached keys: plain causal, its first query sees only itself.
    assert torch.allclose(out[1][0, 0], v[4, 0], atol=1e-6)
