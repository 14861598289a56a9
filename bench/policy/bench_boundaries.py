"""What a boundary between two ops of a decode step costs: kernels against one persistent launch.

Runs `policy_model_tool boundary-chain` (policy/model/boundary_kernels.hpp) at the 0.5B model's op
sizes of a 1-row decode step (the o projection's 1.6 MB of weights, q/k/v's 2.1, down's 8.7,
gate/up's 17.4, one layer's e4m3 cache at 131,072 keys, 33.6 MB) in three ways:
  kernels     a kernel a phase, programmatic launch, one CUDA graph (how policy/model runs a step);
  kernels-np  the same without programmatic launch;
  flags       one cooperative launch whose blocks go from phase to phase on counters in global memory;
each with as many blocks as the device holds at once, and kernels and flags again with one block a
multiprocessor.
Each phase streams its bytes (16-byte loads, 4 a thread in flight, the first before the wait, as the
1-row GEMVs) and reads every block's sum of the phase before (as a projection reads the op before
it). A chain has enough phases to read 256 MB or more (at least 24), so no chain finds its bytes in
L2. The table sets each phase's time beside its bytes' time at the card's HBM bandwidth; the time
beyond that is the boundary's cost with the phase's fixed costs (start, first loads, tail). The
difference between `kernels` and `flags` is what a persistent decode kernel would save a boundary
(docs/POLICY_MODEL_PERF.md, "What the open targets need").

    python3 bench/policy/bench_boundaries.py [--tool PATH] [--calls 50] [--only LABEL ..] [--out FILE]
"""
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from kernel_bench import finish, parse_args, this_card, tool_line, tool_of  # noqa: E402

# label, bytes a phase (multiples of 16)
SIZES = [
    ("o, 1.6 MB", 896 * 896 * 2),
    ("q/k/v, 2.1 MB", 1152 * 896 * 2),
    ("down, 8.7 MB", 896 * 4864 * 2),
    ("gate/up, 17.4 MB", 9728 * 896 * 2),
    ("attention 1 x 131k, 33.6 MB", 131072 * 2 * 2 * 64),
]
# name, the tool's flags. As many blocks as are resident at once, unless named; one a multiprocessor
# is the persistent kernel's likelier shape (fewer blocks arriving at each counter, each streaming more).
MODES = [
    ("kernels", ["--mode", "kernels"]),
    ("kernels-np", ["--mode", "kernels", "--no-programmatic-launch"]),
    ("flags", ["--mode", "flags"]),
    ("kernels, 1 a SM", ["--mode", "kernels", "--blocks-per-sm", 1]),
    ("flags, 1 a SM", ["--mode", "flags", "--blocks-per-sm", 1]),
]
CHAIN_BYTES = 256e6
MIN_PHASES = 24


def phases_for(size):
    """Phases enough that a chain reads CHAIN_BYTES or more (no chain finds its bytes in L2)."""
    return max(MIN_PHASES, math.ceil(CHAIN_BYTES / size))


def run_one(tool, calls, label, size, mode, flags):
    args = [str(tool), "boundary-chain", "--device", "cuda", *flags, "--bytes", size,
            "--phases", phases_for(size), "--time", calls]
    return tool_line(args, {"size": label, "way": mode})


def main():
    args = parse_args(__doc__, "labels of SIZES to run (default: all)")
    tool = tool_of(args)
    name, card, bound = this_card()
    print(f"{name}: bound {bound / 1e12:.2f} TB/s, the {card}'s\n")
    print("| phase | way | blocks | phases | us a phase | TB/s | bytes' us at the bound | us beyond |")
    print("|---|---|---|---|---|---|---|---|")
    results = []
    for label, size in SIZES:
        if args.only and label not in args.only:
            continue
        at_bound = size / bound * 1e6
        for mode, flags in MODES:
            r = run_one(tool, args.calls, label, size, mode, flags)
            results.append(r)
            if "error" in r:
                print(f"| {label} | {mode} | error: {r['error']} ||||||", flush=True)
                continue
            print(f"| {label} | {mode} | {r['blocks']} | {r['phases']} | {r['us_per_phase']:.2f} | "
                  f"{r['tb_per_s']:.2f} | {at_bound:.2f} | {r['us_per_phase'] - at_bound:.2f} |", flush=True)
    return finish(args.out, results)


if __name__ == "__main__":
    sys.exit(main())
