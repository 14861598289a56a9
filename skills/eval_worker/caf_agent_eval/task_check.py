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
# together; measure.py, job.py, child.py). verify: per check the parent's input and
# reference output, the child's received input, its output, a snapshot and the kept output
# (5 checks). profile adds the warm-up sets (3) and one round of fresh sets on both sides,
# the round's outputs and the previous round's (kept alive for the buffer check).
# `calls` is the round's length (measure.calls_per_round: fewer calls for large inputs).
def input_copies(mode: str, calls: int) -> int:
    return 2 * 5 if mode == "verify" else 2 * 5 + 2 * (3 + calls)


def output_copies(mode: str, calls: int) -> int:
    return 4 * 5 + 1 if mode == "verify" else 4 * 5 + 1 + 2 * calls + 2


PARAM_COPIES = 3  # the parent's reference, the state_dict sent, the child's ModelNew


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
            "params": nbytes(list(model.parameters()) + list(model.buffers()))}


def round_calls(fp: dict) -> int:
    from . import options
    from .measure import calls_per_round
    return calls_per_round(options.DEFAULTS["timing"], fp["inputs"])


def needed_bytes(fp: dict, mode: str) -> int:
    calls = round_calls(fp)
    return fp["inputs"] * input_copies(mode, calls) + fp["outputs"] * output_copies(mode, calls) \
        + fp["params"] * PARAM_COPIES


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


def check_size(task: Task, mode: str, limit: int | None) -> None:
    """Raises TaskError when a job of this task in `mode` needs more than `limit` bytes."""
    if not limit:
        return
    fp = footprint(task)
    if fp is None:
        return
    need = needed_bytes(fp, mode)
    if need > limit:
        gib = lambda b: f"{b / 2**30:.2f} GiB"  # noqa: E731
        raise TaskError(
            f"task too large for this slot: a {mode} job needs about {gib(need)} (one input "
            f"set {gib(fp['inputs'])}, outputs {gib(fp['outputs'])}, parameters "
            f"{gib(fp['params'])}, held {input_copies(mode, round_calls(fp))}/"
            f"{output_copies(mode, round_calls(fp))}/{PARAM_COPIES} times) "
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
