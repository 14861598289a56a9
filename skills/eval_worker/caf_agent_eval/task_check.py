"""Task validation at load: a task the judge cannot judge soundly is refused with the reason,
never judged (the verdict carries `task_error`; the pool does not count it as the slot's
failure). Verdicts are cached per task hash and tolerance by the worker.

Three checks, cheapest first:
1. size: the memory a job of this task needs (inputs, outputs and parameters from a forward
   on meta tensors, times the copies the judge holds) against the slot's limit;
2. the reference runs: a reference that raises (KernelBench's level1/100_HingeLoss has
   mismatched shapes) is the task's error, named, not an infrastructure error;
3. the outputs depend on the inputs: for two seeded inputs, neither output may pass the
   judge's own comparison as the other's answer, and no output may pass as a constant;
   otherwise a submission that writes a constant would be judged correct. Such a task is
   tried with its parameters scaled (PARAM_SCALES) and judged at the first factor where its
   outputs depend on the input; if none, it is judged *degenerate*, with the variation
   check (job.py) beside the elementwise one; refused only when its outputs do not change
   beyond float rounding.
"""
from __future__ import annotations

import os
import traceback

import torch

from .task import Task, as_outputs, derive_seed


class TaskError(Exception):
    """The task cannot be judged (the reason names what is wrong with it)."""


# Rationale: copies of each tensor the judge holds at once in a job (parent and child
# together; job.py, child.py, measure.py, baseline.py), counted from the code, not guessed:
# verify, parent: one check's input and its reference output (twice while the forward's
# result is cloned) -- the checks are drawn one at a time --, and the child's output and
# input as received; child: its input, its output and the snapshot, and the earlier checks'
# outputs it keeps alive (4; the buffer-reuse check). On a CPU the frame's arena holds the
# child's output and input once more (on a GPU that copy is host memory, not the slot's).
# profile, regular path: the verify's copies (the child's kept check outputs stay alive
# through timing) plus the timing's, added up: the warm-up sets (3) and one round of fresh
# sets on both sides, the round's outputs and the previous round's (kept alive for the
# buffer check), a sampled call's reference while it is cloned (2) and the two fetched
# outputs. `calls` is the round's length (measure.calls_per_round: fewer for large inputs).
# profile, low-memory path (low=True, measure.low_memory: a large set and output): the
# phases run one after another, each freeing its tensors before the next, so the largest:
# task validation (check_reference: two inputs, two seeded outputs and a constant: 2, 3); the
# baselines (baseline.measure in the parent, beside check 0's input and output: 2, 2); the
# verify's checks (above: 3, 9); timing (the child's 5 kept check outputs, its one set and
# one call's output; the parent's copy of that set, the sampled call's reference, not
# cloned, and the fetched output: 2, 8; the set checked after the last round, the child's,
# the parent's and the one received: 3, 5; on a CPU the fetched output and that set are the
# arena). The verify's counts are the largest: such a profile job needs what its verify does.
# baseline (a baseline job: baseline.measure alone in the worker, after task validation):
# validation's 2 inputs and 3 outputs, or the warm-up sets (3; 1 on the low path) and a
# round's sets (calls), one call's outputs at a time (time_calls, keep=False).
def input_copies(mode: str, calls: int, cuda: bool = True, low: bool = False) -> int:
    n = 3 + (0 if cuda else 1)
    if mode == "verify":
        return n
    if mode == "baseline":  # validation holds two inputs (check_reference)
        return 2 if low else max(3, calls)
    return n if low else n + 2 * (3 + calls)


def output_copies(mode: str, calls: int, cuda: bool = True, low: bool = False) -> int:
    n = 9 + (0 if cuda else 1)
    if mode == "verify":
        return n
    if mode == "baseline":
        return 3
    return n if low else n + 2 * calls + 4


PARAM_COPIES = 3  # the parent's reference, the state_dict sent, the child's ModelNew


def param_copies(mode: str) -> int:
    """PARAM_COPIES; a baseline job holds one model at a time (validation's, then its own)."""
    return 1 if mode == "baseline" else PARAM_COPIES


