"""Trusted comparisons, run in the worker's parent process (the submission never sees the
reference outputs these compare against)."""
from __future__ import annotations

import torch

# Rationale: a scale-aware second test beside allclose. atol alone lets a constant (e.g. all
# zeros) pass when the reference's outputs are small (softmax over wide rows is ~1e-4); the
# relative L2 error of such an output is ~1. 5% leaves room for reduced-precision accumulation
# that the elementwise tolerance accepts.
DEFAULT_REL_L2 = 0.05


# Rationale: the comparison widens to float64 and holds ~9 temporaries of a chunk's size; 16 Mi
# elements keep that near 1 GiB whatever the output's size (a 6 GiB KernelBench output compared
# whole held ~54 GiB of temporaries beside the job's tensors).
CHUNK_ELEMS = 1 << 24


def compare(ref: torch.Tensor, cand: torch.Tensor, atol: float, rtol: float,
            rel_l2_tol: float = DEFAULT_REL_L2) -> tuple[bool, str, dict]:
    """Compares one output; returns (ok, reason, stats). Done in chunks of CHUNK_ELEMS on
    the reference's device (a GPU compares a large output in milliseconds, a CPU in
    seconds); the verdict is that of comparing the whole tensors at once."""
    stats: dict = {}
    if tuple(cand.shape) != tuple(ref.shape):
        return False, f"shape {list(cand.shape)} != expected {list(ref.shape)}", stats
    if cand.dtype != ref.dtype:
        return False, f"dtype {cand.dtype} != expected {ref.dtype}", stats
    cf = cand.detach().reshape(-1)
    rf = ref.detach().reshape(-1)
    n = rf.numel()
    nan_at = ref_nan = over_at = None
    n_over, max_err, err_sq, ref_sq = 0, 0.0, 0.0, 0.0
    for lo in range(0, n, CHUNK_ELEMS):
        c = cf[lo:lo + CHUNK_ELEMS].to(ref.device).to(torch.float64)  # moved first, widened there
        r = rf[lo:lo + CHUNK_ELEMS].to(torch.float64)
        bad_c, bad_r = ~torch.isfinite(c), ~torch.isfinite(r)
        if nan_at is None and bool((bad_c & ~bad_r).any()):
            nan_at = lo + int((bad_c & ~bad_r).nonzero()[0])
        if not ref_nan and bool((bad_r & ~bad_c).any()):
            ref_nan = True
        fin = ~bad_r
        diff = (c - r).abs().where(fin, torch.zeros_like(c))
        allowed = atol + rtol * r.abs().where(fin, torch.zeros_like(r))
        if diff.numel():
            max_err = max(max_err, float(diff.max()))
        ref_sq += float(r.where(fin, torch.zeros_like(r)).square().sum())
        err_sq += float(diff.square().sum())
        over = diff > allowed
        k = int(over.sum())
        if k and over_at is None:
            over_at = lo + int(over.nonzero()[0])
        n_over += k
    stats["allclose"] = nan_at is None and not ref_nan and n_over == 0  # KernelBench's own test
    if nan_at is not None:
        return False, f"NaN/Inf at index {_unravel(nan_at, ref.shape)} where the reference is finite", stats
    if ref_nan:
        return False, "finite values where the reference has NaN/Inf", stats
    stats["max_abs_err"] = max_err
    ref_norm, err_norm = ref_sq ** 0.5, err_sq ** 0.5
    stats["rel_l2_err"] = err_norm / ref_norm if ref_norm > 0 else (0.0 if err_norm == 0 else float("inf"))
    if n_over:
        idx = _unravel(over_at, ref.shape)
        return False, (f"mismatch: {n_over} of {n} elements outside "
                       f"atol={atol} rtol={rtol}; max abs err {stats['max_abs_err']:.3g}; first at "
                       f"index {idx}: got {float(cf[over_at]):.6g}, expected {float(rf[over_at]):.6g}"), stats
    if ref_norm > 0 and stats["rel_l2_err"] > rel_l2_tol:
        return False, (f"mismatch: relative L2 error {stats['rel_l2_err']:.3g} > {rel_l2_tol} "
                       "(outputs are within atol but not the reference's values)"), stats
    return True, "", stats


# Rationale: a task whose output barely depends on its input (task_check: deep random
# networks, sums of millions of terms, losses) is judged on how its outputs *change* between
# two seeded inputs, since there a constant passes the elementwise test. The change is
# compared like an output: 5% relative L2, the same room the scale-aware test above leaves
# for reordered fp32 arithmetic. A constant or input-independent answer has error 1.
VARIATION_REL_L2 = 0.05


def variation_error(ref_a: torch.Tensor, ref_b: torch.Tensor, cand_a: torch.Tensor,
                    cand_b: torch.Tensor) -> tuple[float, float]:
    """(relative L2 error of the candidate's change between two inputs against the
    reference's change, the reference change's norm): ||(cand_b - cand_a) - (ref_b - ref_a)||
    / ||ref_b - ref_a||, in float64 chunks of CHUNK_ELEMS on the reference's device. inf
    when the reference does not change at all but the candidate does; NaN in the candidate
    where the reference is finite gives inf. Shapes and dtypes must already match."""
    ra, rb = ref_a.detach().reshape(-1), ref_b.detach().reshape(-1)
    ca, cb = cand_a.detach().reshape(-1), cand_b.detach().reshape(-1)
    err_sq, var_sq = 0.0, 0.0
    for lo in range(0, ra.numel(), CHUNK_ELEMS):
        sl = slice(lo, lo + CHUNK_ELEMS)
        d_ref = rb[sl].to(torch.float64) - ra[sl].to(torch.float64)
        d_cand = cb[sl].to(ra.device).to(torch.float64) - ca[sl].to(ra.device).to(torch.float64)
        fin = torch.isfinite(d_ref)
        if bool((fin & ~torch.isfinite(d_cand)).any()):
            return float("inf"), float(var_sq ** 0.5)
        err_sq += float((d_cand - d_ref).where(fin, torch.zeros_like(d_ref)).square().sum())
        var_sq += float(d_ref.where(fin, torch.zeros_like(d_ref)).square().sum())
    err, var = err_sq ** 0.5, var_sq ** 0.5
    if var == 0:
        return (0.0 if err == 0 else float("inf")), 0.0
    return err / var, var


def _unravel(flat: int, shape) -> tuple:
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(shape))) \
        if len(shape) else ()


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
