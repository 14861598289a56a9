#!/usr/bin/env python3
"""Agent-shaped generation on a CUDA GPU: the prefix cache, long contexts, and the bounds.

Builds policy_model_tool (as bench_generate.py does), writes a random Qwen2-0.5B-shaped bf16
checkpoint with 131,072 positions, and in one run measures:
  1. `bench`: 64 sequences x 512 new tokens (the workload of bench_generate.py), twice on one
     engine (the second run finds every CUDA graph captured);
  2. `agent-bench`: 64 conversations x 30 turns, a 1,000-token first prompt, each turn a
     300-token sampled reply and a 500-token observation; with the prefix cache and without it
     (every turn re-prefills the whole conversation, the engine before the cache);
     (`--uncached-sample-turns`: the prefills of some turns of the re-prefilling run timed alone,
     which bound the whole run's time from below when it is too long to run to the end);
  3. one sequence decoding at 131,072 tokens of context (a 130,560-token prompt, chunked prefill);
  all with the engine's --cache-attention (auto: flash on the GPU), --compare runs others too.
Each figure is printed beside a lower bound of the same workload on this GPU: decode steps
bound by memory bandwidth (every weight and every attended key read once per step), prefill
bound by bf16 tensor-core throughput. Prints one JSON object (and writes it to --out).
"""
import argparse
import datetime
import json
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

import torch
import transformers

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_generate  # noqa: E402  (build_tool, load_hf)

REPO = pathlib.Path(__file__).resolve().parents[2]
# Rationale: H200 SXM data sheet figures (HBM3e bandwidth, dense bf16 tensor throughput).
HBM_BYTES_PER_S = 4.8e12
BF16_FLOP_PER_S = 989e12
SHAPE = dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
             num_attention_heads=14, num_key_value_heads=2)
CONTEXT = 131072
KV_ELEMENT_BYTES = 2  # bytes of a cached key or value element: 2 (bf16), 1 (--kv-cache-dtype fp8_e4m3)


# --dry-run: the script's logic on a CPU with a tiny model (no figure of it means anything).
DRY_SHAPE = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2)
DRY_CONTEXT = 2048


def make_model(path, device="cuda", dtype=torch.bfloat16):
    config = transformers.Qwen2Config(
        **SHAPE, max_position_embeddings=CONTEXT,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, tie_word_embeddings=True,
        bos_token_id=None, eos_token_id=None, pad_token_id=None)
    torch.manual_seed(0)
    with torch.device(device):
        model = transformers.Qwen2ForCausalLM(config).to(dtype)
    model.save_pretrained(path)
    return sum(p.numel() for p in model.parameters())


def turn_lines(stderr):
    """agent-bench's progress lines {"turn": j, "seconds": s} from its stderr (str or bytes)."""
    if isinstance(stderr, bytes):
        stderr = stderr.decode(errors="replace")
    return [json.loads(line) for line in (stderr or "").splitlines() if line.startswith('{"turn"')]