# Rationale: part of the estimates' cache key (cached_estimates) beside the copy counts:
# bump it when what an estimate counts changes in a way those numbers do not show (2: the
# low-memory path, a profile job's need at least its verify's, the baseline mode; 3: a
# baseline job's validation holds two inputs, and the GPU margin applies to it).
ESTIMATE_VERSION = 3
# Rationale: beside the tensors, each of the two processes holds a CUDA context, the L2
# flush buffer (128 MiB) and allocator slack; the comparison's float64 temporaries are ~9
# chunks (verify.CHUNK_ELEMS) of 8 bytes an element.
FIXED_BYTES = 1 << 30
COMPARE_TEMPS = 9 * 8


def footprint(task: Task) -> dict | None:
    """Bytes of one input set, one call's outputs and the parameters, from a forward on meta
    tensors (nothing allocated); None when the task cannot run on meta (data-dependent
    shapes, non-tensor tricks): then the size check is skipped."""
    try:
        with torch.device("meta"):
            init = task.init_inputs(0)
            model = task.module.Model(*init)
            torch.manual_seed(0)
            inputs = list(task.module.get_inputs())
            with torch.no_grad():
                outs = as_outputs(model(*inputs))
    except Exception:
        return None
    nbytes = lambda ts: sum(t.numel() * t.element_size() for t in ts if isinstance(t, torch.Tensor))  # noqa: E731
    return {"inputs": nbytes(inputs), "outputs": nbytes(outs),
            "params": nbytes(list(model.parameters()) + list(model.buffers())),
            "max_output_elems": max([t.numel() for t in outs if isinstance(t, torch.Tensor)] or [0])}


def _timing(t: dict | None) -> dict:
    from . import options
    return t if t is not None else options.DEFAULTS["timing"]


def low_memory(fp: dict, mode: str, t: dict | None = None) -> bool:
    """Whether a `mode` job of a task with footprint fp times on the low-memory path
    (measure.low_memory, with the timing options t; None: the defaults)."""
    from .measure import low_memory as on_low_path
    return mode != "verify" and on_low_path(_timing(t), fp["inputs"], fp["outputs"])


def round_calls(fp: dict, t: dict | None = None, mode: str = "profile") -> int:
    """Calls per timed round of a `mode` job (measure.calls_per_round; 1 on the low path)."""
    from .measure import calls_per_round
    return 1 if low_memory(fp, mode, t) else calls_per_round(_timing(t), fp["inputs"])


# Rationale: what a job's processes hold on a GPU beyond the copies counted above: the
# caching allocator's reserved-but-free blocks (check 2 draws half a batch, so blocks of two
# sizes split and are cached in both processes), the contexts of the worker, the child and
# the spare. Measured: the honest relu verify of level1/19_ReLU (6 GiB in, 6 GiB out, all
# five checks) peaked at 93.2 GiB for the worker's processes against 74.1 GiB counted (+26%;
# nvidia-smi per process, H200, 2026-12-01, bench/results/2026-12-01-judge-h200-4.md), so
# 1.3 for a verify on a GPU. Not measured for a profile job's timing or on a CPU slot (1.0
# there); a profile job needs at least its verify's need, margin included (needed_bytes).
GPU_MARGIN = 1.3
# Rationale: the honest relu's *final* job on the same task (verify, then timing on the
# low-memory path) peaked at 102,062 MiB against 74.1 GiB counted (1.345x; H200, 2026-12-03,
# bench/results/2026-12-03-kernelbench-h200.md): a profile on a GPU needs a little more.
PROFILE_GPU_MARGIN = 1.4


def copies(fp: dict, mode: str, cuda: bool = True, t: dict | None = None) -> tuple[int, int, int]:
    """(input, output, parameter) copies a `mode` job of the task holds at once, on the path
    its timing takes (low_memory, round_calls)."""
    low, calls = low_memory(fp, mode, t), round_calls(fp, t, mode)
    return (input_copies(mode, calls, cuda, low), output_copies(mode, calls, cuda, low),
            param_copies(mode))


