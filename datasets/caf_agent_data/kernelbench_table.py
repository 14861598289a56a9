"""The CUDA Agent paper's table per level, from result rows: one row per problem scored
(kernelbench_eval's results.jsonl), or one per episode of a policy's evaluation (the
trajectory records `trajectory_tool export` writes).

A row: key, level, status (judged | missing | bad_submission | no_verdict | infra_error |
not_evaluated), correct, reward, speedup_eager, speedup_compile, candidate_ms, eager_ms,
compile_ms, task_error, and where the verdict had them kernelbench_correct, task_degenerate.
Definitions of the columns: DEFINITIONS below (also printed under the Markdown table).
"""
from __future__ import annotations

import json
import math
import os
import re
import time

FORMAT_VERSION = 1
# Rationale: the reward's margin (caf_agent_eval/reward.py SPEEDUP_MARGIN, the CUDA Agent
# paper's): faster means (t0 - t) / t0 > 0.05, i.e. a speedup t0 / t above 1 / 0.95 = 1.0526.
SPEEDUP_MARGIN = 0.05
_LEVEL_KEY = re.compile(r"^(level\d+)/")

DEFINITIONS = """\
- problems: tasks of the level (attempts: rows, when a policy played a task more than once);
  every rate below is over all of them, a missing submission or a failure counting as not passed.
- evaluated: the judge returned a verdict (task errors included). missing: no submission (or
  no record of the task). no verdict: refused submission, timeout, worker death, infrastructure
  error or an aborted episode.
- task errors: the judge could not judge the task itself (its reference fails its checks); not
  passed, and not the submission's doing.
- pass rate: the judge's verdict is correct (5 seeded inputs, the judge's strict checks).
- KernelBench pass rate: outputs within KernelBench's allclose on every check
  (`kernelbench_correct`), shown where verdicts carry that field; a verdict without it counts as
  not passed.
- faster than eager / torch.compile: correct and more than 5% faster than the baseline, the
  reward's margin: (t_base - t) / t_base > 0.05, i.e. a speedup above 1/0.95 = 1.053x.
  Faster than eager is reward >= 2; faster than torch.compile is counted on its own speedup.
- geomean speedup: the geometric mean of t_base / t over the correct problems with a timing
  (count in brackets), as `caf-agent --eval` reports it (rollout/eval_report.cpp).
- mean reward: over all problems; one without a reward from the judge (missing, no verdict,
  task error) counts -1, a correct one without timings 1."""


def beats(speedup) -> bool:
    """True when a speedup t0 / t means more than SPEEDUP_MARGIN faster (reward.beats)."""
    return isinstance(speedup, (int, float)) and speedup > 0 and (1.0 - 1.0 / speedup) > SPEEDUP_MARGIN


def row_reward(r: dict) -> float:
    """The row's reward for the mean (DEFINITIONS: -1 without one, 1 when correct without)."""
    if isinstance(r.get("reward"), (int, float)) and not isinstance(r.get("reward"), bool):
        return float(r["reward"])
    return 1.0 if r.get("correct") else -1.0


def _geo(xs: list):
    xs = [x for x in xs if isinstance(x, (int, float)) and x > 0]
    return (math.exp(sum(math.log(x) for x in xs) / len(xs)), len(xs)) if xs else (None, 0)


def summarise_group(rows: list[dict], kb_known: bool) -> dict:
    """The table's numbers over one group of rows."""
    n = len(rows)
    correct = [r for r in rows if r.get("correct")]
    rate = lambda k: (k / n) if n else None  # noqa: E731
    s = {"problems": len({r["key"] for r in rows}), "attempts": n,
         "evaluated": sum(r["status"] == "judged" for r in rows),
         "missing": sum(r["status"] == "missing" for r in rows),
         "task_errors": sum(bool(r.get("task_error")) for r in rows),
         "no_verdict": sum(r["status"] not in ("judged", "missing") for r in rows),
         "passed": len(correct)}
    s["pass_rate"] = rate(s["passed"])
    s["kernelbench_passed"] = sum(r.get("kernelbench_correct") is True for r in rows) if kb_known else None
    s["kernelbench_pass_rate"] = rate(s["kernelbench_passed"]) if kb_known else None
    s["faster_eager"] = sum(beats(r.get("speedup_eager")) for r in correct)
    s["faster_eager_rate"] = rate(s["faster_eager"])
    s["faster_compile"] = sum(beats(r.get("speedup_compile")) for r in correct)
    s["faster_compile_rate"] = rate(s["faster_compile"])
    s["geomean_speedup_eager"], s["geomean_eager_n"] = _geo([r.get("speedup_eager") for r in correct])
    s["geomean_speedup_compile"], s["geomean_compile_n"] = _geo([r.get("speedup_compile") for r in correct])
    s["mean_reward"] = (sum(row_reward(r) for r in rows) / n) if n else None
    return s


