"""The versioned JSONL manifest beside a dataset directory's problem files.

Line 1 is the header: {"format": "caf_agent_tasks", "version": N, ...how it was made}.
Every further line is one task: name, file (relative to the manifest), identity, level,
ops (what each stage wraps), shapes, times per device, similarity, difficulty.
"""
from __future__ import annotations

import json

from . import MANIFEST_VERSION

FORMAT = "caf_agent_tasks"


def write_manifest(path: str, header: dict, records: list) -> None:
    """Writes the header line then one line per record (keys sorted, so equal content is
    equal bytes)."""
    head = {"format": FORMAT, "version": MANIFEST_VERSION}
    head.update(header)
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(head, sort_keys=True) + "\n")
        for r in records:
            f.write(json.dumps(r, sort_keys=True) + "\n")


def read_manifest_lines(path: str) -> tuple[dict, list, list]:
    """(header, task records, refused lines as (where, reason)). Raises TaskSetError when
    the file is missing, has no header of this format, or a newer version."""
    from .readers import TaskSetError
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise TaskSetError(f"manifest '{path}' cannot be read: {e}") from None
    if not lines:
        raise TaskSetError(f"manifest '{path}' is empty")
    try:
        header = json.loads(lines[0])
    except ValueError as e:
        raise TaskSetError(f"manifest '{path}' line 1 is not JSON: {e}") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise TaskSetError(f"manifest '{path}' line 1 is not a {FORMAT} header")
    version = header.get("version")
    if not isinstance(version, int) or version > MANIFEST_VERSION:
        raise TaskSetError(f"manifest '{path}' has version {version!r}; this reader knows "
                           f"versions up to {MANIFEST_VERSION}")
    records, bad = [], []
    for i, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as e:
            bad.append((f"{path}:{i}", f"not JSON: {e}"))
            continue
        if not isinstance(rec, dict):
            bad.append((f"{path}:{i}", "a task line must be a JSON object"))
            continue
        records.append(rec)
    return header, records, bad