def counted_bytes(fp: dict, mode: str, cuda: bool = True, t: dict | None = None) -> int:
    """The bytes of the copies the code holds (copies: input_copies, output_copies,
    param_copies), the comparison's temporaries and FIXED_BYTES."""
    from .verify import CHUNK_ELEMS
    n_in, n_out, n_par = copies(fp, mode, cuda, t)
    temps = COMPARE_TEMPS * min(int(fp.get("max_output_elems", CHUNK_ELEMS)), CHUNK_ELEMS)
    return fp["inputs"] * n_in + fp["outputs"] * n_out + fp["params"] * n_par + temps + FIXED_BYTES


def needed_bytes(fp: dict, mode: str, cuda: bool = True, t: dict | None = None) -> int:
    """counted_bytes, times GPU_MARGIN for a verify or baseline on a GPU: what the slot must have. A
    profile job's checks are a verify's, so it needs at least what its verify needs (on the
    low-memory path exactly that: its other phases hold less)."""
    # Rationale (baseline): 14 baseline jobs packed by the bare count ran out of memory on the
    # H200 (2026-12-03: level1's 6 GiB tasks held ~37 GiB in validation against 34 counted,
    # beside each other), so the verify's margin applies there too.
    need = int(counted_bytes(fp, mode, cuda, t) * (GPU_MARGIN if cuda and mode in ("verify", "baseline") else 1.0))
    if mode not in ("verify", "baseline"):
        need = max(need, needed_bytes(fp, "verify", cuda, t))
        if cuda:  # the timing phase's own allocator slack beside the checks' copies
            need = max(need, int(counted_bytes(fp, "verify", cuda, t) * PROFILE_GPU_MARGIN))
    return need


def estimate_gib(name: str, source: str, mode: str) -> float | None:
    """needed_bytes of a `mode` job of the task in `source`, in GiB (a forward on meta tensors);
    None when the task does not load or does not run on meta tensors."""
    import tempfile
    try:
        with tempfile.TemporaryDirectory(prefix="caf_est_") as d:
            fp = footprint(Task(name, source, d))
    except Exception:
        return None
    return None if fp is None else round(needed_bytes(fp, mode) / 2**30, 3)


def _estimate_job(arg):
    return estimate_gib(*arg)


def cached_estimates(items: list, mode: str, cache_path: str | None = None, procs: int = 1) -> list:
    """estimate_gib of each (name, source) in `items`, from a JSON cache where it has one. The
    key is the source's sha256 with the estimate's formula (this mode's copy counts, the fixed
    bytes, the margin), so a changed formula misses the cache; not the task's identity, since an
    AST dump differs between Python versions (a cache made on one machine missed on another).
    The estimate does not depend on the device. procs > 1: the missing ones in that many
    spawned processes."""
    import hashlib
    import json
    t = _timing(None)
    formula = (f"{mode}/v{ESTIMATE_VERSION}/{input_copies(mode, 1)}/{output_copies(mode, 1)}/"
               f"{input_copies(mode, 1, low=True)}/{output_copies(mode, 1, low=True)}/"
               f"{param_copies(mode)}/{FIXED_BYTES}/{GPU_MARGIN}/{PROFILE_GPU_MARGIN}/{t['round_set_bytes']}/{t['fresh_inputs']}")
    cache = {}
    if cache_path and os.path.exists(cache_path):
        with open(cache_path) as f:
            cache = json.load(f)
    keys = [hashlib.sha256(source.encode() + formula.encode()).hexdigest()[:24] for _, source in items]
    missing = [i for i, k in enumerate(keys) if k not in cache]
    if missing:
        jobs = [(items[i][0], items[i][1], mode) for i in missing]
        if procs > 1:
            import multiprocessing as mp
            with mp.get_context("spawn").Pool(procs) as pool:
                got = pool.map(_estimate_job, jobs)
        else:
            got = [_estimate_job(j) for j in jobs]
        for i, g in zip(missing, got):
            cache[keys[i]] = g
        if cache_path:
            with open(cache_path, "w") as f:
                json.dump(cache, f)
    return [cache[k] for k in keys]


