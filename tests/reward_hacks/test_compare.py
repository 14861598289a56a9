"""The trusted comparison (verify.compare) in chunks: the same verdict, reason and statistics
as comparing the whole tensors, with temporaries bounded by the chunk, not the output."""
import pytest
import torch

from caf_agent_eval import verify


def _cases():
    torch.manual_seed(0)
    r = torch.randn(6, 7)
    near = r + 1e-4
    off = r.clone()
    off[4, 5] += 1.0
    off[5, 6] -= 2.0
    nan = r.clone()
    nan[3, 2] = float("nan")
    ref_nan = r.clone()
    ref_nan[1, 1] = float("inf")
    small = torch.full((6, 7), 1e-4)
    return [(r, near), (r, off), (r, nan), (ref_nan, r), (small, torch.zeros(6, 7)),
            (torch.tensor(2.0), torch.tensor(2.5)), (r, r[:, :6]), (torch.empty(0, 3), torch.empty(0, 3))]


@pytest.mark.parametrize("k", range(8))
def test_a_chunked_comparison_gives_the_whole_ones_verdict(monkeypatch, k):
    ref, cand = _cases()[k]
    whole = verify.compare(ref, cand, 1e-2, 1e-2)
    monkeypatch.setattr(verify, "CHUNK_ELEMS", 5)
    chunked = verify.compare(ref, cand, 1e-2, 1e-2)
    assert chunked[:2] == whole[:2]
    for key in whole[2]:
        assert chunked[2][key] == pytest.approx(whole[2][key], rel=1e-12, abs=1e-15)


def test_the_reasons_name_what_is_wrong():
    cases = _cases()
    assert verify.compare(*cases[0], 1e-2, 1e-2)[0]
    ok, why, _ = verify.compare(*cases[1], 1e-2, 1e-2)
    assert not ok and "2 of 42 elements" in why and "index (4, 5)" in why
    assert "NaN/Inf at index (3, 2)" in verify.compare(*cases[2], 1e-2, 1e-2)[1]
    assert "reference has NaN/Inf" in verify.compare(*cases[3], 1e-2, 1e-2)[1]
    assert "relative L2 error" in verify.compare(*cases[4], 1e-2, 1e-2)[1]
    assert "index ()" in verify.compare(*cases[5], 1e-2, 1e-2)[1]
    assert "shape" in verify.compare(*cases[6], 1e-2, 1e-2)[1]
    assert verify.compare(*cases[7], 1e-2, 1e-2)[0]
