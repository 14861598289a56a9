"""Trusted comparisons, run in the worker's parent process (the submission never sees the
reference outputs these compare against)."""
from __future__ import annotations

import torch

# Rationale: a scale-aware second test beside allclose. atol alone lets a constant (e.g. all
# zeros) pass when the reference's outputs are small (softmax over wide rows is ~1e-4); the
# relative L2 error of such an output is ~1. 5% leaves room for reduced-precision accumulation
# that the elementwise tolerance accepts.
DEFAULT_REL_L2 = 0.05


def compare(ref: torch.Tensor, cand: torch.Tensor, atol: float, rtol: float,
            rel_l2_tol: float = DEFAULT_REL_L2) -> tuple[bool, str, dict]:
    """Compares one output; returns (ok, reason, stats)."""
    stats: dict = {}
    if tuple(cand.shape) != tuple(ref.shape):
        return False, f"shape {list(cand.shape)} != expected {list(ref.shape)}", stats
    if cand.dtype != ref.dtype:
        return False, f"dtype {cand.dtype} != expected {ref.dtype}", stats
    # On the reference's device: a GPU compares a large output in milliseconds, a CPU in seconds.
    c = cand.detach().to(ref.device).to(torch.float64)  # moved first, widened there
    r = ref.detach().to(torch.float64)
    bad_c = ~torch.isfinite(c)
    bad_r = ~torch.isfinite(r)
    if bool((bad_c & ~bad_r).any()):
        idx = _first_index(bad_c & ~bad_r)
        return False, f"NaN/Inf at index {idx} where the reference is finite", stats
    if bool((bad_r & ~bad_c).any()):
        return False, "finite values where the reference has NaN/Inf", stats
    fin = ~bad_r
    diff = (c - r).abs().where(fin, torch.zeros_like(c))
    allowed = atol + rtol * r.abs().where(fin, torch.zeros_like(r))
    stats["max_abs_err"] = float(diff.max()) if diff.numel() else 0.0
    ref_norm = float(r.where(fin, torch.zeros_like(r)).norm())
    err_norm = float(diff.norm())
    stats["rel_l2_err"] = err_norm / ref_norm if ref_norm > 0 else (0.0 if err_norm == 0 else float("inf"))
    over = diff > allowed
    if bool(over.any()):
        idx = _first_index(over)
        return False, (f"mismatch: {int(over.sum())} of {over.numel()} elements outside "
                       f"atol={atol} rtol={rtol}; max abs err {stats['max_abs_err']:.3g}; first at "
                       f"index {idx}: got {float(c[idx]):.6g}, expected {float(r[idx]):.6g}"), stats
    if ref_norm > 0 and stats["rel_l2_err"] > rel_l2_tol:
        return False, (f"mismatch: relative L2 error {stats['rel_l2_err']:.3g} > {rel_l2_tol} "
                       "(outputs are within atol but not the reference's values)"), stats
    return True, "", stats


def _first_index(mask: torch.Tensor):
    flat = int(mask.reshape(-1).nonzero()[0])
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), mask.shape)) \
        if mask.dim() else ()


def inputs_unchanged(before: list, after: list) -> str | None:
    """None when every tensor input is bit-identical after the call, else a reason."""
    if len(after) != len(before):
        return f"{len(after)} inputs came back after the call, {len(before)} were sent"
    for i, (b, a) in enumerate(zip(before, after)):
        if isinstance(b, torch.Tensor):
            if not isinstance(a, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
                return f"input {i} changed shape or type during the call"
            a = a.to(b.device)  # compared where the judge's copy is (a GPU: milliseconds)
            if not torch.equal(a, b) and not _equal_nan(a, b):
                return f"input {i} was modified in place during the call (inputs must be read-only)"
    return None


def _equal_nan(a, b) -> bool:
    return a.is_floating_point() and bool(torch.isclose(a, b, rtol=0, atol=0, equal_nan=True).all())


def describe_inputs(inputs: list) -> str:
    """Short text naming the input shapes, for reasons."""
    parts = []
    for i, v in enumerate(inputs):
        if isinstance(v, torch.Tensor):
            parts.append(f"in{i}:{str(v.dtype).removeprefix('torch.')}{list(v.shape)}")
        else:
            parts.append(f"in{i}={v!r}")
    return ", ".join(parts)