def memory_limit(device: str) -> int | None:
    """The slot's memory: CAF_EVAL_MEMORY_LIMIT_BYTES, else the device's memory (CUDA), else
    the smaller of the cgroup's memory.max and the host's MemTotal (CPU); None: unknown."""
    env = os.environ.get("CAF_EVAL_MEMORY_LIMIT_BYTES", "").strip()
    if env:
        try:
            return int(float(env))
        except ValueError:
            raise ValueError(f"CAF_EVAL_MEMORY_LIMIT_BYTES={env!r} is not a number of bytes") from None
    if device.startswith("cuda"):
        return int(torch.cuda.get_device_properties(torch.device(device)).total_memory)
    limits = []
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            text = f.read().strip()
        if text.isdigit():
            limits.append(int(text))
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    limits.append(int(line.split()[1]) * 1024)
    except OSError:
        pass
    return min(limits) if limits else None


# Rationale: a degenerate task's jobs keep the anchor checks' reference and candidate
# outputs (job._variation: one anchor per batch size, two sizes) beside the copies counted.
ANCHOR_OUTPUTS = 4


def check_size(task: Task, mode: str, limit: int | None, cuda: bool = True,
               t: dict | None = None, extra_outputs: int = 0) -> None:
    """Raises TaskError when a job of this task in `mode` (timing options t; None: the
    defaults) needs more than `limit` bytes; extra_outputs: outputs held beside the counted
    copies (ANCHOR_OUTPUTS for a degenerate task)."""
    if not limit:
        return
    fp = footprint(task)
    if fp is None:
        return
    need = needed_bytes(fp, mode, cuda, t) + int(fp["outputs"] * extra_outputs
                                                 * (GPU_MARGIN if cuda else 1.0))
    if need > limit:
        gib = lambda b: f"{b / 2**30:.2f} GiB"  # noqa: E731
        n_in, n_out, n_par = copies(fp, mode, cuda, t)
        path = ", low-memory timing" if low_memory(fp, mode, t) else ""
        path += f", {extra_outputs} more outputs for the variation check" if extra_outputs else ""
        raise TaskError(
            f"task too large for this slot: a {mode} job needs about {gib(need)} (one input "
            f"set {gib(fp['inputs'])}, outputs {gib(fp['outputs'])}, parameters "
            f"{gib(fp['params'])}, held {n_in}/{n_out}/{n_par} times{path}) "
            f"and the slot has {gib(limit)}")


# Rationale: below this the change of a task's output between two seeded inputs (relative
# to the output) is within what float32 rounding alone moves an output (a few ulp, ~1e-7
# relative, summed over a deep network): such a task's output is, for the judge, the same
# for every input (KernelBench's level2/80, 2/83 and 3/28 are exactly so: a mean subtracted
# from itself, a min then a clamp to one value, attention across the batch over identical
# class tokens), so a constant is its answer and no kernel can be certified on it.
MIN_REL_VARIATION = 1e-5
# Rationale: a task whose output does not depend on its input at KernelBench's random
# initialisation is often one whose weights put every output in a flat region: a ReLU after
# subtracting more than the linear layer's spread (level2/9: all zeros), a GELU of a sum over
# 256 rows of channel minima (level2/36: exactly the bias), a deep network whose signal
# shrinks layer by layer (level3's VGGs, DenseNets). Scaling every floating parameter by one
# factor moves the outputs out of that region without changing the task's computation, so
# the judge tries these factors in order, on its own copy of the reference (the submission
# receives the scaled state_dict like any other), and keeps the first at which the outputs
# depend on the input within the tolerance and an accurate answer still passes (ACCURATE).
# 1 (KernelBench's own weights) comes first; ~2.5 is He initialisation's scale against
# PyTorch's default (sqrt(6)) for ReLU networks; large factors amplify rounding through deep
# networks (x4 on MobileNetV2: outputs whose float32 and float64 values differ by 11%).
PARAM_SCALES = (1.0, 2.0, 2.5, 0.5, 4.0, 0.25, 8.0, 1 / 8, 16.0, 1 / 16, 64.0, 1 / 64)
# Rationale: a factor is kept only if the task computed in float64 (an answer more accurate
# than any float32 kernel) passes the judge's comparison against its float32 reference at a
# quarter of the tolerance: room for an honest kernel's own rounding.
ACCURATE = 0.25


