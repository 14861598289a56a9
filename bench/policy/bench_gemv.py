"""A decode step's projections alone on a CUDA GPU, at the 0.5B model's shapes.

Runs `policy_model_tool linear-rows --random --time N` once per shape and path, and prints the
kernels' device time a call beside the weight bytes the call reads, so the read rate against the
card's HBM bandwidth (H100 or H200, by name; kernel_bench.card_bound). The shapes are one
layer of bench_agent.py's 0.5B model (hidden 896, intermediate 4,864, 14 query heads and 2 KV
heads of 64):
- at one row (the 131k decode), the matrix-vector kernels a 1-row step runs
  (fused_ops.hpp, `--decode-gemv-rows 1`): norm + q/k/v (with bias), o, norm + gate/up + SiLU, down;
  and cuBLAS's torch::linear on the same weights beside them;
- at 8 rows, both again: the kernels run up to `decode_gemv_rows` rows (default 1, since 2-8
  rows were not measured), so these rows say whether a larger default would pay;
- at 64 rows (the cached agent workload's steps), cuBLAS's torch::linear, which those steps run;
- at 64 rows, the tensor-core kernel (`--decode-mma-rows`, fused_kernels.hpp mma_rows; gate/up with its
  SwiGLU epilogue) beside cuBLAS;
- the LM head (151,936 x 896, cuBLAS at every row count).

A 1-row step runs each layer's four once and the LM head once (24 layers). The table's last lines
add them up that way: that is the step's projection time if nothing overlaps. Each figure is the
mean over N calls of the kernels' profiled durations, so the host work between calls is not
counted. A layer's weights (2-17 MB) fit the H100's and the H200's 50 MB L2 cache, where a step
streams 715 MB of them, so each shape's calls take enough copies of its weights in turn (the
tool's --copies) that together they are at least COPIES_BYTES: no call finds its weights in L2.

    python3 bench/policy/bench_gemv.py [--tool PATH] [--calls 50] [--only NAME ...] [--rows N ...]
        [--mma-shares S ...] [--mma-launch FW,S ...] [--cublaslt K] [--out FILE]

--mma-launch FW,S ...: each tensor-core shape once more per value, launched with FW warps along the
features and d in S shares whatever the kernel would choose (the tool's --mma-launch): a sweep of
the kernel's launches beside its own choice.

--cublaslt K: each cuBLAS shape also runs up to K of cuBLASLt's own candidates for its product
(the tool's `linear-rows --cublaslt`), a row each beside torch::linear's, and the table's end puts
each shape's fastest candidate against torch::linear's pick (and a 64-row layer's four so): whether
cuBLAS has a faster algorithm at these shapes than the one it chooses.

--tool: a built policy_model_tool (default: build it, as bench_generate.py does, into --build-dir);
two tools give an A/B of the kernels on one card (bench/policy/run_patch_ab.sh's MICRO).
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from kernel_bench import finish, parse_args, this_card, tool_line, tool_lines, tool_of  # noqa: E402

LAYERS = 24  # the 0.5B model's
# Weight bytes a shape's copies cover at least: over twice the 50 MB L2 of an H100 or an H200.
COPIES_BYTES = 128e6


def copies(d, n, has_bias):
    """Copies of a bf16 weight [n, d] (and its bias) that together cover COPIES_BYTES."""
    weight = 2 * n * (d + (1 if has_bias else 0))
    return max(1, min(4096, -(-int(COPIES_BYTES) // weight)))


# name, rows, in, out features, the tool's flags, path ("gemv" the one kernel, "cublas" torch::linear),
# how often a 1-row step runs it (0: not part of the 1-row sum)
SHAPES = [
    ("q/k/v, norm", 1, 896, 1152, ["--norm", "--delta", "--bias"], "gemv", LAYERS),
    ("o", 1, 896, 896, [], "gemv", LAYERS),
    ("gate/up, norm, silu", 1, 896, 9728, ["--norm", "--delta", "--silu"], "gemv", LAYERS),
    ("down", 1, 4864, 896, [], "gemv", LAYERS),
    ("LM head", 1, 896, 151936, [], "cublas", 1),
    ("q/k/v", 1, 896, 1152, ["--bias"], "cublas", 0),
    ("o", 1, 896, 896, [], "cublas", 0),
    ("gate/up", 1, 896, 9728, [], "cublas", 0),
    ("down", 1, 4864, 896, [], "cublas", 0),
    ("q/k/v, norm", 8, 896, 1152, ["--norm", "--delta", "--bias"], "gemv", 0),
    ("o", 8, 896, 896, [], "gemv", 0),
    ("gate/up, norm, silu", 8, 896, 9728, ["--norm", "--delta", "--silu"], "gemv", 0),
    ("down", 8, 4864, 896, [], "gemv", 0),
    ("q/k/v", 8, 896, 1152, ["--bias"], "cublas", 0),
    ("o", 8, 896, 896, [], "cublas", 0),
    ("gate/up", 8, 896, 9728, [], "cublas", 0),
    ("down", 8, 4864, 896, [], "cublas", 0),
    ("q/k/v", 64, 896, 1152, ["--bias"], "cublas", 0),
    ("o", 64, 896, 896, [], "cublas", 0),
    ("gate/up", 64, 896, 9728, [], "cublas", 0),
    ("down", 64, 4864, 896, [], "cublas", 0),
    ("LM head", 64, 896, 151936, [], "cublas", 0),
    ("q/k/v", 64, 896, 1152, ["--bias", "--mma"], "mma", 0),
    ("o", 64, 896, 896, ["--mma"], "mma", 0),
    ("gate/up, silu", 64, 896, 9728, ["--silu", "--mma"], "mma", 0),
    ("down", 64, 4864, 896, ["--mma"], "mma", 0),
]
# The four projections of a layer at 64 rows, by path: cuBLAS's gate/up is without SwiGLU (a kernel
# of its own after it), the tensor-core kernel's with it.
LAYER_64 = ("q/k/v", "o", "gate/up", "gate/up, silu", "down")


def label(name, rows, path):
    return f"{name}, {rows} row{'s' if rows > 1 else ''}, {path}"


def shape_args(tool, calls, rows, d, n, flags):
    """The tool's `linear-rows --random --time` call for one shape, its weights in enough copies."""
    return [str(tool), "linear-rows", "--device", "cuda", "--dtype", "bfloat16", "--random", "--rows", rows,
            "--in", d, "--out-features", n, *flags, "--time", calls, "--copies", copies(d, n, "--bias" in flags)]


