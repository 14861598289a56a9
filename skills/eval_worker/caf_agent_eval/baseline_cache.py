"""The one cache of a task's eager and torch.compile baselines.

A baseline is what the judge times a task's reference with: the per-call samples of the
eager model and of torch.compile's, in the form measure.py keeps them (`base`:
{"eager": {"primary", "gap", "ref_gap", "launch"}, "compile": {...}}), so a profile job's
summary takes a cached baseline as it takes one it measured.

Key: the task's normalized source (its AST without docstrings, so comments and layout do not
split one task in two), the device's name, the torch version, and the timing method
(flush_in_stream, hold_ms, compile_baseline): anything that changes what was measured is in
the key, so a baseline never serves a job that would have measured another one.

Two levels: the worker's memory (`ctx.baselines`, under measure.py's own key as well, so a
profile job of the same worker finds it) and, when CAF_EVAL_BASELINE_DIR names a directory,
one JSON file per key there, shared by the slots of a host and by later runs. A file is
written to a temporary name and renamed, so a reader sees a whole file or none; a file that
does not parse or has the wrong shape is ignored (the baseline is measured again). The
directory is the judge's (outside every sandbox): what it holds decides rewards.
"""
from __future__ import annotations

import ast
import hashlib
import json
import math
import os
import tempfile

ENV_DIR = "CAF_EVAL_BASELINE_DIR"
#: Version of the files' format; bump on any change of what a file holds.
FORMAT_VERSION = 1
SERIES = ("primary", "gap", "ref_gap", "launch")
NAMES = ("eager", "compile")
# Rationale: a settled baseline holds at most timing.max_iters samples (300 by default);
# a file with more is not one we wrote.
MAX_SAMPLES = 100_000


def normalized_source_hash(source: str) -> str:
    """sha256 of the module's AST dump without docstrings or positions (the raw text's hash
    when it does not parse: such a task never gets as far as a baseline anyway)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return hashlib.sha256(source.encode()).hexdigest()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    dump = ast.dump(tree, annotate_fields=False, include_attributes=False)
    return hashlib.sha256(dump.encode()).hexdigest()


def device_name(device: str) -> str:
    """The device as the key names it: the GPU's product name, or "cpu"."""
    if device.startswith("cuda"):
        import torch
        return torch.cuda.get_device_name(device)
    return "cpu"


def hold_ms_of(ctx, t: dict) -> float:
    """The hold the timing uses (measure.py's rule): timing.hold_ms where this worker built
    the hold kernel on a GPU, else 0."""
    return t["hold_ms"] if ctx.timers.cuda and ctx.timers.hold is not None else 0.0


def key_fields(ctx, task, t: dict) -> dict:
    """What the cache key is made of (recorded in each file, for audits)."""
    import torch
    return {"source": normalized_source_hash(task.source), "device": device_name(ctx.device),
            "torch": torch.__version__, "flush_in_stream": bool(t["flush_in_stream"]),
            "hold_ms": float(hold_ms_of(ctx, t)), "compile_baseline": bool(t["compile_baseline"])}


def cache_key(fields: dict) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:32]


def measure_key(ctx, task, t: dict) -> tuple:
    """measure.py's key of ctx.baselines (the worker-local cache it reads)."""
    return (task.key, bool(t["flush_in_stream"]), hold_ms_of(ctx, t), bool(t["compile_baseline"]))


def valid_base(base) -> bool:
    """A base dict as measure.py keeps one: eager always; each name a map of the four series,
    lists of finite non-negative numbers (primary non-empty)."""
    if not isinstance(base, dict) or "eager" not in base or not set(base) <= set(NAMES):
        return False
    for b in base.values():
        if not isinstance(b, dict) or set(b) != set(SERIES):
            return False
        for name in SERIES:
            xs = b[name]
            if not isinstance(xs, list) or len(xs) > MAX_SAMPLES or (name == "primary" and not xs):
                return False
            if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                       and x >= 0 for x in xs):
                return False
    return True


def _path(directory: str, key: str) -> str:
    return os.path.join(directory, f"baseline-{key}.json")


def get(ctx, task, t: dict):
    """(base, where) of a cached baseline of this task under these timing options, where is
    "memory" or "disk"; (None, "") when none is cached. A baseline from disk is also kept in
    memory."""
    fields = key_fields(ctx, task, t)
    key = cache_key(fields)
    mem = getattr(ctx, "baseline_store", None)
    if mem is None:
        mem = ctx.baseline_store = {}
    if key in mem:
        return mem[key], "memory"
    directory = os.environ.get(ENV_DIR, "").strip()
    if not directory:
        return None, ""
    try:
        with open(_path(directory, key)) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None, ""
    if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION or doc.get("key") != fields \
            or not valid_base(doc.get("base")):
        return None, ""
    mem[key] = doc["base"]
    _share_with_measure(ctx, task, t, doc["base"])
    return doc["base"], "disk"


def put(ctx, task, t: dict, base: dict, extra: dict | None = None) -> None:
    """Keeps a measured baseline in memory and, with CAF_EVAL_BASELINE_DIR, on disk (atomic
    rename; a directory that cannot be written costs the sharing only, never the job)."""
    if not valid_base(base):
        raise ValueError("baseline_cache.put: not a baseline (measure.py's base form)")
    fields = key_fields(ctx, task, t)
    key = cache_key(fields)
    mem = getattr(ctx, "baseline_store", None)
    if mem is None:
        mem = ctx.baseline_store = {}
    mem[key] = base
    _share_with_measure(ctx, task, t, base)
    directory = os.environ.get(ENV_DIR, "").strip()
    if not directory:
        return
    doc = {"version": FORMAT_VERSION, "key": fields, "task": task.name, "base": base, **(extra or {})}
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".baseline-", dir=directory)
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, _path(directory, key))
    except OSError as e:
        import sys
        print(f"eval worker: baseline cache not written to {directory}: {e}", file=sys.stderr, flush=True)


def _share_with_measure(ctx, task, t: dict, base: dict) -> None:
    """A profile job of this worker reads ctx.baselines under measure.py's key; a baseline
    that lacks the compile series it would want is not offered."""
    if bool(t["compile_baseline"]) and "compile" not in base:
        return
    ctx.baselines[measure_key(ctx, task, t)] = base
