#!/usr/bin/env python3
"""Agent-shaped generation on a CUDA GPU: the prefix cache, long contexts, and the bounds.

Builds policy_model_tool (as bench_generate.py does), writes a random Qwen2-0.5B-shaped bf16
checkpoint with 131,072 positions, and in one run measures:
  1. `bench`: 64 sequences x 512 new tokens (the workload of bench_generate.py), twice on one
     engine (the second run finds every CUDA graph captured);
  2. `agent-bench`: 64 conversations x 30 turns, a 1,000-token first prompt, each turn a
     300-token sampled reply and a 500-token observation; with the prefix cache and without it
     (every turn re-prefills the whole conversation, the engine before the cache);
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


def make_model(path):
    config = transformers.Qwen2Config(
        **SHAPE, max_position_embeddings=CONTEXT,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, tie_word_embeddings=True,
        bos_token_id=None, eos_token_id=None, pad_token_id=None)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.Qwen2ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(path)
    return sum(p.numel() for p in model.parameters())


def run(tool, *args, timeout=900):
    """The tool's JSON lines, or None when it ran past `timeout` seconds."""
    try:
        proc = subprocess.run([str(tool), *map(str, args)], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if proc.returncode != 0:
        sys.exit(f"policy_model_tool {args[0]} failed:\n{proc.stderr}")
    return [json.loads(line) for line in proc.stdout.strip().splitlines() if line.startswith("{")]


def bounds(result, params):
    """Lower bounds in seconds: decode by bandwidth, prefill by bf16 throughput."""
    head_dim = SHAPE["hidden_size"] // SHAPE["num_attention_heads"]
    kv_bytes_per_key = SHAPE["num_hidden_layers"] * 2 * SHAPE["num_key_value_heads"] * head_dim * 2
    decode = (result["decode_steps"] * params * 2 + result["attended_keys"] * kv_bytes_per_key) / HBM_BYTES_PER_S
    prefill = 2 * params * result["prefilled"] / BF16_FLOP_PER_S
    return {"decode_bound_s": decode, "prefill_bound_s": prefill, "bound_s": decode + prefill,
            "fraction_of_bound": (decode + prefill) / result["seconds"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=pathlib.Path, default=REPO / "build-bench")
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--cache-attention", default="auto", help="the engine's cache attention for every run")
    parser.add_argument("--compare", nargs="*", default=[],
                        help="other cache attentions to run the cached agent workload and the long sequence with")
    parser.add_argument("--skip-uncached", action="store_true", help="leave out the re-prefilling run")
    parser.add_argument("--uncached-limit", type=float, default=900, help="seconds for the re-prefilling run")
    parser.add_argument("--uncached-limit-factor", type=float, default=0,
                        help="if > 0, limit the re-prefilling run to this many times the cached run's seconds "
                             "(a run stopped there proves at least that speedup)")
    parser.add_argument("--deadline", type=float, default=0,
                        help="if > 0, a Unix time by which the re-prefilling run must stop (it is the last run)")
    parser.add_argument("--out", type=pathlib.Path)
    args = parser.parse_args()
    tool = bench_generate.build_tool(args.build_dir)
    common = ["--device", "cuda", "--dtype", "bfloat16", "--vocab", SHAPE["vocab_size"]]
    out = {"date": datetime.date.today().isoformat(), "gpu": torch.cuda.get_device_name(),
           "torch": torch.__version__, "host": platform.node(), "cache_attention": args.cache_attention}

    def save():
        if args.out:
            args.out.write_text(json.dumps(out, indent=1) + "\n")

    with tempfile.TemporaryDirectory() as tmp:
        params = make_model(tmp)
        out["params"] = params
        agent = ["agent-bench", "--model", tmp, *common, "--max-batch", args.episodes, "--max-context", 32768,
                 "--episodes", args.episodes, "--turns", args.turns, "--system", 1000, "--obs", 500, "--reply", 300]
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
        batch = run(tool, "bench", "--model", tmp, *common, "--max-batch", 64, "--max-context", 552,
                    "--random-prompts", 64, "--prompt-len", 32, "--max-new-tokens", 512, "--temperature", 1,
                    "--repeat", 2, "--cache-attention", mode)
        report("batch_64x512", [dict(r, tokens_per_s=r["tokens"] / r["seconds"], **bounds(r, params)) for r in batch])
        cached = run(tool, *agent, "--cache-attention", mode)[0]
        report("agent_cached", dict(cached, **bounds(cached, params)))
        report("long_131072", long_result(mode))
        for other in args.compare:
            report("long_131072_" + other, long_result(other))
            c = run(tool, *agent, "--cache-attention", other)[0]
            report("agent_cached_" + other, dict(c, **bounds(c, params)))
        if not args.skip_uncached:
            # Bounded: when it runs past the limit, the limit is a lower bound of its time.
            limit = args.uncached_limit
            if args.uncached_limit_factor > 0:
                limit = min(limit, args.uncached_limit_factor * cached["seconds"])
            if args.deadline > 0:
                limit = min(limit, args.deadline - time.time())
            plain = run(tool, *agent, "--no-prefix-cache", "--cache-attention", mode, timeout=limit) if limit >= 10 else None
            if limit < 10:
                report("agent_uncached", {"skipped": f"{limit:.0f} s left before the deadline"})
            elif plain is None:
                out["agent_speedup_at_least"] = limit / cached["seconds"]
                report("agent_uncached", {"timed_out_after_s": limit})
            else:
                out["agent_speedup"] = plain[0]["seconds"] / cached["seconds"]
                report("agent_uncached", dict(plain[0], **bounds(plain[0], params)))
    text = json.dumps(out, indent=1)
    print(text)
    save()


if __name__ == "__main__":
    main()