def run(tool, *args, timeout=900, progress=None):
    """The tool's JSON lines, or None when it ran past `timeout` seconds. `progress`: a list that
    receives agent-bench's per-turn progress, also from a run stopped by the timeout."""
    try:
        proc = subprocess.run([str(tool), *map(str, args)], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as stopped:
        if progress is not None:
            progress.extend(turn_lines(stopped.stderr))
        return None
    if proc.returncode != 0:
        sys.exit(f"policy_model_tool {args[0]} failed:\n{proc.stderr}")
    if progress is not None:
        progress.extend(turn_lines(proc.stderr))
    return [json.loads(line) for line in proc.stdout.strip().splitlines() if line.startswith("{")]


def sampled_turns_bound(costs, turns):
    """A lower bound of the re-prefilling run's seconds from the prefills of some turns timed alone.

    Without the prefix cache every turn re-prefills its whole prompt (the first prompt plus j - 1
    replies and observations, for each of the 64 episodes), in chunks of the same size, whatever
    the turns around it do. Every step of the whole run runs its prefill pass and then more (the
    decode pass), so the whole run takes at least the sum of its turns' prefills (the decode steps
    are not counted at all: turns overlap there, one episode's next prefill sharing steps with
    another's decoding, so timing whole turns alone would not bound it). A later turn's prompts are
    longer, so its prefill costs at least an earlier one's: every turn j is bounded below by the
    latest timed turn <= j, turns before the first timed one by 0. `costs`: {turn: seconds}.
    Returns (bound, monotone): monotone says whether the timed turns are non-decreasing (the
    premise, checked on the measurements).
    """
    timed = sorted(costs)
    bound = 0.0
    for j in range(1, turns + 1):
        below = [t for t in timed if t <= j]
        bound += costs[below[-1]] if below else 0.0
    values = [costs[t] for t in timed]
    return bound, all(a <= b for a, b in zip(values, values[1:]))


def kv_bytes_per_key():
    """Bytes of one position's keys and values over every layer and KV head."""
    head_dim = SHAPE["hidden_size"] // SHAPE["num_attention_heads"]
    return SHAPE["num_hidden_layers"] * 2 * SHAPE["num_key_value_heads"] * head_dim * KV_ELEMENT_BYTES


def turn_slope(turns, episodes, obs, reply, system):
    """How fast decode reads the keys it adds, from the cached run's per-turn times alone.

    Each turn adds obs + reply positions to every episode, so each of a turn's ~reply decode steps
    reads episodes x (obs + reply) keys more than the turn before's: reply x episodes x (obs +
    reply) key bytes more a turn. The least-squares slope of the turns' durations over turns 2..T-1
    (turn 1 holds the first prompt and the graph captures; the last turn is cut short) is the
    seconds those bytes add, so their ratio is the decode attention's bandwidth at the run's batch,
    whatever the rest of the step costs and whether or not kernels overlap. Premise: the growth is
    decode attention's (a turn's prefill attends a longer context too, at tensor-core speed).
    The same line taken back to a turn whose steps attend no keys is what a turn costs besides
    attention (`turn_seconds_without_attention`: its reply's decode steps without attention, its
    prefill, the host): a turn j of the fit decodes reply steps over system + (j - 1) x (obs +
    reply) + reply / 2 keys on average. None for fewer than 5 turns (3 to fit)."""
    seconds = [b["seconds"] - a["seconds"] for a, b in zip([{"seconds": 0.0}] + turns, turns)][1:-1]
    if len(seconds) < 3:
        return None
    xs = range(len(seconds))
    mx, my = sum(xs) / len(seconds), sum(seconds) / len(seconds)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, seconds)) / sum((x - mx) ** 2 for x in xs)
    added = reply * episodes * (obs + reply) * kv_bytes_per_key()
    # The fit's first turn is turn 2: its steps attend system + (obs + reply) + reply / 2 keys.
    without = my - slope * mx - slope * (system + (obs + reply) + reply / 2) / (obs + reply)
    return {"turn_seconds_slope": slope, "key_bytes_added_per_turn": added,
            "attention_bytes_per_s": added / slope if slope > 0 else None,
            "turn_seconds_without_attention": without, "run_seconds_without_attention": without * len(turns)}


def step_split(times, seconds=None):
    """Where a cached run's wall time went, from agent-bench's `step_times` (each step() call's wall
    time, summed by what the step did).

    Decode-only steps: the least-squares line of seconds over the keys the step attended gives a
    step's cost without attention (its intercept: projections, small kernels, the LM head, sampling
    and the host between steps) and attention's read rate (its slope, as bytes). Prefilling steps:
    their seconds beyond what that line says their decode cost, i.e. what their prefill added.
    `seconds`: the run's; what no step() call holds (the bench's own work between them: results,
    the next prompts) is then `outside_steps_seconds`. None with fewer than 3 decode-only steps or
    no spread in their keys."""
    d, p, o = times["decode_only"], times["prefilling"], times["other"]
    n = d["steps"]
    if n < 3:
        return None
    mean_keys, mean_seconds = d["keys"] / n, d["seconds"] / n
    spread = d["keys_sq"] / n - mean_keys ** 2
    if spread <= 0:
        return None
    per_key = (d["keys_seconds"] / n - mean_keys * mean_seconds) / spread
    per_step = mean_seconds - per_key * mean_keys
    return {"decode_step_seconds_without_attention": per_step,
            "decode_attention_bytes_per_s": kv_bytes_per_key() / per_key if per_key > 0 else None,
            "decode_only": {"steps": n, "seconds": d["seconds"], "attention_seconds": per_key * d["keys"],
                            "rest_seconds": per_step * n},
            "prefilling": {"steps": p["steps"], "seconds": p["seconds"], "tokens": p["tokens"],
                           "seconds_beyond_decode": p["seconds"] - per_step * p["steps"] - per_key * p["keys"]},
            "other": {"steps": o["steps"], "seconds": o["seconds"]},
            "outside_steps_seconds": None if seconds is None else seconds - d["seconds"] - p["seconds"] - o["seconds"]}