def run_shape(tool, calls, name, rows, d, n, flags, path, per_step, shares=None, launch_as=None):
    """One shape's JSON line from the tool, with its label; `shares`: the tensor-core kernel's
    --mma-shares (labelled "..., mma, shares S"); `launch_as`: its --mma-launch "FW,S" (labelled
    "..., mma, launch FW,S")."""
    args = shape_args(tool, calls, rows, d, n, flags)
    if path == "cublas":
        args.append("--cublas")
    suffix = ""
    if shares is not None:
        args += ["--mma-shares", shares]
        suffix += f", shares {shares}"
    if launch_as is not None:
        args += ["--mma-launch", launch_as]
        suffix += f", launch {launch_as}"
    return tool_line(args, {"shape": label(name, rows, path) + suffix, "per_step": per_step})


def run_candidates(tool, calls, name, rows, d, n, flags, path, per_step, wanted):
    """A cuBLAS shape with --cublaslt: torch::linear's line (labelled as run_shape labels it) and
    one line a candidate (labelled "..., cublas, candidate C")."""
    args = [*shape_args(tool, calls, rows, d, n, flags), "--cublaslt", wanted]
    out = []
    for r in tool_lines(args, {"shape": label(name, rows, path), "per_step": per_step}):
        if r.get("candidate", -1) >= 0:
            r = dict(r, shape=f"{r['shape']}, candidate {r['candidate']}", per_step=0)
        out.append(r)
    return out


def candidate_config(r):
    """A cuBLASLt candidate's configuration as the tool reports it, for the table's launch column."""
    if r.get("candidate", -1) < 0:
        return " |"
    return (f" algo {r['algo_id']}, tile {r['tile']}, stages {r['stages']}, split-K {r['split_k']}, "
            f"workspace {r['workspace']}, max diff {r['max_abs_diff']:.3g} |")


def best_candidates(results):
    """Per cuBLAS shape run with candidates: (shape, torch::linear's us, the fastest candidate's
    line). A candidate whose output is not torch::linear's within bf16 rounding still counts: the
    table shows its difference."""
    out = []
    for r in results:
        if "error" in r or r.get("candidate") != -1:
            continue
        mine = [c for c in results if "error" not in c and c.get("candidate", -1) >= 0
                and c["shape"].startswith(r["shape"] + ", candidate ")]
        if mine:
            out.append((r["shape"], r["kernel_us"], min(mine, key=lambda c: c["kernel_us"])))
    return out


