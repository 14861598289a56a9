#!/usr/bin/env python3
"""The figures of one `run_h200.sh` call as a markdown table, one row per measured workload.

    python3 bench/policy/summarize.py DIR
    python3 bench/policy/summarize.py --kernels DIR

DIR holds what the call returned (unpacked): `agent.json` from the main bench and
`agent-{batch,long,cached}-K.json` from its A/B runs. Each row names the run (`main`, or the A/B
file with the flags that differ from the engine's defaults), the workload and its figure beside
the placement counts of the paged layout (runs a decode row, keys moved, prefix hit rate). A run
stopped by its cap leaves no JSON figure for the workload it was in; it is left out.

A patch A/B of several rounds (run_patch_ab.sh ROUNDS=N: `agent-K-<side>-rR.json`) also gets a
table of each side's headline figure per round, its median, and the median against side a's.

--kernels: instead, each profiled step the runs recorded (`profile_*` entries: a 64-row step with
and without graphs, at --profile-keys keys, one row at 131,072 keys) as a table of its kernels, the
most time first: calls and microseconds a step, share of the device's busy time; its heading gives
the wall and busy time a step. With programmatic launch on, a kernel's time includes its wait for
the one before, so those times overlap. Profiles that record the timeline (`device_span_us_per_step`,
each kernel's `us_added_per_step`: policy_model_tool's profile_steps) are listed instead by what
each kernel adds to the step's device time, with the busy time counted once in the heading.
"""
import argparse
import json
import pathlib
import re
import statistics
import sys

# Flags bench_agent.py records whose values, when set, tell A/B runs apart.
RUN_FLAGS = ("kv_layout", "kv_block_size", "kv_cache_dtype", "cache_attention", "prefill_chunk", "fused_kernels",
             "overlap", "programmatic_launch", "flash_decode_shares", "decode_gemv_rows",
             "decode_mma_rows", "prefill_wait_steps")
DEFAULTS = {"kv_layout": "slots", "kv_block_size": None, "kv_cache_dtype": "auto", "cache_attention": "auto",
            "prefill_chunk": -1, "fused_kernels": True, "overlap": False, "programmatic_launch": True,
            "flash_decode_shares": None, "decode_gemv_rows": None, "decode_mma_rows": None,
            "prefill_wait_steps": None}


def run_name(path, result):
    differs = [f"{k}={result[k]}" for k in RUN_FLAGS if k in result and result[k] != DEFAULTS[k]]
    base = "main" if path.name == "agent.json" else path.stem.removeprefix("agent-")
    return base + (f" ({', '.join(differs)})" if differs else "")


def placement(r):
    """Runs a decode row, keys moved, prefix hit rate: what the paged layout's placement did; the
    prefill passes and their holds where the run held any (prefill_wait_steps)."""
    parts = []
    if r.get("block_runs") and r.get("decoded"):
        parts.append(f"{r['block_runs'] / r['decoded']:.2f} runs a row")
    if r.get("moved"):
        parts.append(f"{r['moved']:,} keys moved")
    if r.get("prefix_hit_rate"):
        parts.append(f"hit rate {r['prefix_hit_rate']:.3f}")
    if r.get("prefill_holds"):
        parts.append(f"{r['prefill_passes']:,} prefill passes, {r['prefill_holds']:,} held")
    return ", ".join(parts)