def _level_order(level: str):
    m = re.fullmatch(r"level(\d+)", level)
    return (0, int(m.group(1)), "") if m else (1, 0, level)


def summarise(rows: list[dict], meta: dict) -> dict:
    """The report: per level (KernelBench's order, then other groups by name) and overall."""
    kb_known = any("kernelbench_correct" in r for r in rows)
    levels = sorted({r["level"] for r in rows}, key=_level_order)
    return {"format": "caf_agent_kernelbench_report", "version": FORMAT_VERSION,
            "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **meta,
            "speedup_margin": SPEEDUP_MARGIN,
            "levels": {lv: summarise_group([r for r in rows if r["level"] == lv], kb_known) for lv in levels},
            "overall": summarise_group(rows, kb_known), "rows": rows}


def _rate(k, rate, n) -> str:
    return "-" if rate is None else f"{100 * rate:.1f}% ({k}/{n})"


def _x(v, n) -> str:
    return "-" if v is None else f"{v:.3f}x ({n})"


def table_cells(s: dict) -> list[str]:
    """One Markdown row's cells after the level's name (the test reads them back)."""
    n = s["attempts"]
    return [str(s["problems"]) + ("" if n == s["problems"] else f" ({n} attempts)"),
            str(s["evaluated"]), str(s["missing"]), str(s["task_errors"]), str(s["no_verdict"]),
            _rate(s["passed"], s["pass_rate"], n),
            _rate(s["kernelbench_passed"], s["kernelbench_pass_rate"], n),
            _rate(s["faster_eager"], s["faster_eager_rate"], n),
            _rate(s["faster_compile"], s["faster_compile_rate"], n),
            _x(s["geomean_speedup_eager"], s["geomean_eager_n"]),
            _x(s["geomean_speedup_compile"], s["geomean_compile_n"]),
            "-" if s["mean_reward"] is None else f"{s['mean_reward']:.2f}"]


HEADER = ["level", "problems", "evaluated", "missing", "task errors", "no verdict", "pass rate",
          "KernelBench pass rate", "faster than eager", "faster than torch.compile",
          "geomean speedup vs eager", "geomean speedup vs torch.compile", "mean reward"]


def describe(r: dict) -> str:
    """A row in words: `correct reward 2 (1.34x eager, 0.98x compile)`, `failed [mismatch]: ...`."""
    st = r["status"]
    if st == "judged" and r.get("correct"):
        sp = lambda v: "-" if not isinstance(v, (int, float)) else f"{v:.2f}x"  # noqa: E731
        rw = r.get("reward")
        return (f"correct reward {rw if rw is not None else '-'} ({sp(r.get('speedup_eager'))} eager, "
                f"{sp(r.get('speedup_compile'))} compile)")
    if r.get("task_error"):
        return f"task error: {r.get('reason', '')}"
    if st == "judged":
        flags = ",".join(r.get("flags") or [])
        return f"failed{f' [{flags}]' if flags else ''} reward {r.get('reward')}: {r.get('reason', '')}"
    if st == "missing":
        return f"missing: {r.get('reason') or 'no submission'}"
    return f"{st.replace('_', ' ')}: {r.get('reason', '')}"


def markdown(report: dict) -> str:
    """The report as Markdown: the table, the definitions, then every problem not passed."""
    lines = ["# KernelBench evaluation", ""]
    lines += [f"Source: {report.get('source_text', report.get('source', ''))}", ""]
    lines += ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for name, s in list(report["levels"].items()) + [("all", report["overall"])]:
        lines.append("| " + " | ".join([name] + table_cells(s)) + " |")
    lines += ["", DEFINITIONS, ""]
    failed = [r for r in report["rows"] if not r.get("correct")]
    if failed:
        lines += ["## Not passed", ""]
        lines += [f"- {r['key']}: {describe(r)}"[:400].replace("\n", " ") for r in failed]
    return "\n".join(lines) + "\n"