def launch(r):
    """The tensor-core kernel's launch as the tool reports it (its grid, a cluster of `shares`
    blocks, the clusters the device runs at once: fewer than the tiles, the clusters run in waves);
    empty for the other paths."""
    if "tiles" not in r:
        return " |"
    waves = -(-r["tiles"] // r["clusters_at_once"]) if r["clusters_at_once"] > 0 else 0
    warps = f", {r['feature_warps']} warps along the features" if "feature_warps" in r else ""
    return (f" {r['tiles']} x {r['shares']} blocks{warps}, {r['blocks_per_sm']} a multiprocessor, "
            f"{r['clusters_at_once']} clusters at once ({waves} wave{'s' if waves != 1 else ''}) |")


def layer_sum_64(results, path):
    """A layer's four projections at 64 rows on `path` (us, weight bytes), or None if one is missing."""
    rows = [r for r in results if "error" not in r and r["rows"] == 64 and r["shape"].endswith(", " + path)
            and r["shape"].split(", 64 rows")[0] in LAYER_64]
    if len(rows) != 4:
        return None
    return sum(r["kernel_us"] for r in rows), sum(r["weight_bytes"] for r in rows)


def step_sum(results):
    """The 1-row step's projections, each run as often as a step runs it: (us, weight bytes)."""
    us = sum(r["kernel_us"] * r["per_step"] for r in results if "error" not in r and r["per_step"])
    bytes_ = sum(r["weight_bytes"] * r["per_step"] for r in results if "error" not in r and r["per_step"])
    return us, bytes_


def main():
    def own(parser):
        parser.add_argument("--rows", type=int, nargs="*", help="only the shapes of these row counts (default: all)")
        parser.add_argument("--cublaslt", type=int, default=0,
                            help="also up to K of cuBLASLt's candidates for each cuBLAS shape (1-64; default none)")
        parser.add_argument("--mma-shares", type=int, nargs="*",
                            help="each tensor-core shape once per value, d cut into at most that many shares "
                                 "(the tool's --mma-shares, 1-8; default: once, the kernel's own choice)")
        parser.add_argument("--mma-launch", nargs="*",
                            help="each tensor-core shape once more per value FW,S: FW warps along the features "
                                 "(1, 2, 4, 8) and S shares of d (the tool's --mma-launch), beside its own choice")

    args = parse_args(__doc__, "labels of shapes to run, as the table prints them (default: all)", own)
    tool = tool_of(args)
    name, card, bound = this_card()
    print(f"{name}: bound {bound / 1e12:.2f} TB/s, the {card}'s; each shape's calls over copies of its weights "
          f"covering {COPIES_BYTES / 1e6:.0f} MB\n")
    print("| shape | kernel us | kernels a call | weights MB | TB/s | of the bound | launch |")
    print("|---|---|---|---|---|---|---|")
    results = []
    for shape in SHAPES:
        if args.only and label(shape[0], shape[1], shape[5]) not in args.only:
            continue
        if args.rows and shape[1] not in args.rows:
            continue
        variants = [(s, None) for s in (args.mma_shares or [None])]
        variants += [(None, v) for v in (args.mma_launch or [])]
        for shares, launch_as in variants if shape[5] == "mma" else [(None, None)]:
            if args.cublaslt > 0 and shape[5] == "cublas":
                lines = run_candidates(tool, args.calls, *shape, args.cublaslt)
            else:
                lines = [run_shape(tool, args.calls, *shape, shares=shares, launch_as=launch_as)]
            for r in lines:
                results.append(r)
                if "error" in r:
                    print(f"| {r['shape']} | error: {r['error']} ||||||")
                    continue
                print(f"| {r['shape']} | {r['kernel_us']:.2f} | {r['kernels_a_call']:.1f} | "
                      f"{r['weight_bytes'] / 1e6:.1f} | {r['tb_per_s']:.2f} | {r['tb_per_s'] * 1e12 / bound:.2f} |"
                      f"{launch(r) if 'candidate' not in r else candidate_config(r)}", flush=True)
    us, bytes_ = step_sum(results)
    if us > 0:
        print(f"\nA 1-row step's projections ({LAYERS} layers' four kernels and the LM head, one after another): "
              f"{us:.0f} us for {bytes_ / 1e6:.0f} MB, {bytes_ / us / 1e6:.2f} TB/s")
    for path in ("cublas", "mma"):
        layer = layer_sum_64(results, path)
        if layer:
            print(f"A 64-row layer's four projections on {path}: {layer[0]:.1f} us for {layer[1] / 1e6:.1f} MB, "
                  f"{layer[1] / layer[0] / 1e6:.2f} TB/s ({LAYERS} layers: {layer[0] * LAYERS:.0f} us)")
    best = best_candidates(results)
    if best:
        print("\n| shape | torch::linear us | fastest candidate | its us | against torch::linear | its kernels |")
        print("|---|---|---|---|---|---|")
        for shape, us, c in best:
            print(f"| {shape} | {us:.2f} | {c['candidate']} | {c['kernel_us']:.2f} | {us / c['kernel_us']:.2f}x | "
                  f"{c.get('kernels', '')} |")
        layer = [(us, c["kernel_us"]) for shape, us, c in best
                 if ", 64 rows, " in shape and shape.split(", 64 rows")[0] in LAYER_64]
        if len(layer) == 4:
            mine, theirs = sum(u for u, _ in layer), sum(c for _, c in layer)
            print(f"A 64-row layer's four projections: torch::linear {mine:.1f} us, each shape's fastest candidate "
                  f"{theirs:.1f} us ({LAYERS} layers: {mine * LAYERS:.0f} against {theirs * LAYERS:.0f} us)")
    return finish(args.out, results)


if __name__ == "__main__":
    sys.exit(main())
