#!/usr/bin/env python3
"""The generation engine before the KV cache was kept across turns, on the agent workload.

Issue 15 measures the engine against "today's re-prefilling engine": the engine as it stood on
2026-12-01, before the prefix cache (commit a0d4fec, the parent of 0655ffb), where every turn of
an episode is a new request that prefills the whole conversation again. This script builds that
tree's policy_model_tool and bench/policy/baseline/agent_workload.cpp (the workload of today's
`policy_model_tool agent-bench`, written against the engine interface both trees share) and runs,
on the same random Qwen2-0.5B-shaped bf16 checkpoint as bench_agent.py:
  1. the 64 x 512 bench as bench_generate.py ran it then (the 8,825 tokens/s of 2026-12-01);
  2. the agent workload, 64 episodes x 30 turns (1,000-token first prompt, 300-token sampled
     replies, 500-token observations), until it ends or --limit seconds; a run stopped at the
     limit reports how many turns it finished, and the limit bounds its time from below.
Prints one JSON object (and writes it to --out).

    git archive a0d4fec CMakeLists.txt cmake policy learner tests | tar -x -C SRC
    python3 bench/policy/bench_baseline.py --source SRC --build-dir BUILD --out baseline.json
"""
import argparse
import datetime
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_agent  # noqa: E402  (make_model, turn_lines, SHAPE)
import bench_generate  # noqa: E402  (build_tool)

HERE = pathlib.Path(__file__).resolve().parent
DRIVER = HERE / "baseline" / "agent_workload.cpp"
CMAKE_LINES = """
# Added by bench/policy/bench_baseline.py: the agent workload against this tree's engine.
add_executable(agent_workload agent_workload.cpp)
target_link_libraries(agent_workload PRIVATE caf_agent_policy_model)
"""


def build(source, build_dir):
    """Builds policy_model_tool and agent_workload in `source` (a copy of an older tree)."""
    model_dir = source / "policy" / "model"
    shutil.copy(DRIVER, model_dir / "agent_workload.cpp")
    cmake_lists = model_dir / "CMakeLists.txt"
    if "agent_workload" not in cmake_lists.read_text():
        cmake_lists.write_text(cmake_lists.read_text() + CMAKE_LINES)
    tool = bench_generate.build_tool(build_dir, source, ("policy_model_tool", "agent_workload"))
    return tool, build_dir / "policy/model/agent_workload"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=pathlib.Path, required=True, help="the older tree (git archive of it)")
    parser.add_argument("--build-dir", type=pathlib.Path, required=True)
    parser.add_argument("--limit", type=float, default=400, help="seconds for the agent workload")
    parser.add_argument("--deadline", type=float, default=0,
                        help="if > 0, a Unix time by which the agent workload must stop (instead of --limit)")
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--out", type=pathlib.Path)
    parser.add_argument("--dry-run", action="store_true",
                        help="CPU, fp32, a tiny model and small contexts: checks the script end to end")
    args = parser.parse_args()
    device, dtype, context = "cuda", "bfloat16", 32768
    system, obs, reply = 1000, 500, 300
    if args.dry_run:
        bench_agent.SHAPE, device, dtype, context = bench_agent.DRY_SHAPE, "cpu", "float32", 2048
        system, obs, reply = 100, 20, 10
    tool, driver = build(args.source.resolve(), args.build_dir.resolve())
    out = {"date": datetime.date.today().isoformat(), "source": str(args.source),
           "gpu": torch.cuda.get_device_name() if device == "cuda" else "none (dry run)", "torch": torch.__version__}

    def save():
        if args.out:
            args.out.write_text(json.dumps(out, indent=1) + "\n")

    with tempfile.TemporaryDirectory() as tmp:
        params = bench_agent.make_model(tmp, device, torch.bfloat16 if dtype == "bfloat16" else torch.float32)
        out["params"] = params
        vocab = bench_agent.SHAPE["vocab_size"]
        # 1. 64 x 512 as bench_generate.py ran it on that tree (random 32-token prompts, temperature 1).
        gen = torch.Generator().manual_seed(1)
        prompts = torch.randint(0, vocab, (64, 32), generator=gen).tolist()
        new = 512 if not args.dry_run else 16
        proc = subprocess.run([str(tool), "bench", "--model", tmp, "--device", device, "--dtype", dtype,
                               "--max-batch", "64", "--max-context", str(32 + new + 8),
                               "--prompts", ";".join(",".join(map(str, p)) for p in prompts),
                               "--max-new-tokens", str(new), "--temperature", "1.0", "--seed", "0"],
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            sys.exit(f"policy_model_tool bench failed:\n{proc.stderr}")
        batch = json.loads(proc.stdout.strip().splitlines()[-1])
        batch["tokens_per_s"] = batch["tokens"] / batch["seconds"]
        out["batch_64x512"] = batch
        print(json.dumps({"batch_64x512": batch}), flush=True)
        save()
        # 2. The agent workload, every turn re-prefilled (that engine keeps no KV between requests).
        command = [str(driver), tmp, device, dtype, args.episodes, args.turns, system, obs, reply, vocab, context]
        start = time.time()
        limit = args.deadline - start if args.deadline > 0 else args.limit
        try:
            proc = subprocess.run(list(map(str, command)), capture_output=True, text=True, timeout=limit)
            if proc.returncode != 0:
                sys.exit(f"agent_workload failed:\n{proc.stderr}")
            agent = json.loads(proc.stdout.strip().splitlines()[-1])
            agent["turns"] = bench_agent.turn_lines(proc.stderr)
        except subprocess.TimeoutExpired as stopped:
            agent = {"timed_out_after_s": time.time() - start, "limit_s": limit,
                     "turns": bench_agent.turn_lines(stopped.stderr)}
        agent["turns_finished"] = len(agent["turns"])
        out["agent_reprefilling"] = agent
        print(json.dumps({"agent_reprefilling": {k: v for k, v in agent.items() if k != "turns"}}), flush=True)
        save()
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
