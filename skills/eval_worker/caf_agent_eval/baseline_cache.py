"""The one cache of a task's eager and torch.compile baselines.

A baseline is what the judge times a task's reference with: the per-call samples of the
eager model and of torch.compile's, in the form measure.py keeps them (`base`:
{"eager": {"primary", "gap", "ref_gap", "launch"}, "compile": {...}}), so a profile job's
summary takes a cached baseline as it takes one it measured.

Key: the task's normalized source (its AST without docstrings, so comments and layout do not
split one task in two), the device's name, the torch version, and the timing method
(flush_in_stream, hold_ms, compile_baseline): anything that changes what was measured is in
the key, so a baseline never serves a job that would have measured another one.

Two levels: the worker's memory (`ctx.baseline_store`) and a directory shared by the slots
of a host and by later runs: CAF_EVAL_BASELINE_DIR, else `<build_root>/baselines` (a node's
workers share the build root); CAF_EVAL_BASELINE_DIR=off keeps baselines in memory only.
A file is written to a temporary name and renamed, so a reader sees a whole file or none; a
file that does not parse or has the wrong shape is ignored (the baseline is measured again).

Integrity: the directory is the judge's, but the judging child runs with the worker's uid
and on CUDA slots may open existing files for writing (seccomp.py), though it can create,
rename, unlink or link nothing. So each file is named by the hash of its own bytes,
`baseline-<key>-<sha256[:32]>.json`, and a reader ignores a file whose bytes do not hash to
its name: a file rewritten in place never validates, and the child cannot make a new name.
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


def cache_dir(ctx) -> str:
    """The shared directory ("" when sharing is off)."""
    env = os.environ.get(ENV_DIR, "").strip()
    if env == "off":
        return ""
    if env:
        return env
    root = getattr(ctx, "build_root", None)
    return os.path.join(root, "baselines") if root else ""


def _content_name(key: str, data: bytes) -> str:
    return f"baseline-{key}-{hashlib.sha256(data).hexdigest()[:32]}.json"


def _read_disk(directory: str, key: str, fields: dict):
    """The first file of this key whose bytes hash to its name and that holds a valid
    baseline of exactly these key fields; None when there is none."""
    import glob
    for path in sorted(glob.glob(os.path.join(glob.escape(directory), f"baseline-{key}-*.json"))):
        try:
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                data = f.read(1 << 24)
        except OSError:
            continue
        if os.path.basename(path) != _content_name(key, data):
            continue  # rewritten in place (or not ours): never trusted
        try:
            doc = json.loads(data)
        except ValueError:
            continue
        if isinstance(doc, dict) and doc.get("version") == FORMAT_VERSION and doc.get("key") == fields \
                and valid_base(doc.get("base")):
            return doc["base"]
    return None


def get(ctx, task, t: dict):
    """(base, where) of a cached baseline of this task under these timing options, where is
    "memory" or "disk"; (None, "") when none is cached, or when the cached one lacks the
    compile series these options ask for. A baseline from disk is also kept in memory."""
    fields = key_fields(ctx, task, t)
    key = cache_key(fields)
    mem = _memory(ctx)
    want_compile = bool(t["compile_baseline"])
    base = mem.get(key)
    if base is not None and (not want_compile or "compile" in base):
        return base, "memory"
    directory = cache_dir(ctx)
    base = _read_disk(directory, key, fields) if directory else None
    if base is None or (want_compile and "compile" not in base):
        return None, ""
    mem[key] = base
    return base, "disk"


def _memory(ctx) -> dict:
    mem = getattr(ctx, "baseline_store", None)
    if mem is None:
        mem = ctx.baseline_store = {}
    return mem


def put(ctx, task, t: dict, base: dict, extra: dict | None = None) -> None:
    """Keeps a measured baseline in memory and in the shared directory (named by its
    content's hash, written to a temporary file and renamed; the key's older files removed).
    A directory that cannot be written costs the sharing only, never the job."""
    if not valid_base(base):
        raise ValueError("baseline_cache.put: not a baseline (measure.py's base form)")
    fields = key_fields(ctx, task, t)
    key = cache_key(fields)
    _memory(ctx)[key] = base
    directory = cache_dir(ctx)
    if not directory:
        return
    doc = {"version": FORMAT_VERSION, "key": fields, "task": task.name, "base": base, **(extra or {})}
    data = json.dumps(doc).encode()
    name = _content_name(key, data)
    try:
        import glob
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".baseline-", dir=directory)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(directory, name))
        for old in glob.glob(os.path.join(glob.escape(directory), f"baseline-{key}-*.json")):
            if os.path.basename(old) != name:
                os.unlink(old)
    except OSError as e:
        import sys
        print(f"eval worker: baseline cache not written to {directory}: {e}", file=sys.stderr, flush=True)
