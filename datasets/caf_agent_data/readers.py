"""Task sets as input: a directory of KernelBench-format files, a KernelBench checkout
(level1..level3 folders, the level recorded), a manifest of ours (manifest.py) and an
Ops-6K-style parquet table (columns ops, data_source, code).

Every reader returns a TaskSet: the tasks it could read and, for each file or row it could
not, the reason. A whole input that is not a task set (a missing path, a parquet file with
other columns) raises TaskSetError with the reason.
"""
from __future__ import annotations

import ast
import dataclasses
import json
import os
import re

from .identity import task_identity

#: The functions and class a KernelBench-format problem defines at module level.
REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")
#: The columns of the published Ops-6K table, exactly.
PARQUET_COLUMNS = ("ops", "data_source", "code")
# Rationale: the same rule as rollout/tasks.cpp, so a level read here is the level the
# runtime records for the same file.
_LEVEL_RE = re.compile(r"""^\s*(?:\"\"\"|''')?\s*Level\s+(\d+)""", re.IGNORECASE)
_KB_LEVEL_DIR = re.compile(r"^level(\d+)$")


class TaskSetError(Exception):
    """The input as a whole is not a task set this package reads (the message says why)."""


@dataclasses.dataclass
class TaskRecord:
    """One problem: its source and where it came from."""
    name: str
    source: str
    origin: str                      # file path, or "path#row" for a table row
    identity: str                    # identity.task_identity(source)
    level: int | None = None
    meta: dict = dataclasses.field(default_factory=dict)  # ops, data_source, manifest fields


@dataclasses.dataclass
class TaskSet:
    """The tasks read from one input and what was refused, as (where, reason)."""
    tasks: list
    refused: list
    kind: str = ""

    def by_identity(self) -> dict:
        return {t.identity: t for t in self.tasks}