def bounds(result, params):
    """Lower bounds in seconds: decode by bandwidth, prefill by bf16 throughput."""
    decode = (result["decode_steps"] * params * 2 + result["attended_keys"] * kv_bytes_per_key()) / HBM_BYTES_PER_S
    prefill = 2 * params * result["prefilled"] / BF16_FLOP_PER_S
    return {"decode_bound_s": decode, "prefill_bound_s": prefill, "bound_s": decode + prefill,
            "fraction_of_bound": (decode + prefill) / result["seconds"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=pathlib.Path, default=REPO / "build-bench")
    parser.add_argument("--tool", type=pathlib.Path,
                        help="a built policy_model_tool to run instead of building --build-dir's (an A/B of two "
                             "builds of one tree: bench/policy/run_patch_ab.sh)")
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--cache-attention", default="auto", help="the engine's cache attention for every run")
    parser.add_argument("--kv-layout", default="slots", choices=["slots", "paged"],
                        help="the engine's KV layout for every run")
    parser.add_argument("--kv-block-size", type=int, default=None,
                        help="paged: tokens per block for every run (default: the engine's)")
    parser.add_argument("--kv-cache-dtype", default="auto", choices=["auto", "fp8_e4m3"],
                        help="the engine's KV cache element type for every run (fp8_e4m3: 1 byte a key element; "
                             "the bounds count the bytes it reads)")
    parser.add_argument("--compare", nargs="*", default=[],
                        help="other cache attentions to run the cached agent workload and the long sequence with")
    parser.add_argument("--skip-uncached", action="store_true", help="leave out the re-prefilling run")
    parser.add_argument("--uncached-limit", type=float, default=900, help="seconds for the re-prefilling run")
    parser.add_argument("--uncached-limit-factor", type=float, default=0,
                        help="if > 0, limit the re-prefilling run to this many times the cached run's seconds "
                             "(a run stopped there proves at least that speedup)")
    parser.add_argument("--deadline", type=float, default=0,
                        help="if > 0, a Unix time by which the re-prefilling runs must stop (they are the last runs)")
    parser.add_argument("--uncached-sample-turns", default="",
                        help="comma-separated turns whose prefills to time alone without the prefix cache "
                             "(e.g. 5,10,15,20,25,30): summed over the turns they bound from below, a lower "
                             "bound of the whole re-prefilling run (see sampled_turns_bound); they run before "
                             "the whole run, which then gets what is left before the deadline")
    parser.add_argument("--skip", nargs="*", action="extend", default=[], choices=["batch", "cached", "long"],
                        help="leave out these runs (for a dry run of the rest); repeated, the runs of every one")
    parser.add_argument("--out", type=pathlib.Path)
    parser.add_argument("--dry-run", action="store_true",
                        help="CPU, fp32, a tiny model, small contexts and --episodes/--turns as given: checks the "
                             "script end to end (with --build-dir an existing build)")
    parser.add_argument("--profile-out", type=pathlib.Path,
                        help="a directory: the 64-row bench (130 new tokens) again with its steps 101-120 under the "
                             "profiler, with CUDA graphs and without (profile-graphs.json, profile-eager.json), and "
                             "the 131k sequence's steps 101-120 (profile-graphs-131072.json)")
    parser.add_argument("--profile-keys", type=int, default=0,
                        help="with --profile-out: also profile the 64-row step with prompts of this many tokens "
                             "(profile-graphs-long.json)")
    parser.add_argument("--profile-turn", type=int, default=0,
                        help="with --profile-out: also profile 20 steps of the cached workload as turn J + 1's "
                             "prompts arrive over turn J's cached keys (agent-bench --from-turn J --turns J + 1: "
                             "prefilling steps among decode steps; profile-cached-turn.json); 0: none")
    parser.add_argument("--prefill-chunk", type=int, default=-1,
                        help="the engine's prefill_chunk (tokens prefilled per step) for every run; -1: its default")
    parser.add_argument("--no-fused-kernels", action="store_true",
                        help="every run with the ATen composites instead of policy/model/fused_ops.hpp's kernels")
    parser.add_argument("--no-programmatic-launch", action="store_true",
                        help="every run without engine_options::programmatic_launch (on by default: the fused "
                             "kernels start during the tail of the kernel before them)")
    parser.add_argument("--overlap", action="store_true",
                        help="every run with engine_options::overlap (a decode step launched before the last one's "
                             "tokens reach the host)")
    parser.add_argument("--flash-decode-shares", type=int,
                        help="every run with engine_options::flash_decode_shares (flash decode of few long rows "
                             "cut into shares making this many sequences; 0: no cut; default: the engine's)")
    parser.add_argument("--decode-gemv-rows", type=int,
                        help="every run with engine_options::decode_gemv_rows (decode steps of at most this many "
                             "rows project with matrix-vector kernels; 0: cuBLAS; default: the engine's)")
    parser.add_argument("--prefill-wait-steps", type=int,
                        help="every run with engine_options::prefill_wait_steps (prompts arriving while others "
                             "decode held up to this many steps for a fuller prefill pass; 0: none; default: the "
                             "engine's)")
    parser.add_argument("--decode-mma-rows", type=int,
                        help="every run with engine_options::decode_mma_rows (decode steps of more rows than "
                             "decode_gemv_rows and at most this many project with tensor-core kernels of our own; "
                             "0: cuBLAS; default: the engine's)")
    parser.add_argument("--system", type=int, default=1000, help="tokens of each episode's first prompt")
    parser.add_argument("--obs", type=int, default=500, help="tokens of each observation")
    parser.add_argument("--reply", type=int, default=300, help="tokens of each reply")
    args = parser.parse_args()
    global SHAPE, CONTEXT, KV_ELEMENT_BYTES
    KV_ELEMENT_BYTES = 1 if args.kv_cache_dtype == "fp8_e4m3" else 2
    device, dtype, agent_context, batch_context = "cuda", "bfloat16", 32768, 552
    if args.dry_run:
        SHAPE, CONTEXT, device, dtype, agent_context = DRY_SHAPE, DRY_CONTEXT, "cpu", "float32", DRY_CONTEXT
        dtype = "bfloat16" if args.kv_cache_dtype == "fp8_e4m3" else dtype  # e4m3 rounds bf16 keys
    # A dry run takes the tool as built (the shared build tree is built by its owners' commands).
    if args.tool is not None:
        if not args.tool.is_file():
            sys.exit(f"--tool {args.tool}: no such file")
        tool = args.tool
    elif args.dry_run:
        tool = args.build_dir / "policy/model/policy_model_tool"
    else:
        tool = bench_generate.build_tool(args.build_dir)
    layout = ["--device", device, "--dtype", dtype, "--vocab", SHAPE["vocab_size"], "--kv-layout", args.kv_layout]
    layout += ["--kv-block-size", args.kv_block_size] if args.kv_block_size is not None else []
    layout += ["--kv-cache-dtype", args.kv_cache_dtype] if args.kv_cache_dtype != "auto" else []
    layout += ["--no-fused-kernels"] if args.no_fused_kernels else []
    layout += ["--overlap"] if args.overlap else []
    layout += ["--no-programmatic-launch"] if args.no_programmatic_launch else []
    layout += ["--flash-decode-shares", args.flash_decode_shares] if args.flash_decode_shares is not None else []
    layout += ["--decode-gemv-rows", args.decode_gemv_rows] if args.decode_gemv_rows is not None else []
    layout += ["--decode-mma-rows", args.decode_mma_rows] if args.decode_mma_rows is not None else []
    layout += ["--prefill-wait-steps", args.prefill_wait_steps] if args.prefill_wait_steps is not None else []
    common = layout + (["--prefill-chunk", args.prefill_chunk] if args.prefill_chunk >= 0 else [])
    out = {"date": datetime.date.today().isoformat(),
           "gpu": torch.cuda.get_device_name() if device == "cuda" else "none (dry run)",
           "torch": torch.__version__, "host": platform.node(), "cache_attention": args.cache_attention,
           "kv_layout": args.kv_layout, "kv_block_size": args.kv_block_size, "kv_cache_dtype": args.kv_cache_dtype,
           "prefill_chunk": args.prefill_chunk,
           "fused_kernels": not args.no_fused_kernels, "overlap": args.overlap,
           "programmatic_launch": not args.no_programmatic_launch,
           "flash_decode_shares": args.flash_decode_shares,
           "decode_gemv_rows": args.decode_gemv_rows, "decode_mma_rows": args.decode_mma_rows,
           "prefill_wait_steps": args.prefill_wait_steps}

    def save():
        if args.out:
            args.out.write_text(json.dumps(out, indent=1) + "\n")

    with tempfile.TemporaryDirectory() as tmp:
        params = make_model(tmp, device, torch.bfloat16 if dtype == "bfloat16" else torch.float32)
        out["params"] = params
        agent = ["agent-bench", "--model", tmp, *common, "--max-batch", args.episodes, "--max-context", agent_context,
                 "--episodes", args.episodes, "--turns", args.turns, "--system", args.system, "--obs", args.obs,
                 "--reply", args.reply]
        long_run = ["bench", "--model", tmp, *common, "--max-batch", 1, "--max-context", CONTEXT,
                    "--random-prompts", 1, "--prompt-len", CONTEXT - 512, "--max-new-tokens", 511, "--temperature", 1]

        def long_result(mode):
            r = run(tool, *long_run, "--cache-attention", mode)[0]
            r["decode_tokens_per_s"] = r["tokens"] / max(r["seconds"] - r["prefill_seconds"], 1e-9)
            return dict(r, **bounds(r, params))

        def report(key, value):
            out[key] = value
            print(json.dumps({key: value}), flush=True)
            save()

        mode = args.cache_attention
        if "batch" not in args.skip:
            batch = run(tool, "bench", "--model", tmp, *common, "--max-batch", 64, "--max-context", batch_context,
                        "--random-prompts", 64, "--prompt-len", 32, "--max-new-tokens", 512, "--temperature", 1,
                        "--repeat", 2, "--cache-attention", mode)
            report("batch_64x512",
                   [dict(r, tokens_per_s=r["tokens"] / r["seconds"], **bounds(r, params)) for r in batch])
        if args.profile_out:
            args.profile_out.mkdir(parents=True, exist_ok=True)
            for name, extra in (("graphs", []), ("eager", ["--no-cuda-graphs"])):
                path = args.profile_out / f"profile-{name}.json"
                run(tool, "bench", "--model", tmp, *common, "--max-batch", 64, "--max-context", batch_context,
                    "--random-prompts", 64, "--prompt-len", 32, "--max-new-tokens", 130, "--temperature", 1,
                    "--cache-attention", mode, "--profile", path, "--profile-skip", 100, "--profile-steps", 20, *extra)
                summary = json.loads(path.read_text())
                summary["kernels"] = summary["kernels"][:12]
                report("profile_64_rows_" + name, summary)
            if args.profile_keys > 0:
                # The same 64-row step at an agent episode's late context: where decode time goes
                # when the attended keys, not the weights, are most of what a step reads.
                path = args.profile_out / "profile-graphs-long.json"
                # One prompt prefilled per step (64 steps), so steps 75-94 decode all 64 rows.
                run(tool, "bench", "--model", tmp, *layout, "--max-batch", 64,
                    "--max-context", args.profile_keys + 128, "--random-prompts", 64, "--prompt-len",
                    args.profile_keys, "--prefill-chunk", args.profile_keys, "--max-new-tokens", 100,
                    "--temperature", 1, "--cache-attention", mode, "--profile", path, "--profile-skip", 74,
                    "--profile-steps", 20)
                summary = json.loads(path.read_text())
                summary["kernels"] = summary["kernels"][:16]
                report(f"profile_64_rows_{args.profile_keys}_keys", summary)
            if args.profile_turn > 0:
                # Prefill passes as the cached run has them (over a conversation's cached keys,
                # among decode steps), under the profiler: a pass's kernels and the host's gaps.
                path = args.profile_out / "profile-cached-turn.json"
                run(tool, *agent[:agent.index("--turns")], "--turns", args.profile_turn + 1, "--from-turn",
                    args.profile_turn, *agent[agent.index("--system"):], "--cache-attention", mode, "--profile", path,
                    "--profile-after-turn", args.profile_turn, "--profile-steps", 20)
                summary = json.loads(path.read_text())
                summary["kernels"] = summary["kernels"][:16]
                report(f"profile_cached_turn_{args.profile_turn + 1}", summary)
        cached = None
        if "cached" not in args.skip:
            turns = []
            cached = run(tool, *agent, "--cache-attention", mode, progress=turns)[0]
            report("agent_cached", dict(cached, turns=turns, **bounds(cached, params),
                                        attention_from_turns=turn_slope(turns, args.episodes, args.obs, args.reply, args.system),
                                        steps=step_split(cached["step_times"], cached["seconds"])
                                        if "step_times" in cached else None))
        if "long" not in args.skip:
            report("long_131072", long_result(mode))
            if args.profile_out:
                # The one-row step at 131k keys (steps 101-120: past the 64 prefill chunks of 2,048).
                path = args.profile_out / "profile-graphs-131072.json"
                run(tool, *long_run, "--cache-attention", mode, "--profile", path, "--profile-steps", 20)
                summary = json.loads(path.read_text())
                summary["kernels"] = summary["kernels"][:16]
                report("profile_1_row_131072_keys", summary)
        for other in args.compare:
            report("long_131072_" + other, long_result(other))
            c = run(tool, *agent, "--cache-attention", other)[0]
            report("agent_cached_" + other, dict(c, **bounds(c, params)))

        def left(limit):
            return min(limit, args.deadline - time.time()) if args.deadline > 0 else limit

        if args.uncached_sample_turns:
            # Each sampled turn's prefills alone on a fresh engine (graph captures, if any, taken off).
            costs, runs = {}, {}
            for j in sorted({int(x) for x in args.uncached_sample_turns.split(",")}):
                limit = left(args.uncached_limit)
                r = run(tool, *agent, "--no-prefix-cache", "--cache-attention", mode, "--from-turn", j,
                        "--turns", j, "--prefill-only", timeout=limit) if limit >= 5 else None
                if r is None:
                    runs[j] = {"stopped": f"{limit:.0f} s left before the deadline"}
                    continue
                runs[j] = dict(r[0], **bounds(r[0], params))
                costs[j] = r[0]["seconds"] - r[0]["graph_capture_seconds"]
            bound, monotone = sampled_turns_bound(costs, args.turns)
            entry = {"turns_timed_alone": runs, "turn_seconds": costs, "timed_turns_non_decreasing": monotone,
                     "lower_bound_s": bound}
            if cached is not None and costs and monotone:
                out["agent_speedup_at_least_sampled"] = bound / cached["seconds"]
            report("agent_uncached_sampled", entry)
        if not args.skip_uncached:
            # Bounded: when it runs past the limit, the limit is a lower bound of its time.
            limit = args.uncached_limit
            if args.uncached_limit_factor > 0 and cached is not None:
                limit = min(limit, args.uncached_limit_factor * cached["seconds"])
            limit = left(limit)
            turns = []
            plain = run(tool, *agent, "--no-prefix-cache", "--cache-attention", mode, timeout=limit,
                        progress=turns) if limit >= 10 else None
            if limit < 10:
                report("agent_uncached", {"skipped": f"{limit:.0f} s left before the deadline"})
            elif plain is None:
                if cached is not None:
                    out["agent_speedup_at_least"] = limit / cached["seconds"]
                report("agent_uncached", {"timed_out_after_s": limit, "turns": turns})
            else:
                if cached is not None:
                    out["agent_speedup"] = plain[0]["seconds"] / cached["seconds"]
                report("agent_uncached", dict(plain[0], turns=turns, **bounds(plain[0], params)))
    text = json.dumps(out, indent=1)
    print(text)
    save()


if __name__ == "__main__":
    main()