def rows_of(path):
    result = json.loads(path.read_text())
    name = run_name(path, result)
    for r in result.get("batch_64x512", []):
        yield name, f"64 x 512, repeat {r['repeat']}", f"{r['tokens'] / r['seconds']:,.0f} tok/s", placement(r)
    for key, label in (("agent_cached", "agent workload, prefix cache"),
                       ("agent_uncached", "agent workload, re-prefilling")):
        if key in result:
            r = result[key]
            yield name, label, f"{r['seconds']:.2f} s", placement(r)
            slope = r.get("attention_from_turns") or {}
            if slope.get("attention_bytes_per_s"):
                yield name, f"{label}: decode attention, from the turn times", \
                    f"{slope['attention_bytes_per_s'] / 1e12:.2f} TB/s", ""
            if slope.get("run_seconds_without_attention") is not None:
                yield name, f"{label}: the turns besides attention, from the turn times", \
                    f"{slope['run_seconds_without_attention']:.2f} s " \
                    f"({slope['turn_seconds_without_attention']:.3f} s a turn)", ""
            yield from host_rows(name, label, r)
            yield from step_rows(name, label, r.get("steps"))
    if "agent_speedup" in result:
        yield name, "prefix cache speedup", f"{result['agent_speedup']:.2f}x", ""
    if "long_131072" in result:
        r = result["long_131072"]
        yield name, "one sequence at 131,072: decode", f"{r['decode_tokens_per_s']:.1f} tok/s", placement(r)


def host_rows(name, label, r):
    """The host's side of a run (engine_stats): the time it took to launch the prefill passes, a
    pass, and the time it waited for the device's tokens. A pass launched in about its device time
    is bound by the host; a run that waits little is too."""
    if r.get("prefill_host_seconds") is None:
        return
    passes = r.get("prefill_passes") or 0
    each = f" ({r['prefill_host_seconds'] / passes * 1e3:.2f} ms a pass)" if passes else ""
    yield name, f"{label}: host time launching prefill passes", f"{r['prefill_host_seconds']:.2f} s{each}", \
        f"{passes:,} passes"
    if r.get("wait_seconds") is not None:
        yield name, f"{label}: host time waiting for the device", f"{r['wait_seconds']:.2f} s", ""


def step_rows(name, label, steps):
    """The rows of bench_agent.step_split: a decode step without its attention, attention's read
    rate, and the run's seconds by kind of step."""
    if not steps:
        return
    d, p = steps["decode_only"], steps["prefilling"]
    yield name, f"{label}: a decode step without attention, from the step times", \
        f"{steps['decode_step_seconds_without_attention'] * 1e6:,.0f} us", ""
    if steps.get("decode_attention_bytes_per_s"):
        yield name, f"{label}: decode attention, from the step times", \
            f"{steps['decode_attention_bytes_per_s'] / 1e12:.2f} TB/s", ""
    yield name, f"{label}: decode-only steps (attention + the rest)", \
        f"{d['seconds']:.2f} s ({d['attention_seconds']:.2f} + {d['rest_seconds']:.2f})", f"{d['steps']:,} steps"
    yield name, f"{label}: prefilling steps (beyond their decode)", \
        f"{p['seconds']:.2f} s ({p['seconds_beyond_decode']:.2f})", f"{p['steps']:,} steps, {p['tokens']:,.0f} tokens"
    if steps.get("outside_steps_seconds") is not None:
        yield name, f"{label}: the bench's own work between steps", f"{steps['outside_steps_seconds']:.2f} s", ""


def result_files(folder):
    """The call's bench JSONs: the A/B runs', then the main run's."""
    return sorted(folder.glob("agent-*.json")) + sorted(folder.glob("agent.json"))


# A workload's headline figure: (label, unit, value of a result or None).
HEADLINES = (
    ("64 x 512", "tok/s", lambda res: statistics.mean(r["tokens"] / r["seconds"] for r in res["batch_64x512"])
     if res.get("batch_64x512") else None),
    ("agent workload, prefix cache", "s",
     lambda res: res["agent_cached"]["seconds"] if "agent_cached" in res else None),
    ("one sequence at 131,072: decode", "tok/s",
     lambda res: res["long_131072"]["decode_tokens_per_s"] if "long_131072" in res else None),
)
ROUND_FILE = re.compile(r"agent-(\d+)-(\w+)-r(\d+)")