def check_source(source: str) -> tuple[str | None, str | None]:
    """(identity, None) for a well-formed problem, else (None, reason). Static only: the
    source parses and defines Model, get_inputs and get_init_inputs at module level."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return None, f"does not parse: {e.msg} (line {e.lineno})"
    names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
              if isinstance(t, ast.Name)}
    missing = [n for n in REQUIRED_NAMES if n not in names]
    if missing:
        return None, "defines no " + ", ".join(f"`{m}`" for m in missing)
    return task_identity(source), None


def level_of(source: str) -> int | None:
    m = _LEVEL_RE.search(source)
    return int(m.group(1)) if m else None


def _add(out: TaskSet, name: str, source: str, origin: str, level=None, meta=None) -> None:
    ident, reason = check_source(source)
    if reason:
        out.refused.append((origin, reason))
        return
    out.tasks.append(TaskRecord(name, source, origin, ident,
                                level if level is not None else level_of(source), meta or {}))


def _read_text(path: str, out: TaskSet) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        out.refused.append((path, f"cannot be read: {e}"))
        return None


def read_directory(path: str, prefix: str = "", level: int | None = None) -> TaskSet:
    """Every `*.py` in `path` (sorted; names starting with `_` skipped, as the runtime does)."""
    if not os.path.isdir(path):
        raise TaskSetError(f"task directory '{path}' does not exist")
    out = TaskSet([], [], "directory")
    for fn in sorted(os.listdir(path)):
        if not fn.endswith(".py") or fn.startswith("_"):
            continue
        full = os.path.join(path, fn)
        text = _read_text(full, out)
        if text is not None:
            _add(out, prefix + fn[:-3], text, full, level)
    return out


def kernelbench_root(path: str) -> str | None:
    """The folder holding level1.. in a KernelBench checkout (the checkout's root or its
    KernelBench/ subfolder), or None."""
    for cand in (path, os.path.join(path, "KernelBench")):
        if os.path.isdir(os.path.join(cand, "level1")):
            return cand
    return None


def read_kernelbench(path: str, levels: tuple | None = None) -> TaskSet:
    """The level folders of a KernelBench checkout; each task's level is its folder's."""
    root = kernelbench_root(path)
    if root is None:
        raise TaskSetError(f"'{path}' is not a KernelBench checkout (no level1/ folder)")
    out = TaskSet([], [], "kernelbench")
    for d in sorted(os.listdir(root)):
        m = _KB_LEVEL_DIR.match(d)
        if not m or not os.path.isdir(os.path.join(root, d)):
            continue
        lv = int(m.group(1))
        if levels and lv not in levels:
            continue
        part = read_directory(os.path.join(root, d), prefix=f"{d}/", level=lv)
        out.tasks += part.tasks
        out.refused += part.refused
    return out


def read_manifest(path: str) -> TaskSet:
    """A manifest of ours (manifest.py): each task line names its `file` (relative to the
    manifest) or carries its `code`."""
    from .manifest import read_manifest_lines
    header, records, bad = read_manifest_lines(path)
    out = TaskSet([], list(bad), "manifest")
    base = os.path.dirname(os.path.abspath(path))
    for i, rec in enumerate(records):
        where = f"{path}#{i + 1}"
        if "code" in rec:
            source = rec["code"]
        elif "file" in rec:
            source = _read_text(os.path.join(base, rec["file"]), out)
            if source is None:
                continue
        else:
            out.refused.append((where, "task line has neither `file` nor `code`"))
            continue
        name = rec.get("name") or os.path.splitext(os.path.basename(rec.get("file", f"task{i}")))[0]
        _add(out, name, source, where, rec.get("level"), rec)
    return out


def _parse_ops(value):
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
            return parsed if isinstance(parsed, list) else [value]
        except ValueError:
            return [s.strip() for s in value.split(",") if s.strip()]
    if value is None:
        return []
    return list(value)


def read_parquet(path: str) -> TaskSet:
    """An Ops-6K-style table: exactly the columns ops, data_source, code (anything else is
    refused: a table of another shape is not this format)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise TaskSetError("reading a parquet task set needs pyarrow (pip install pyarrow)") from None
    if not os.path.isfile(path):
        raise TaskSetError(f"parquet file '{path}' does not exist")
    try:
        table = pq.read_table(path)
    except Exception as e:  # pyarrow raises its own types for a file that is not parquet
        raise TaskSetError(f"'{path}' is not a readable parquet file: {e}") from None
    cols = list(table.column_names)
    if sorted(cols) != sorted(PARQUET_COLUMNS):
        extra = [c for c in cols if c not in PARQUET_COLUMNS]
        missing = [c for c in PARQUET_COLUMNS if c not in cols]
        raise TaskSetError(f"'{path}' has columns {cols}; an Ops-6K table has exactly "
                           f"{list(PARQUET_COLUMNS)} (extra: {extra}, missing: {missing})")
    out = TaskSet([], [], "parquet")
    rows = table.to_pylist()
    for i, row in enumerate(rows):
        where = f"{path}#{i}"
        code = row.get("code")
        if not isinstance(code, str):
            out.refused.append((where, f"`code` is {type(code).__name__}, not a string"))
            continue
        _add(out, f"row{i:05d}", code, where, None,
             {"ops": _parse_ops(row.get("ops")), "data_source": row.get("data_source")})
    return out


def read_task_set(path: str, levels: tuple | None = None) -> TaskSet:
    """Any supported input, by its shape: `*.parquet`, `*.jsonl`, a KernelBench checkout, a
    directory with a manifest.jsonl (a pipeline output), or a directory of problem files."""
    if path.endswith(".parquet"):
        return read_parquet(path)
    if path.endswith(".jsonl"):
        return read_manifest(path)
    if os.path.isdir(path):
        if kernelbench_root(path):
            return read_kernelbench(path, levels)
        if os.path.isfile(os.path.join(path, "manifest.jsonl")):
            return read_manifest(os.path.join(path, "manifest.jsonl"))
        return read_directory(path)
    raise TaskSetError(f"'{path}' is neither a directory, a .jsonl manifest nor a .parquet file")


def merge(sets: list) -> TaskSet:
    """The union of task sets with each identity once (the first occurrence kept; the other
    origins recorded in its meta['also_in'])."""
    out = TaskSet([], [], "merged")
    seen: dict = {}
    for s in sets:
        out.refused += s.refused
        for t in s.tasks:
            if t.identity in seen:
                seen[t.identity].meta.setdefault("also_in", []).append(t.origin)
            else:
                seen[t.identity] = t
                out.tasks.append(t)
    return out