def write_report(out_dir: str, report: dict) -> None:
    """report.json and report.md in out_dir, each replaced whole (never half written)."""
    for name, text in (("report.json", json.dumps(report, indent=1, default=str) + "\n"),
                       ("report.md", markdown(report))):
        tmp = os.path.join(out_dir, f".{name}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, os.path.join(out_dir, name))


def read_jsonl(path: str, warn) -> list[tuple[int, dict]]:
    """(line number, object) of every JSON-object line; other lines are named and skipped
    (a torn last line after a kill is one)."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as e:
                warn(f"{path}:{no}: not JSON ({e.msg}); line skipped")
                continue
            if not isinstance(obj, dict):
                warn(f"{path}:{no}: not a JSON object; line skipped")
                continue
            out.append((no, obj))
    return out


def read_results(path: str, warn) -> list[dict]:
    """The rows of a results.jsonl, in order (a key may appear more than once: re-judged)."""
    rows = []
    for no, obj in read_jsonl(path, warn):
        if not isinstance(obj.get("key"), str) or not isinstance(obj.get("status"), str):
            warn(f"{path}:{no}: no key/status; line skipped")
            continue
        obj.setdefault("level", "other")
        rows.append(obj)
    return rows


def level_of_key(key: str, level_of: dict, default: str) -> str:
    """A task id's level: from the problems read, else its `levelN/` prefix, else `default`."""
    if key in level_of:
        return level_of[key]
    m = _LEVEL_KEY.match(key)
    return m.group(1) if m else default


def rows_from_records(path: str, level_of: dict, warn) -> list[dict]:
    """One row per trajectory record (trajectory_tool export's records.jsonl): reward,
    speedups and termination as the runtime stored them. correct = reward >= 1 (as
    rollout/eval_report.cpp counts); an aborted episode has no verdict, or a task error when
    its reason says so (the runtime's `task error: <why>`)."""
    rows = []
    default = "tasks" if not level_of else "other"
    for no, rec in read_jsonl(path, warn):
        if not isinstance(rec.get("task_id"), str):
            warn(f"{path}:{no}: no task_id; line skipped")
            continue
        key = rec["task_id"]
        if level_of and key not in level_of:
            warn(f"{path}:{no}: task {key!r} is not among the problems read; counted under 'other'")
        reward = rec.get("reward") if isinstance(rec.get("reward"), (int, float)) else None
        sp = lambda k: rec[k] if isinstance(rec.get(k), (int, float)) and rec[k] > 0 else None  # noqa: E731
        row = {"key": key, "level": level_of_key(key, level_of, default), "episode_id": rec.get("episode_id"),
               "termination": rec.get("termination"), "reward": reward,
               "speedup_eager": sp("speedup_eager"), "speedup_compile": sp("speedup_compile"), "turns": rec.get("turns")}
        if rec.get("termination") == "aborted":
            why = str(rec.get("abort_reason") or "")
            te = "task error: " in why
            row.update(status="judged" if te else "no_verdict", correct=False, task_error=te, reward=None,
                       reason=why[:2000] or "the episode was aborted")
        else:
            row.update(status="judged", correct=reward is not None and reward >= 1, task_error=False,
                       reason=str(rec.get("verdict") or "")[:2000])
        rows.append(row)
    return rows


def with_missing(rows: list[dict], problems: list, status: str, reason: str) -> list[dict]:
    """rows plus a row of `status` (missing, not_evaluated) for every problem no row names, in
    the problems' order, then the rows of other keys."""
    by_key: dict = {}
    for r in rows:
        by_key.setdefault(r["key"], []).append(r)
    out = []
    for p in problems:
        out += by_key.pop(p.key, None) or [{"key": p.key, "level": p.level, "status": status,
                                            "correct": False, "reward": None, "reason": reason}]
    for rs in by_key.values():
        out += rs
    return out