def check_reference(task: Task, device: str, atol: float, rtol: float, rel_l2: float) -> None:
    """Runs the reference on two seeded inputs; raises TaskError when it raises or returns no
    tensors. A task whose outputs do not depend on the input within the tolerance, or are
    constant within it (a submission writing a constant would pass the elementwise test), is
    tried with its parameters scaled (PARAM_SCALES); the first factor that makes it depend
    on the input, with an accurate answer still passing (ACCURATE), is kept
    (`task.param_scale`). If none does, the task is degenerate for this tolerance
    (`task.degenerate`) and judged with the variation check beside the elementwise one
    (job.py), at the factor where its outputs change most; if even there they do not change
    beyond float rounding (MIN_REL_VARIATION) it is a constant task (`task.constant`): judged,
    never correct (job.py)."""
    key = (float(atol), float(rtol), float(rel_l2))
    try:
        init = task.init_inputs(derive_seed("task-check", task.key, "init", 0))
        model = task.make_model(init, derive_seed("task-check", task.key, "weights", 0), device)
        xs = [task.inputs(derive_seed("task-check", task.key, "input", k), device) for k in range(2)]
        _check_half_batch(task, model, device)
        params = [p for p in model.parameters() if p.is_floating_point()]
        first_reasons, best = None, (-1.0, 1.0, 0)  # (variation, scale, output index)
        loose = None  # the first factor where only the full tolerance passes an accurate answer
        current = 1.0
        for scale in PARAM_SCALES if params else (1.0,):
            with torch.no_grad():
                for p in params:
                    p.mul_(scale / current)
                current = scale
                outs = [list(as_outputs(model(*x))) for x in xs]
            if scale != 1.0 and not _finite(outs):  # overflowed: no judge of anything
                continue
            reasons, variation, at = _degeneracy(outs, atol, rtol, rel_l2)
            if first_reasons is None:
                first_reasons = reasons
            accuracy = 0.0 if reasons or scale == 1.0 else _accuracy(model, xs, outs, atol, rtol, rel_l2)
            if not reasons and (scale == 1.0 or accuracy == ACCURATE):
                task.degenerate[key] = None
                task.param_scale[key] = scale
                if scale != 1.0:  # what made it judgeable, for the verdict
                    task.degenerate_default[key] = "; ".join(first_reasons)
                return
            if not reasons and accuracy == 1.0 and loose is None:
                loose = scale
            if reasons and variation > best[0]:
                best = (variation, scale, at)
    except TaskError:
        raise
    except torch.OutOfMemoryError:  # the slot's memory (other jobs beside it), not the task's fault
        raise
    except Exception as e:
        last = traceback.format_exception_only(type(e), e)[-1].strip()
        raise TaskError(f"the task's reference raised: {last[:800]}") from None
    variation, scale, at = best
    if loose is not None:  # depends on the input there; an accurate answer passes with less room
        task.degenerate[key] = None
        task.param_scale[key] = loose
        task.degenerate_default[key] = "; ".join(first_reasons) + (
            f" (at x{loose:g} an accurate answer passes the full tolerance, not a quarter of it: "
            "no factor gave more room)")
        return
    task.param_scale[key] = scale
    task.degenerate[key] = "; ".join(first_reasons or ["no parameter scale gives an accurate answer"])
    task.degenerate_default[key] = task.degenerate[key]
    if variation < MIN_REL_VARIATION:
        factors = ", ".join(f"{s:g}" for s in PARAM_SCALES[1:]) if params else ""
        task.constant[key] = (
            f"the task's output {at} does not change with its input: the outputs for two seeded "
            f"inputs differ by {variation:.3g} of their size, within float rounding "
            f"(< {MIN_REL_VARIATION})" + (f", with its parameters as initialised and scaled by {factors}"
                                          if factors else ""))


