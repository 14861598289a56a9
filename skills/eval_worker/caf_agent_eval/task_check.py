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
   otherwise a submission that writes a constant would be judged correct.
"""
from __future__ import annotations

import os
import traceback

import torch

from .task import Task, as_outputs, derive_seed


class TaskError(Exception):
    """The task cannot be judged (the reason names what is wrong with it)."""


# Rationale: copies of each tensor the judge holds at once in a job (parent and child
# together; job.py, child.py, measure.py), counted from the code, not guessed:
# verify, parent: one check's input and its reference output (twice while the forward's
# result is cloned) -- the checks are drawn one at a time --, and the child's output and
# input as received; child: its input, its output and the snapshot, and the earlier checks'
# outputs it keeps alive (4; the buffer-reuse check). On a CPU the frame's arena holds the
# child's output and input once more (on a GPU that copy is host memory, not the slot's).
# profile adds the warm-up sets (3) and one round of fresh sets on both sides, the round's
# outputs and the previous round's (kept alive for the buffer check), the roofline's
# reference output, a sampled call's reference and the two fetched outputs.
# `calls` is the round's length (measure.calls_per_round: fewer calls for large inputs).
def input_copies(mode: str, calls: int, cuda: bool = True) -> int:
    n = 3 + (0 if cuda else 1)
    return n if mode == "verify" else n + 2 * (3 + calls)


def output_copies(mode: str, calls: int, cuda: bool = True) -> int:
    n = 9 + (0 if cuda else 1)
    return n if mode == "verify" else n + 2 * calls + 4


PARAM_COPIES = 3  # the parent's reference, the state_dict sent, the child's ModelNew
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


def round_calls(fp: dict) -> int:
    from . import options
    from .measure import calls_per_round
    return calls_per_round(options.DEFAULTS["timing"], fp["inputs"])


# Rationale: what a job's processes hold on a GPU beyond the copies counted above: the
# caching allocator's reserved-but-free blocks (check 2 draws half a batch, so blocks of two
# sizes split and are cached in both processes), the contexts of the worker, the child and
# the spare. Measured: the honest relu verify of level1/19_ReLU (6 GiB in, 6 GiB out, all
# five checks) peaked at 93.2 GiB for the worker's processes against 74.1 GiB counted (+26%;
# nvidia-smi per process, H200, 2026-12-01, bench/results/2026-12-01-judge-h200-4.md), so
# 1.3 for a verify on a GPU. Not measured for a profile job or on a CPU slot (1.0 there).
GPU_MARGIN = 1.3


def counted_bytes(fp: dict, mode: str, cuda: bool = True) -> int:
    """The bytes of the copies the code holds (input_copies, output_copies, PARAM_COPIES),
    the comparison's temporaries and FIXED_BYTES."""
    from .verify import CHUNK_ELEMS
    calls = round_calls(fp)
    temps = COMPARE_TEMPS * min(int(fp.get("max_output_elems", CHUNK_ELEMS)), CHUNK_ELEMS)
    return fp["inputs"] * input_copies(mode, calls, cuda) \
        + fp["outputs"] * output_copies(mode, calls, cuda) \
        + fp["params"] * PARAM_COPIES + temps + FIXED_BYTES


def needed_bytes(fp: dict, mode: str, cuda: bool = True) -> int:
    """counted_bytes, times GPU_MARGIN for a verify on a GPU: what the slot must have."""
    return int(counted_bytes(fp, mode, cuda) * (GPU_MARGIN if cuda and mode == "verify" else 1.0))


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
    formula = f"{mode}/{input_copies(mode, 1)}/{output_copies(mode, 1)}/{FIXED_BYTES}/{GPU_MARGIN}"
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


def check_size(task: Task, mode: str, limit: int | None, cuda: bool = True) -> None:
    """Raises TaskError when a job of this task in `mode` needs more than `limit` bytes."""
    if not limit:
        return
    fp = footprint(task)
    if fp is None:
        return
    need = needed_bytes(fp, mode, cuda)
    if need > limit:
        gib = lambda b: f"{b / 2**30:.2f} GiB"  # noqa: E731
        raise TaskError(
            f"task too large for this slot: a {mode} job needs about {gib(need)} (one input "
            f"set {gib(fp['inputs'])}, outputs {gib(fp['outputs'])}, parameters "
            f"{gib(fp['params'])}, held {input_copies(mode, round_calls(fp), cuda)}/"
            f"{output_copies(mode, round_calls(fp), cuda)}/{PARAM_COPIES} times) "
            f"and the slot has {gib(limit)}")


def check_reference(task: Task, device: str, atol: float, rtol: float, rel_l2: float) -> None:
    """Runs the reference on two seeded inputs; raises TaskError when it raises, returns no
    tensors, or an output does not depend on the input or is constant within tolerance."""
    from .verify import compare
    outs = []
    try:
        init = task.init_inputs(derive_seed("task-check", task.key, "init", 0))
        model = task.make_model(init, derive_seed("task-check", task.key, "weights", 0), device)
        for k in range(2):
            x = task.inputs(derive_seed("task-check", task.key, "input", k), device)
            with torch.no_grad():
                outs.append([t for t in as_outputs(model(*x))])
    except Exception as e:
        last = traceback.format_exception_only(type(e), e)[-1].strip()
        raise TaskError(f"the task's reference raised: {last[:800]}") from None
    for i, (a, b) in enumerate(zip(*outs)):
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            raise TaskError(f"the task's reference output {i} is a {type(a).__name__}, not a tensor")
        if a.shape == b.shape and compare(a, b, atol, rtol, rel_l2)[0]:
            raise TaskError(f"the task's output {i} does not depend on its input: the outputs for "
                            f"two seeded inputs agree within atol={atol} rtol={rtol} (a submission "
                            "returning either would pass on both)")
        if a.numel() > 1 and a.is_floating_point():
            const = torch.full_like(a, float(a.float().mean()))
            if compare(a, const, atol, rtol, rel_l2)[0]:
                raise TaskError(f"the task's output {i} is constant within atol={atol} rtol={rtol} "
                                "(a submission writing its mean would pass)")
