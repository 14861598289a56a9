"""The e4m3 cache's decode attention kernel alone on a CUDA GPU, at the workloads' shapes.

Runs `policy_model_tool decode-attention --random --time N` (fused_ops.hpp fp8_decode_attention:
the split kernel and the join kernel of policy/model/fp8_kernels.cu) once per shape and prints the
kernels' device time a call beside the cache bytes the call reads (one byte an element), so the
split kernel's read rate, against the card's HBM bandwidth (H100 or H200, by name). The shapes
are one layer of bench_agent.py's 0.5B model (2 KV heads, 14 query heads, head_dim 64): one row at
131,072 keys (the 131k decode), 64 rows at 16,384 and 4,096 keys (the cached agent workload's late
and early turns), the 64 x 16k one paged (blocks of 16); and two of a head_dim-128 model (4 KV
heads, 28 query heads). Each figure is the mean over N calls of the kernels' profiled durations, so
the host work between calls is not counted. Both the bit-identity of two calls and that the
profiler saw one split and one join a call are checked by the tool. Each shape's output is hashed
(sha256 of its fp32 bits; the inputs come from a fixed seed), so two tools' tables say whether
their kernels give the same bits.

    python3 bench/policy/bench_fp8_attention.py [--tool PATH] [--calls 50] [--out FILE]

--tool: a built policy_model_tool (default: build it, as bench_generate.py does, into --build-dir);
two tools give an A/B of the kernels on one card (bench/policy/run_patch_ab.sh's MICRO).
"""
import hashlib
import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from kernel_bench import finish, parse_args, this_card, tool_line, tool_of  # noqa: E402

# name, rows, kv heads, heads, head_dim, keys a row, paged block size (0: slots)
SHAPES = [
    ("1 x 131072", 1, 2, 14, 64, 131072, 0),
    ("64 x 16384", 64, 2, 14, 64, 16384, 0),
    ("64 x 16384 paged", 64, 2, 14, 64, 16384, 16),
    ("64 x 4096", 64, 2, 14, 64, 4096, 0),
    ("1 x 131072, e 128", 1, 4, 28, 128, 131072, 0),
    ("64 x 4096, e 128", 64, 4, 28, 128, 4096, 0),
]


def run_shape(tool, calls, name, rows, k, h, e, keys, block, scratch=None):
    # Capacity past the last key: a slots row at the cache's last position would be a dummy row.
    capacity = keys + 16
    args = [str(tool), "decode-attention", "--device", "cuda", "--dtype", "bfloat16", "--random",
            "--rows", rows, "--slots", rows, "--kv-heads", k, "--heads", h, "--head-dim", e,
            "--capacity", capacity, "--keys", keys, "--positions", ",".join([str(keys - 1)] * rows),
            "--block-size", block, "--time", calls]
    out = scratch / "out.f32" if scratch else None
    if out:
        args += ["--out", out]
    result = tool_line(args, {"shape": name})
    if "error" in result:
        return result
    if out:  # the output's bits, to set two tools' side by side (the inputs are the seed's)
        result["out_sha256"] = hashlib.sha256(out.read_bytes()).hexdigest()
        out.unlink()
    return result


def main():
    args = parse_args(__doc__, "names of SHAPES to run (default: all)")
    tool = tool_of(args)
    results = []
    name, card, bound = this_card()
    print(f"{name}: bound {bound / 1e12:.2f} TB/s, the {card}'s\n")
    print("| shape | split us | join us | cache MB | split TB/s | split+join TB/s | of the bound | output sha256 |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for shape in SHAPES:
            if args.only and shape[0] not in args.only:
                continue
            r = run_shape(tool, args.calls, *shape, scratch=pathlib.Path(scratch))
            results.append(r)
            if "error" in r:
                print(f"| {r['shape']} | error: {r['error']} ||||||")
                continue
            both = r["split_join_tb_per_s"]
            print(f"| {r['shape']} | {r['split_us']:.2f} | {r['join_us']:.2f} | {r['cache_bytes'] / 1e6:.1f} | "
                  f"{r['split_tb_per_s']:.2f} | {both:.2f} | {both * 1e12 / bound:.2f} | "
                  f"{r['out_sha256'][:16]} |", flush=True)
    return finish(args.out, results)


if __name__ == "__main__":
    sys.exit(main())
