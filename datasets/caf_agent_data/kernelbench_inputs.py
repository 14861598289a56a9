"""What kernelbench_eval reads: the problems (a KernelBench checkout, or a flat folder of task
files), each problem's submission (a folder or a single file, read without following links),
and submissions extracted from a replay recording.

A problem's key is the task id caf-agent gives it (rollout/tasks.cpp): `level1/19_ReLU` for a
KernelBench checkout, the file's stem (`add_relu`) for a flat folder. The key is also where its
submission lives under `--submissions`: `DIR/level1/19_ReLU/` (model_new.py, kernels/**) or
`DIR/level1/19_ReLU.py` (model_new.py alone).
"""
from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
import posixpath
import re
import shutil
import stat

# Rationale: the judge's own limits (caf_agent_eval/job.py MAX_FILES, MAX_FILE_BYTES); a larger
# submission is refused there anyway, and reading stops here instead of loading it whole.
MAX_FILES = 64
MAX_FILE_BYTES = 1 << 20
_LEVEL_DIR = re.compile(r"^level(\d+)$")


class InputError(Exception):
    """An input as a whole is unusable (a missing folder, a bad --select); the message says why."""


class SubmissionError(Exception):
    """One problem's submission is refused (a link, a path leaving its folder, too large)."""


@dataclasses.dataclass
class Problem:
    """One task to score."""
    key: str     # caf-agent's task id, and the submission's place under --submissions
    level: str   # the table's group: level1.., or the flat folder's name
    stem: str
    path: str    # the task's model.py


def _number(path: str) -> int:
    m = re.match(r"(\d+)", os.path.basename(path))
    return int(m.group(1)) if m else 10**9


def levels_root(path: str) -> str | None:
    """The folder holding level1.. of a KernelBench checkout at `path` (the checkout itself
    or its KernelBench/ folder, as rollout/tasks.cpp looks), or None."""
    for root in (path, os.path.join(path, "KernelBench")):
        if os.path.isdir(root) and any(_LEVEL_DIR.match(n) and os.path.isdir(os.path.join(root, n))
                                       for n in os.listdir(root)):
            return root
    return None


