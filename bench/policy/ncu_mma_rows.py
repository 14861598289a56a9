"""The projections' kernels of our own under Nsight Compute, one launch a shape.

The 64-row tensor-core kernel (mma_kernels.cu), or with --path gemv the 1- and 8-row GEMVs
(fused_kernels.cu).

bench_gemv.py times the kernels with nothing to say why they take that time. This runs
`policy_model_tool linear-rows --random` once per shape of bench_gemv.py's shapes of the path
(q/k/v, o, gate/up, down; the 0.5B model's: mma at 64 rows with `--mma`, once per cap on d's
shares; gemv at 1 and 8 rows, the norm and SwiGLU fused as in a decode step), under `ncu` with
the path's first kernel launch profiled (`mma_rows_kernel`, `gemv_rows_kernel`), and prints ncu's
details page for each:
duration, the memory and compute throughputs against the card's peaks, the launch (grid, cluster,
registers, shared memory), occupancy, and the warps' stall reasons. ncu flushes the caches before
each of its passes, so the weights come from memory as in a decode step.

    python3 bench/policy/ncu_mma_rows.py [--tool PATH] [--ncu PATH] [--path mma|gemv] [--rows R ...]
        [--mma-shares S ...] [--shape q/k/v|o|gate/up|down ...] [--only LABEL ...] [--out FILE]

--shape: only these projections, by the first word of their label (no spaces: run_h200.sh's MICRO
splits its words). --rows: only shapes of these row counts. --mma-shares: mma only. --ncu: the
Nsight Compute command (default `ncu` on PATH). The clocks are left as they are
(`--clock-control none`). --out: a JSON list of the runs (shape, shares, command, exit status).
Each run's details go to standard output (run_h200.sh's MICRO keeps them as micro-K.md). A run
that fails prints its error and the others go on; the exit status is 1 if any failed.
"""
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_gemv import SHAPES, label  # noqa: E402
from kernel_bench import parse_args, tool_of  # noqa: E402

# ncu's sections: the summary, the launch, occupancy, the warps' stalls, the memory hierarchy.
SECTIONS = ("SpeedOfLight", "LaunchStats", "Occupancy", "WarpStateStats", "SchedulerStats",
            "MemoryWorkloadAnalysis")
# The kernel a path's shapes launch (its first launch is the one profiled).
KERNELS = {"mma": "mma_rows_kernel", "gemv": "gemv_rows_kernel"}


def path_shapes(path):
    return [s for s in SHAPES if s[5] == path]


def command(ncu, tool, shape, shares, out_file):
    """The ncu command line of one shape (at one cap on the shares: mma; None: gemv)."""
    name, rows, d, n, flags, path, _ = shape
    sections = [arg for s in SECTIONS for arg in ("--section", s)]
    return [ncu, "--clock-control", "none", "--kernel-name", f"regex:{KERNELS[path]}", "--launch-count", 1,
            *sections, str(tool), "linear-rows", "--device", "cuda", "--dtype", "bfloat16", "--random", "--rows", rows,
            "--in", d, "--out-features", n, *flags, *(["--mma-shares", shares] if shares is not None else []),
            "--out", out_file]


def main():
    def own(parser):
        parser.add_argument("--ncu", default="ncu", help="the Nsight Compute command (default: ncu on PATH)")
        parser.add_argument("--path", choices=sorted(KERNELS), default="mma",
                            help="mma: the 64-row tensor-core kernel (default); gemv: the 1- and 8-row GEMVs")
        parser.add_argument("--shape", nargs="*", choices=sorted({s[0].split(",")[0] for s in path_shapes("mma")}),
                            help="only these projections (default: the four)")
        parser.add_argument("--rows", type=int, nargs="*", help="only shapes of these row counts")
        parser.add_argument("--mma-shares", type=int, nargs="*", default=[8],
                            help="mma: each shape once per cap on d's shares (the tool's --mma-shares, 1-8; "
                                 "default 8)")

    args = parse_args(__doc__, "labels of shapes to run, as bench_gemv.py prints them (default: the four)", own)
    ncu = shutil.which(args.ncu)
    if ncu is None:
        sys.exit(f"--ncu {args.ncu}: not found (Nsight Compute's command line)")
    if any(not 1 <= s <= 8 for s in args.mma_shares):
        sys.exit(f"--mma-shares: each must be 1 to 8, not {args.mma_shares}")
    tool = tool_of(args)
    kernel = KERNELS[args.path]
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for shape in path_shapes(args.path):
            shape_label = label(shape[0], shape[1], shape[5])
            if ((args.only and shape_label not in args.only)
                    or (args.shape and shape[0].split(",")[0] not in args.shape)
                    or (args.rows and shape[1] not in args.rows)):
                continue
            for shares in args.mma_shares if args.path == "mma" else [None]:
                cmd = [str(a) for a in command(ncu, tool, shape, shares, pathlib.Path(tmp) / "y.bin")]
                # As recorded: the scratch output named as the scratch folder's, not this machine's path.
                shown = [a.replace(tmp, "SCRATCH") for a in cmd[1:]]
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
                print(f"## {shape_label}" + (f", shares {shares}" if shares is not None else "") + "\n", flush=True)
                if done.returncode != 0 or kernel not in done.stdout:
                    tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-5:]
                    print("failed (exit status {}, or no {} launch profiled):\n\n    {}\n".format(
                        done.returncode, kernel, "\n    ".join(tail or ["(no output)"])), flush=True)
                    runs.append({"shape": shape_label, "shares": shares, "command": shown, "rc": done.returncode,
                                 "error": " / ".join(tail)[:500]})
                    continue
                print("```\n" + done.stdout.strip() + "\n```\n", flush=True)
                runs.append({"shape": shape_label, "shares": shares, "command": shown, "rc": 0})
    if args.out:
        args.out.write_text(json.dumps(runs, indent=1))
    return 1 if not runs or any("error" in r for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