def degenerate_as_initialised(task: Task, atol: float, rtol: float, rel_l2: float) -> str | None:
    """Why the task's output does not depend on its input at its own initialisation (after
    check_reference with this tolerance), None if it does: for whoever wants such tasks out
    (the data pipeline's filter) rather than judged."""
    key = (float(atol), float(rtol), float(rel_l2))
    why = task.degenerate_default.get(key) or task.degenerate.get(key) or task.constant.get(key)
    return f"the task's {why}" if why and not why.startswith("the task's") else why


def _check_half_batch(task: Task, model, device: str) -> None:
    """Sets task.half_batch False when the reference raises on check 2's half batch (the
    check's shape change is for the submission's sake, not a case the task defines); a
    reference that raises at its own batch is the task's error, reported by the caller."""
    half = task.check_batch(1)
    if half is None:
        return
    try:
        x = task.inputs(derive_seed("task-check", task.key, "half", 0), device, half)
        with torch.no_grad():
            model(*x)
    except Exception:
        task.half_batch = False


def _accuracy(model, xs: list, outs: list, atol: float, rtol: float, rel_l2: float) -> float | None:
    """The smaller of ACCURATE and 1 such that the model run in float64 on xs passes the
    comparison against its float32 outputs at that share of the tolerance, None if neither
    (the model is restored to float32). A model that does not run in float64 (e.g. a float32
    state kept outside its parameters) gets ACCURATE: there is nothing more accurate to
    compare with."""
    from .verify import compare
    worst = ACCURATE
    try:
        model.double()
        with torch.no_grad():
            for x, out in zip(xs, outs):
                x64 = [v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in x]
                for r, a in zip(out, as_outputs(model(*x64))):
                    if not (isinstance(r, torch.Tensor) and r.is_floating_point()):
                        continue
                    a = a.to(r.dtype)
                    if compare(r, a, ACCURATE * atol, ACCURATE * rtol, ACCURATE * rel_l2)[0]:
                        continue
                    if not compare(r, a, atol, rtol, rel_l2)[0]:
                        return None
                    worst = 1.0
    except Exception:
        return ACCURATE
    finally:
        model.float()
    return worst


def _finite(outs: list) -> bool:
    return all(bool(torch.isfinite(t).all()) for o in outs for t in o
               if isinstance(t, torch.Tensor) and t.is_floating_point())


def _degeneracy(outs: list, atol: float, rtol: float, rel_l2: float) -> tuple[list, float, int]:
    """(why each output is degenerate, the smallest relative variation of those outputs, its
    index) for the outputs of two inputs; no reasons: the task can be judged as it is."""
    from .verify import compare
    reasons, smallest, at = [], float("inf"), 0
    for i, (a, b) in enumerate(zip(*outs)):
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            raise TaskError(f"the task's reference output {i} is a {type(a).__name__}, not a tensor")
        why = ""
        if a.shape == b.shape and compare(a, b, atol, rtol, rel_l2)[0]:
            why = (f"output {i} does not depend on its input within atol={atol} rtol={rtol} (the "
                   "outputs for two seeded inputs pass as each other's answer)")
        elif a.numel() > 1 and a.is_floating_point():
            const = torch.full_like(a, float(a.float().mean()))
            if compare(a, const, atol, rtol, rel_l2)[0]:
                why = f"output {i} is constant within atol={atol} rtol={rtol} (its mean passes as the answer)"
        if why:
            reasons.append(why)
            rel = relative_variation(a, b) if a.shape == b.shape else float("inf")
            if rel < smallest:
                smallest, at = rel, i
    return reasons, smallest, at


def relative_variation(a: torch.Tensor, b: torch.Tensor) -> float:
    """||b - a|| / ||a|| in float64 over the finite entries (inf when a is all zeros and b
    is not)."""
    a64, b64 = a.detach().reshape(-1).to(torch.float64), b.detach().reshape(-1).to(torch.float64)
    fin = torch.isfinite(a64) & torch.isfinite(b64)
    diff = float((b64 - a64).where(fin, torch.zeros_like(a64)).norm())
    size = float(a64.where(fin, torch.zeros_like(a64)).norm())
    return diff / size if size > 0 else (0.0 if diff == 0 else float("inf"))
