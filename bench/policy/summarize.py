#!/usr/bin/env python3
"""The figures of one `run_h200.sh` call as a markdown table, one row per measured workload.

    python3 bench/policy/summarize.py DIR

DIR holds what the call returned (unpacked): `agent.json` from the main bench and
`agent-{batch,long,cached}-K.json` from its A/B runs. Each row names the run (`main`, or the A/B
file with the flags that differ from the engine's defaults), the workload and its figure beside
the placement counts of the paged layout (runs a decode row, keys moved, prefix hit rate). A run
stopped by its cap leaves no JSON figure for the workload it was in; it is left out.
"""
import argparse
import json
import pathlib
import sys

# Flags bench_agent.py records whose values, when set, tell A/B runs apart.
RUN_FLAGS = ("kv_layout", "kv_block_size", "kv_cache_dtype", "cache_attention", "prefill_chunk", "fused_kernels",
             "overlap", "programmatic_launch", "flash_decode_shares", "decode_gemv_rows")
DEFAULTS = {"kv_layout": "slots", "kv_block_size": None, "kv_cache_dtype": "auto", "cache_attention": "auto",
            "prefill_chunk": -1, "fused_kernels": True, "overlap": False, "programmatic_launch": True,
            "flash_decode_shares": None, "decode_gemv_rows": None}


def run_name(path, result):
    differs = [f"{k}={result[k]}" for k in RUN_FLAGS if k in result and result[k] != DEFAULTS[k]]
    base = "main" if path.name == "agent.json" else path.stem.removeprefix("agent-")
    return base + (f" ({', '.join(differs)})" if differs else "")


def placement(r):
    """Runs a decode row, keys moved, prefix hit rate: what the paged layout's placement did."""
    parts = []
    if r.get("block_runs") and r.get("decoded"):
        parts.append(f"{r['block_runs'] / r['decoded']:.2f} runs a row")
    if r.get("moved"):
        parts.append(f"{r['moved']:,} keys moved")
    if r.get("prefix_hit_rate"):
        parts.append(f"hit rate {r['prefix_hit_rate']:.3f}")
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
    if "agent_speedup" in result:
        yield name, "prefix cache speedup", f"{result['agent_speedup']:.2f}x", ""
    if "long_131072" in result:
        r = result["long_131072"]
        yield name, "one sequence at 131,072: decode", f"{r['decode_tokens_per_s']:.1f} tok/s", placement(r)


def summarize(folder):
    files = sorted(folder.glob("agent-*.json")) + sorted(folder.glob("agent.json"))
    lines = ["| run | workload | figure | placement |", "|---|---|---|---|"]
    for path in files:
        lines += [f"| {' | '.join(row)} |" for row in rows_of(path)]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=pathlib.Path)
    args = parser.parse_args()
    if not args.folder.is_dir():
        sys.exit(f"summarize: {args.folder} is not a folder")
    print(summarize(args.folder))


if __name__ == "__main__":
    main()
