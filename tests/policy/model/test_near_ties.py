"""The rule that compares two correct half-precision runs (near_ties.py), on the CPU: two attention
modes (sdpa and matmul) over one conversation agree to it over a bf16 and an e4m3 cache, and the
e4m3 cache against the bf16 one, a change of numerics, fails it. The GPU tests compare the fused
kernels with their composites by the same rule."""
import math

import pytest

from near_ties import MAX_SPACINGS, MEAN_SPACINGS, agree_to_near_ties, compare, conversation, first_difference, spacing
from test_policy_model import sharp_qwen2


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The conversation over each (cache dtype, attention mode), bf16 on the CPU."""
    path = tmp_path_factory.mktemp("sharp_qwen2")
    sharp_qwen2(path)
    out = {}
    for cache in ["auto", "fp8_e4m3"]:
        for mode in ["sdpa", "matmul"]:
            out[cache, mode], _ = conversation(path, mode=mode, device="cpu", extra=["--kv-cache-dtype", cache])
    return out


@pytest.mark.parametrize("cache", ["auto", "fp8_e4m3"])
def test_two_attention_modes_agree_to_near_ties(runs, cache):
    compared, generated = agree_to_near_ties(runs[cache, "matmul"], runs[cache, "sdpa"])
    assert generated == 5 * 4 * 40
    assert compared >= 40, (compared, generated)  # enough tokens for a mean (here 206 and 108 of 800)


def test_the_e4m3_cache_against_the_bf16_cache_fails_the_rule(runs):
    c = compare(runs["fp8_e4m3", "sdpa"], runs["auto", "sdpa"])
    print(c.line())
    assert c.compared > 0
    assert c.largest_spacings > MAX_SPACINGS and c.mean_spacings > MEAN_SPACINGS, c.line()
    with pytest.raises(AssertionError):
        agree_to_near_ties(runs["fp8_e4m3", "sdpa"], runs["auto", "sdpa"])


def test_spacing_is_the_dtypes_unit_at_the_logit():
    assert spacing(4.0) == spacing(7.99) == spacing(-5.0) == 2.0 ** -5
    assert spacing(3.99) == 2.0 ** -6
    assert spacing(1.0, "float16") == 2.0 ** -10
    assert spacing(0.0) > 0


def reply(tokens, logprobs, logits):
    return {"tokens": tokens, "logprobs": logprobs, "logits": logits}


def test_compare_weighs_agreeing_tokens_and_the_pick_where_replies_part():
    # Episode 0 agrees on 2 tokens and parts at the third; its second turn is not compared.
    # Episode 1 agrees throughout.
    off = {(0, 0): reply([1, 2, 3], [-1.0, -2.0, -3.0], [4.0, 4.0, 4.0]),
           (0, 1): reply([9], [-1.0], [4.0]),
           (1, 0): reply([5, 6], [-0.5, -0.5], [2.0, 2.0])}
    on = {(0, 0): reply([1, 2, 4], [-1.0 + 2 ** -5, -2.0, -3.0 + 3 * 2 ** -5], [4.0, 4.0, 4.0]),
          (0, 1): reply([8], [-9.0], [4.0]),
          (1, 0): reply([5, 6], [-0.5, -0.5 - 2 ** -6], [2.0, 2.0])}
    c = compare(on, off)
    assert c.compared == 4 and c.generated == 6
    assert c.spacings == [1.0, 0.0, 0.0, 1.0]
    assert c.largest_spacings == 1.0 and c.mean_spacings == 0.5
    assert c.partings == [(0, 0, 2, 3.0)]
    assert agree_to_near_ties(on, off) == (4, 6)
    # A parting whose picks are 5 spacings apart is no near tie.
    on[0, 0]["logprobs"][2] = -3.0 + 5 * 2 ** -5
    with pytest.raises(AssertionError, match="not a near tie"):
        agree_to_near_ties(on, off)
    # A reply that ends where the other goes on has no pick to weigh.
    on[0, 0] = reply([1, 2], [-1.0, -2.0], [4.0, 4.0])
    assert compare(on, off).partings == [(0, 0, 2, math.inf)]


def test_replies_without_logits_are_an_error():
    r = {"tokens": [1], "logprobs": [-1.0]}
    with pytest.raises(ValueError, match="--report-logits"):
        compare({(0, 0): r}, {(0, 0): r})


def test_first_difference_names_the_reply_field_and_token():
    base = {(0, 1): {"tokens": [5, 6, 7], "logprobs": [-0.5, -1.0, -2.0], "logits": [3.0, 2.0, 1.0]},
            (1, 1): {"tokens": [8, 9], "logprobs": [-0.25, -0.75], "logits": [4.0, 1.5]}}
    same = {k: dict(v) for k, v in base.items()}
    assert first_difference(base, same) is None
    moved = {k: dict(v) for k, v in base.items()}
    moved[1, 1] = dict(moved[1, 1], logprobs=[-0.25, -0.7500001])
    assert first_difference(base, moved) == (
        "1 of 2 replies differ ((1, 1)): reply (1, 1): logprobs[1] -0.75 against -0.7500001 (tokens equal before it: "
        "True)")
    parted = {k: dict(v) for k, v in base.items()}
    parted[0, 1] = dict(parted[0, 1], tokens=[5, 4, 7])
    assert first_difference(base, parted) == (
        "1 of 2 replies differ ((0, 1)): reply (0, 1): tokens[1] 6 against 4 (tokens equal before it: True)")
    # The earliest token index of any field: a logprob that moved before the token that parted.
    both = {k: dict(v) for k, v in parted.items()}
    both[0, 1] = dict(both[0, 1], logprobs=[-0.5000001, -1.0, -2.0])
    both[1, 1] = dict(both[1, 1], tokens=[8, 3])
    assert first_difference(base, both) == (
        "2 of 2 replies differ ((0, 1), (1, 1)): reply (0, 1): logprobs[0] -0.5 against -0.5000001 (tokens equal "
        "before it: True)")
    shorter = {k: dict(v) for k, v in base.items()}
    shorter[1, 1] = dict(shorter[1, 1], tokens=[8])
    assert first_difference(base, shorter) == "1 of 2 replies differ ((1, 1)): reply (1, 1): tokens of 2 against 1"
    assert first_difference(base, {(0, 1): base[0, 1]}) == (
        "1 of 2 replies differ ((1, 1)): reply (1, 1) is in only one run")