def round_table(folder):
    """Each side's figure per round of a ROUNDS=N patch A/B, its median and the median over side
    a's (a run's rounds whose JSON lacks the figure, stopped by the cap, are left out)."""
    figures = {}  # (run, workload) -> side -> [(round, value)]
    for path in sorted(folder.glob("agent-*-r*.json")):
        m = ROUND_FILE.fullmatch(path.stem)
        if not m:
            continue
        result = json.loads(path.read_text())
        for label, unit, value_of in HEADLINES:
            value = value_of(result)
            if value is not None:
                sides = figures.setdefault((int(m[1]), label, unit), {})
                sides.setdefault(m[2], []).append((int(m[3]), value))
    if not figures:
        return []
    lines = ["", "| run | workload | side | rounds | median | against a |", "|---|---|---|---|---|---|"]
    for (run, label, unit), sides in sorted(figures.items()):
        medians = {side: statistics.median(v for _, v in values) for side, values in sides.items()}
        for side in sorted(sides, key=lambda s: (s != "a", s)):
            each = ", ".join(f"{v:,.2f}" for _, v in sorted(sides[side]))
            ratio = f"{medians[side] / medians['a']:.3f}x" if "a" in medians and medians["a"] else ""
            lines.append(f"| {run} | {label} | {side} | {each} | {medians[side]:,.2f} {unit} | {ratio} |")
    return lines


def summarize(folder):
    lines = ["| run | workload | figure | placement |", "|---|---|---|---|"]
    for path in result_files(folder):
        lines += [f"| {' | '.join(row)} |" for row in rows_of(path)]
    return "\n".join(lines + round_table(folder))


def short_kernel(name):
    """A kernel's name without its return type, parameters and namespaces: `fp8_split_kernel<
    __nv_bfloat16, 64>` of the profiler's full signature."""
    name = re.sub(r"^void ", "", name).replace("(anonymous namespace)::", "")
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):  # the parameter list: the first "(" outside template brackets
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "(" and depth == 0:
            cut = i
            break
    name = re.sub(r"(\w+::)+", "", name[:cut])
    return name if len(name) <= 72 else name[:69] + "..."


def kernel_tables(folder):
    lines = []
    for path in result_files(folder):
        result = json.loads(path.read_text())
        for key, p in result.items():
            if not key.startswith("profile_") or not isinstance(p, dict) or "kernels" not in p:
                continue
            busy = p.get("device_busy_us_per_step") or 0.0
            heading = (f"**{run_name(path, result)}, {key}**: {p.get('wall_us_per_step', 0):,.1f} us wall, "
                       f"{busy:,.1f} us busy a step")
            span = p.get("device_span_us_per_step")
            if span is None:  # profiles before the timeline: summed durations only
                lines += ["", f"{heading}, {p.get('device_events_per_step', 0)} events", "",
                          "| kernel | calls a step | us a step | of busy |", "|---|---|---|---|"]
                for k in sorted(p["kernels"], key=lambda k: -k["us_per_step"]):
                    share = f"{100 * k['us_per_step'] / busy:.1f}%" if busy else ""
                    lines.append(f"| {short_kernel(k['name'])} | {k['calls_per_step']} | {k['us_per_step']:,.1f} "
                                 f"| {share} |")
                continue
            # With the timeline: what each kernel adds to the step's device time, most first (with
            # programmatic launch the summed durations overlap; docs: policy_model_tool's profile_steps).
            lines += ["", f"{heading} ({span:,.1f} us counted once), {p.get('device_events_per_step', 0)} events", "",
                      "| kernel | calls a step | us a step | adds a step | of the step's device time |",
                      "|---|---|---|---|---|"]
            for k in sorted(p["kernels"], key=lambda k: -k.get("us_added_per_step", 0.0)):
                added = k.get("us_added_per_step", 0.0)
                share = f"{100 * added / span:.1f}%" if span else ""
                lines.append(f"| {short_kernel(k['name'])} | {k['calls_per_step']} | {k['us_per_step']:,.1f} "
                             f"| {added:,.1f} | {share} |")
    return "\n".join(lines[1:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=pathlib.Path)
    parser.add_argument("--kernels", action="store_true", help="the profiled steps' kernels instead of the figures")
    args = parser.parse_args()
    if not args.folder.is_dir():
        sys.exit(f"summarize: {args.folder} is not a folder")
    print(kernel_tables(args.folder) if args.kernels else summarize(args.folder))


if __name__ == "__main__":
    main()