def parse_levels(text: str) -> list[int]:
    """"1,2,3" -> [1, 2, 3]; anything else is an InputError naming the part."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        if not part.isdigit():
            raise InputError(f"--levels '{text}': '{part}' is not a level number (expected e.g. 1,2,3)")
        out.append(int(part))
    if not out:
        raise InputError(f"--levels '{text}' names no level")
    return out


def parse_select(text: str) -> dict[int, set[int]]:
    """"1:19-25,3:1-2" -> {1: {19..25}, 3: {1, 2}} (bench/judge/bench_kernelbench.py's form)."""
    picks: dict[int, set[int]] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        m = re.fullmatch(r"(\d+):(\d+)(?:-(\d+))?", part)
        if not m:
            raise InputError(f"--select '{text}': '{part}' is not LEVEL:N or LEVEL:N-M (e.g. 1:19-25,3:1-2)")
        lo, hi = int(m.group(2)), int(m.group(3) or m.group(2))
        if hi < lo:
            raise InputError(f"--select '{text}': '{part}' is an empty range")
        picks.setdefault(int(m.group(1)), set()).update(range(lo, hi + 1))
    return picks


def kernelbench_problems(path: str, levels: list[int], select: str = "") -> list[Problem]:
    """The problems of a KernelBench checkout in KernelBench's order (level, then number);
    `select` picks numbers per level and overrides `levels`."""
    root = levels_root(path)
    if root is None:
        what = "does not exist" if not os.path.exists(path) else "holds no level1/, level2/, ... folder"
        raise InputError(f"--kernelbench '{path}' {what} (expected KernelBench's KernelBench/ folder)")
    picks = parse_select(select) if select else {}
    out = []
    for lv in (sorted(picks) if picks else levels):
        files = [f for f in glob.glob(os.path.join(root, f"level{lv}", "*.py"))
                 if not os.path.basename(f).startswith("_")]
        files.sort(key=lambda f: (_number(f), os.path.basename(f)))
        if lv in picks:
            files = [f for f in files if _number(f) in picks[lv]]
        if not files:
            raise InputError(f"--kernelbench '{path}': no problem of level {lv}"
                             + (f" numbered {select}" if picks else ""))
        for f in files:
            stem = os.path.splitext(os.path.basename(f))[0]
            out.append(Problem(f"level{lv}/{stem}", f"level{lv}", stem, f))
    return out


def folder_problems(path: str) -> list[Problem]:
    """Every task file of a flat folder (sorted, names starting with `_` skipped, as
    rollout/tasks.cpp reads a tasks_dir), as one level named after the folder."""
    if not os.path.isdir(path):
        raise InputError(f"--tasks '{path}' is not a folder")
    level = os.path.basename(os.path.normpath(os.path.abspath(path)))
    files = sorted(f for f in glob.glob(os.path.join(path, "*.py")) if not os.path.basename(f).startswith("_"))
    if not files:
        raise InputError(f"--tasks '{path}' holds no *.py task")
    return [Problem(os.path.splitext(os.path.basename(f))[0], level,
                    os.path.splitext(os.path.basename(f))[0], f) for f in files]


def select_problems(kernelbench: str | None, tasks: str | None, levels: str, select: str) -> list[Problem]:
    """The problems named on the command line (--kernelbench with --levels/--select, or --tasks)."""
    if kernelbench and tasks:
        raise InputError("give --kernelbench or --tasks, not both")
    if kernelbench:
        return kernelbench_problems(kernelbench, parse_levels(levels), select)
    if tasks:
        if select:
            raise InputError("--select picks KernelBench numbers: it needs --kernelbench")
        return folder_problems(tasks)
    return []


# ---------------------------------------------------------------- submissions


def _refuse_link(path: str, rel: str) -> None:
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise SubmissionError(f"{rel} is a symbolic link (to {os.readlink(path)!r}); links are refused in "
                              "a submission (copy the file instead)")


def find_submission(root: str, problem: Problem) -> str | None:
    """The submission of `problem` under `root`: its folder, its single .py file, or None.
    A link on the way (level1/ or the problem's folder) or both forms at once is refused."""
    parts = problem.key.split("/")
    for i in range(1, len(parts)):  # the folders between root and the problem's entry
        p = os.path.join(root, *parts[:i])
        if os.path.lexists(p):
            _refuse_link(p, "/".join(parts[:i]))
    base = os.path.join(root, *parts)
    found = [p for p in (base, base + ".py") if os.path.lexists(p)]
    for p in found:
        _refuse_link(p, os.path.relpath(p, root))
    if len(found) == 2:
        raise SubmissionError(f"both {problem.key}/ and {problem.key}.py exist; keep one")
    if not found:
        return None
    if found[0] == base and not os.path.isdir(base):
        raise SubmissionError(f"{problem.key} is not a folder (a submission is {problem.key}/model_new.py "
                              f"or {problem.key}.py)")
    return found[0]


def _read_text(path: str, rel: str) -> str:
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise SubmissionError(f"{rel} is not a regular file")
    if st.st_size > MAX_FILE_BYTES:
        raise SubmissionError(f"{rel} is {st.st_size} bytes, over the judge's limit of {MAX_FILE_BYTES}")
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SubmissionError(f"{rel} is not UTF-8 text ({e.reason} at byte {e.start})") from None


def read_submission(path: str) -> dict[str, str]:
    """model_new.py and kernels/** of a submission folder (or a single file as model_new.py),
    never following a link: a link anywhere inside is refused, as the sandbox refuses one."""
    if os.path.isfile(path):
        return {"model_new.py": _read_text(path, os.path.basename(path))}
    top = os.path.join(path, "model_new.py")
    if not os.path.lexists(top):
        raise SubmissionError(f"{os.path.basename(path)}/ has no model_new.py")
    _refuse_link(top, "model_new.py")
    files = {"model_new.py": _read_text(top, "model_new.py")}
    kdir = os.path.join(path, "kernels")
    if os.path.lexists(kdir):
        _refuse_link(kdir, "kernels")
        for dirpath, dirnames, names in os.walk(kdir, followlinks=False):
            for d in dirnames:
                _refuse_link(os.path.join(dirpath, d), os.path.relpath(os.path.join(dirpath, d), path))
            for n in sorted(names):
                p = os.path.join(dirpath, n)
                rel = os.path.relpath(p, path).replace(os.sep, "/")
                _refuse_link(p, rel)
                files[rel] = _read_text(p, rel)
                if len(files) > MAX_FILES:
                    raise SubmissionError(f"more than {MAX_FILES} files (the judge's limit)")
    return files


def content_hash(files: dict[str, str]) -> str:
    """sha256 over the submission's paths and contents (order-free): the resume key."""
    h = hashlib.sha256()
    for rel in sorted(files):
        for part in (rel, files[rel]):
            b = part.encode("utf-8")
            h.update(len(b).to_bytes(8, "little") + b)
    return h.hexdigest()


# ---------------------------------------------------------------- replay recordings

_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def clean_relpath(path: str) -> str | None:
    """A workspace path as a clean relative POSIX path, or None when it is absolute, empty or
    leaves the workspace (`..`)."""
    if not isinstance(path, str) or not path or "\\" in path or path.startswith("/"):
        return None
    norm = posixpath.normpath(path)
    if norm in (".", "") or norm == ".." or norm.startswith("../"):
        return None
    return norm


def _turn_text(turn) -> str:
    if isinstance(turn, dict):  # a chat message rather than a bare string
        return str(turn.get("content") or turn.get("text") or "")
    return turn if isinstance(turn, str) else ""


def replay_files(turns: list, warn) -> dict[str, str]:
    """The last content each Write call gave to model_new.py and kernels/** in a recording's
    assistant turns (Edit calls on a file written before are applied too)."""
    files: dict[str, str] = {}
    for k, turn in enumerate(turns):
        for m in _CALL.finditer(_turn_text(turn)):
            try:
                call = json.loads(m.group(1).strip(), strict=False)  # literal newlines, as the runtime accepts
                name, args = call["name"], call.get("arguments") or {}
            except (ValueError, KeyError, TypeError, AttributeError):
                warn(f"turn {k + 1}: a tool call that is not JSON with a name; skipped")
                continue
            if name not in ("Write", "Edit"):
                continue
            rel = clean_relpath(args.get("file_path"))
            if rel is None:
                warn(f"turn {k + 1}: {name} to {args.get('file_path')!r} leaves the workspace; refused")
                continue
            if rel != "model_new.py" and not rel.startswith("kernels/"):
                continue  # the judge takes model_new.py and kernels/** only
            if name == "Write":
                if isinstance(args.get("content"), str):
                    files[rel] = args["content"]
            elif rel in files and isinstance(args.get("old_string"), str) and isinstance(args.get("new_string"), str):
                n = -1 if args.get("replace_all") else 1
                files[rel] = files[rel].replace(args["old_string"], args["new_string"], n)
            else:
                warn(f"turn {k + 1}: Edit of {rel}, which the recording never wrote; not applied")
    return files


def extract_replay(recording: str, out: str, force: bool = False, warn=print) -> dict[str, list[str]]:
    """Writes one submission folder per recorded task (`out/<task_id>/model_new.py`,
    kernels/**) from a replay recording (one JSON line per episode: task_id and turns).
    The wildcard episode (`*`) is not a submission. Returns {"written": [...], "skipped": [...]}."""
    if not os.path.isfile(recording):
        raise InputError(f"--replay '{recording}' is not a file")
    if os.path.isdir(out) and os.listdir(out) and not force:
        raise InputError(f"--out '{out}' is not empty (pass --force to replace the task folders it writes)")
    written, skipped = [], []
    with open(recording, encoding="utf-8") as f:
        lines = f.readlines()
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            task_id, turns = rec["task_id"], rec["turns"]
            if not isinstance(turns, list):
                raise TypeError("turns is not a list")
        except (ValueError, KeyError, TypeError) as e:
            warn(f"{recording}:{no}: not a recording line (task_id, turns): {e}; skipped")
            continue
        if task_id == "*":
            continue
        rel = clean_relpath(str(task_id))
        if rel is None:
            warn(f"{recording}:{no}: task id {task_id!r} is not a clean relative name; skipped")
            skipped.append(str(task_id))
            continue
        files = replay_files(turns, lambda msg: warn(f"{recording}:{no} ({task_id}): {msg}"))
        if "model_new.py" not in files:
            warn(f"{recording}:{no} ({task_id}): no model_new.py is written; no submission")
            skipped.append(rel)
            continue
        dest = os.path.join(out, *rel.split("/"))
        if os.path.lexists(dest):
            shutil.rmtree(dest) if os.path.isdir(dest) and not os.path.islink(dest) else os.remove(dest)
        for path, text in files.items():
            p = os.path.join(dest, *path.split("/"))
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w", encoding="utf-8") as g:
                g.write(text)
        written.append(rel)
    return {"written": written, "skipped": skipped}
