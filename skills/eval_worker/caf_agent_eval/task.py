"""The pristine task: model.py loaded from source text, seeded inputs and weights.

Seeds come from HMAC(seed_secret, job_id | purpose | index), so a submission cannot know
the inputs of any check before the call that receives them.
"""
from __future__ import annotations

import hashlib
import hmac
import importlib.util
import os
import sys

import torch


def derive_seed(secret: str, job_id: str, purpose: str, index: int) -> int:
    """A 63-bit seed nobody without the secret can predict."""
    msg = f"{job_id}|{purpose}|{index}".encode()
    return int.from_bytes(hmac.new(secret.encode(), msg, hashlib.sha256).digest()[:8], "big") >> 1


class Task:
    """A loaded model.py: Model, get_inputs, get_init_inputs (KernelBench format).

    Optional module attributes a task may define (documented in skills/tasks/README.md):
      batch_size            enables one check with half the batch (catches hard-coded shapes)
      STATE_DICT_STRICT     False lets ModelNew omit reference parameters (load strict=False)
    """

    def __init__(self, name: str, model_py: str, work_dir: str):
        self.name = name
        self.source = model_py
        self.key = hashlib.sha256(model_py.encode()).hexdigest()[:16]
        path = os.path.join(work_dir, f"task_{self.key}", "model.py")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(model_py)
        spec = importlib.util.spec_from_file_location(f"caf_task_{self.key}", path)
        self.module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.module)
        for attr in ("Model", "get_inputs", "get_init_inputs"):
            if not hasattr(self.module, attr):
                raise ValueError(f"task {name}: model.py defines no `{attr}`")
        self.strict = bool(getattr(self.module, "STATE_DICT_STRICT", True))
        self.checked: set = set()  # validations passed (task_check.py), by mode and tolerance
        # False when the reference cannot run at half the batch (KernelBench's level1/100
        # broadcasts a (B, B) input against a (B,) one): check 2 then keeps the full batch
        self.half_batch = True
        # (atol, rtol, rel_l2) -> why the task's output barely depends on its input, or None
        # (task_check.check_reference); a degenerate task is judged with the variation check
        self.degenerate: dict = {}
        # the factor every floating parameter is scaled by for judging (1: as initialised),
        # and, where that is not 1 or the task stays degenerate, why it was degenerate as
        # initialised (task_check.PARAM_SCALES)
        self.param_scale: dict = {}
        self.degenerate_default: dict = {}
        # why the task's output is the same for every input (judged, never correct)
        self.constant: dict = {}

    def init_inputs(self, seed: int):
        torch.manual_seed(seed)
        return list(self.module.get_init_inputs())

    def make_model(self, init_inputs, seed: int, device: str):
        """The reference model with weights drawn from seed, built on `device` (build_on)."""
        return build_on(lambda: self.module.Model(*init_inputs), device, seed).eval()

    def inputs(self, seed: int, device: str, batch_override: int | None = None):
        """get_inputs() under seed, made on `device` (generate_inputs); batch_override
        temporarily changes `batch_size`."""
        return generate_inputs(self.module, seed, device, batch_override)

    def check_batch(self, index: int) -> int | None:
        """The batch size of check `index`: half the nominal batch on check 2 (0-based 1)."""
        b = getattr(self.module, "batch_size", None)
        if isinstance(b, int) and b >= 2 and index == 1 and self.half_batch:
            return b // 2
        return None


def generate_inputs(module, seed: int, device: str, batch_override: int | None = None) -> list:
    """module.get_inputs() under torch.manual_seed(seed), with `device` as torch's default
    device, so tensors are drawn on the GPU directly (a 32 MiB torch.randn costs ~0.1 s on a
    CPU core and microseconds on an H200: with fresh inputs per timed call that was most of a
    profile's time). A get_inputs that cannot run that way (e.g. it goes through numpy) is
    drawn on the CPU and moved. Deterministic for a given seed, device kind and torch build:
    the worker and its child draw the same timed inputs from the same seed (measure.py), and
    the worker compares them bit for bit (an input that differs is an input mutation)."""
    saved = getattr(module, "batch_size", None)
    if batch_override is not None and saved is not None:
        module.batch_size = batch_override
    try:
        try:
            torch.manual_seed(seed)
            with torch.device(device):
                values = list(module.get_inputs())
        except Exception:
            if str(device).startswith("cpu"):
                raise
            torch.manual_seed(seed)
            values = list(module.get_inputs())
    finally:
        if saved is not None:
            module.batch_size = saved
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def build_on(make, device: str, seed: int | None = None):
    """make() (a module's constructor) with `device` as torch's default device, so its
    parameters are initialised there: KernelBench's level-3 models initialised on a CPU core
    took seconds (level3/1_MLP: 4.9 s in the worker, 9.2 s for the child's ModelNew, H200
    2026-12-01). A constructor that cannot run that way is run on the CPU. Moved to `device`
    either way; seed (if given) is set before each attempt, so the weights are a function of
    the seed, the device kind and the torch build."""
    if not str(device).startswith("cpu"):
        try:
            if seed is not None:
                torch.manual_seed(seed)
            with torch.device(device):
                return make().to(device)
        except Exception:
            pass
    if seed is not None:
        torch.manual_seed(seed)
    return make().to(device)


def load_module_from_source(source: str, name: str):
    """A task's model.py as a module object that no import can find (not in sys.modules, no
    file): the evaluation child's copy, used only to draw timed inputs (generate_inputs)."""
    import types
    mod = types.ModuleType(name)
    mod.__dict__["__builtins__"] = __builtins__
    exec(compile(source, f"<task {name}>", "exec"), mod.__dict__)
    return mod


def as_outputs(value) -> list:
    """A forward's result as a list (tuples/lists flattened one level)."""
    if isinstance(value, (tuple, list)):
        return list(value)
    return [value]


def drop_task_module(task: Task) -> None:
    """Forgets the imported module (the cache evicts tasks)."""
    sys.modules.pop(f"caf_task_{task.key}", None)
