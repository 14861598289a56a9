"""bench/policy/bench_gemv.py (CPU): each shape's call (the path's flags, the copies that keep its
weights out of L2); the tool's JSON line read into the table, --out and the 1-row step's sum (a
failing shape: tests/bench/test_kernel_bench.py). The tool here is a stand-in script that prints
what `policy_model_tool linear-rows --time` prints; the real tool runs on the GPU (the bench itself
on the device; tests/policy/model/test_policy_model.py checks its arguments on the CPU)."""
import json
import pathlib
import sys

from stand_in_tool import run_script, stand_in  # tests/bench, on pytest's path

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench/policy/bench_gemv.py"
sys.path.insert(0, str(ROOT / "bench/policy"))
import bench_gemv  # noqa: E402


def run(*args):
    return run_script(SCRIPT, *args)


def test_copies_cover_twice_the_l2_and_stop_at_the_tools_limit():
    # o: 896 x 896 bf16 = 1.6 MB -> 80 copies (128.4 MB); the LM head (272 MB) needs one.
    assert bench_gemv.copies(896, 896, False) == 80
    assert 80 * 2 * 896 * 896 >= bench_gemv.COPIES_BYTES > 79 * 2 * 896 * 896
    assert bench_gemv.copies(896, 151936, False) == 1
    assert bench_gemv.copies(1, 1, False) == 4096


def test_each_shape_runs_its_path_and_the_step_sums_the_one_row_kernels(tmp_path):
    # The stand-in logs its arguments and answers as the tool would for 10 us and 1 MB of weights.
    line = {"rows": 1, "in": 896, "out_features": 896, "weight_bytes": 1e6, "calls": 3, "kernel_us": 10.0,
            "kernels_a_call": 1.0, "wall_us": 20.0, "tb_per_s": 0.1}
    log = tmp_path / "calls.txt"
    tool = stand_in(tmp_path, f"echo \"$@\" >> {log}\necho 'some log line'\necho '{json.dumps(line)}'\n")
    out = tmp_path / "out.json"
    only = ["o, 1 row, gemv", "LM head, 1 row, cublas", "gate/up, 64 rows, cublas"]
    proc = run("--tool", tool, "--calls", 3, "--only", *only, "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert "| o, 1 row, gemv | 10.00 | 1.0 | 1.0 | 0.10 |" in proc.stdout
    calls = log.read_text().splitlines()
    assert len(calls) == 3
    o, head, gate_up = (c.split() for c in calls)
    assert "--cublas" not in o and o[o.index("--copies") + 1] == "80" and o[o.index("--time") + 1] == "3"
    assert "--cublas" in head and head[head.index("--copies") + 1] == "1"
    assert "--cublas" in gate_up and gate_up[gate_up.index("--rows") + 1] == "64"
    # The step: o 24 times and the LM head once (the 64-row shape is not part of it).
    assert "250 us for 25 MB, 0.10 TB/s" in proc.stdout
    got = json.loads(out.read_text())
    assert [r["shape"] for r in got] == only and [r["per_step"] for r in got] == [24, 1, 0]


def test_the_64_row_tensor_core_shapes_pass_mma_and_a_layer_sums_per_path(tmp_path):
    # Each answer: 10 us and 1 MB, at 64 rows.
    line = {"rows": 64, "in": 896, "out_features": 896, "weight_bytes": 1e6, "calls": 3, "kernel_us": 10.0,
            "kernels_a_call": 1.0, "wall_us": 20.0, "tb_per_s": 0.1}
    log = tmp_path / "calls.txt"
    tool = stand_in(tmp_path, f"echo \"$@\" >> {log}\necho '{json.dumps(line)}'\n")
    mma = ["q/k/v, 64 rows, mma", "o, 64 rows, mma", "gate/up, silu, 64 rows, mma", "down, 64 rows, mma"]
    cublas = ["q/k/v, 64 rows, cublas", "o, 64 rows, cublas", "gate/up, 64 rows, cublas"]  # down left out
    proc = run("--tool", tool, "--calls", 3, "--only", *mma, *cublas)
    assert proc.returncode == 0, proc.stderr
    calls = [c.split() for c in log.read_text().splitlines()]
    assert len(calls) == 7
    assert sum("--mma" in c for c in calls) == 4 and sum("--cublas" in c for c in calls) == 3
    assert "--silu" in next(c for c in calls if "--mma" in c and c[c.index("--out-features") + 1] == "9728")
    # The four mma shapes: 40 us for 4 MB a layer, 960 us for 24; cuBLAS lacks down, so no sum.
    assert "A 64-row layer's four projections on mma: 40.0 us for 4.0 MB, 0.10 TB/s (24 layers: 960 us)" \
        in proc.stdout
    assert "on cublas" not in proc.stdout
    # --rows 64: every 64-row shape (cuBLAS's four and the LM head, the tensor-core kernel's four).
    log.unlink()
    proc = run("--tool", tool, "--calls", 3, "--rows", 64)
    assert proc.returncode == 0, proc.stderr
    assert len(log.read_text().splitlines()) == 9
    assert "on cublas: 40.0 us" in proc.stdout and "on mma: 40.0 us" in proc.stdout
    # --mma-shares 1 8: each tensor-core shape twice, the tool told the cap; cuBLAS's once.
    log.unlink()
    proc = run("--tool", tool, "--calls", 3, "--only", "o, 64 rows, mma", "o, 64 rows, cublas", "--mma-shares", 1, 8)
    assert proc.returncode == 0, proc.stderr
    calls = [c.split() for c in log.read_text().splitlines()]
    assert [c[c.index("--mma-shares") + 1] if "--mma-shares" in c else None for c in calls] == [None, "1", "8"]
    assert "| o, 64 rows, mma, shares 1 |" in proc.stdout and "| o, 64 rows, mma, shares 8 |" in proc.stdout
    # --mma-launch 2,7 8,3: each tensor-core shape on its own choice, then once per launch, the tool
    # told it; the layer's sum takes the kernel's own choice alone.
    log.unlink()
    proc = run("--tool", tool, "--calls", 3, "--only", "o, 64 rows, mma", "--mma-launch", "2,7", "8,3")
    assert proc.returncode == 0, proc.stderr
    calls = [c.split() for c in log.read_text().splitlines()]
    assert [c[c.index("--mma-launch") + 1] if "--mma-launch" in c else None for c in calls] == [None, "2,7", "8,3"]
    assert "| o, 64 rows, mma, launch 2,7 |" in proc.stdout and "| o, 64 rows, mma, launch 8,3 |" in proc.stdout


def test_the_tensor_core_kernels_launch_is_a_column_with_its_waves(tmp_path):
    # gate/up's launch as the tool reports it: 152 tiles x 5 shares, 140 clusters at once -> 2 waves.
    line = {"rows": 64, "in": 896, "out_features": 9728, "weight_bytes": 17.4e6, "calls": 3, "kernel_us": 63.7,
            "kernels_a_call": 1.0, "wall_us": 70.0, "tb_per_s": 0.27, "tiles": 152, "shares": 5, "blocks_per_sm": 6,
            "clusters_at_once": 140}
    tool = stand_in(tmp_path, f"echo '{json.dumps(line)}'\n")
    proc = run("--tool", tool, "--calls", 3, "--only", "gate/up, silu, 64 rows, mma")
    assert proc.returncode == 0, proc.stderr
    assert "| 152 x 5 blocks, 6 a multiprocessor, 140 clusters at once (2 waves) |" in proc.stdout, proc.stdout
    assert bench_gemv.launch({"tiles": 18, "shares": 7, "blocks_per_sm": 6, "clusters_at_once": 100}).endswith(
        "100 clusters at once (1 wave) |")
    assert bench_gemv.launch({"kernel_us": 5.0}) == " |"  # cuBLAS's and the GEMVs' rows
    # The warps along the features, where the tool reports them.
    assert bench_gemv.launch({"tiles": 38, "shares": 3, "feature_warps": 8, "blocks_per_sm": 1,
                              "clusters_at_once": 40}).startswith(" 38 x 3 blocks, 8 warps along the features, ")


def test_cublaslt_runs_each_cublas_shape_with_its_candidates_and_puts_the_fastest_against_torch(tmp_path):
    # The stand-in answers as `linear-rows --cublaslt` does: torch::linear's line (candidate -1) at
    # 10 us, then two candidates at 8 and 12 us; a shape of 896 outputs makes candidate 1 the faster
    # at 5 us, so each shape's fastest differs.
    def line(candidate, us):
        r = {"kernels": "nvjet_x", "rows": 64, "in": 896, "out_features": 896, "weight_bytes": 1e6, "calls": 3,
             "kernel_us": us, "kernels_a_call": 1.0, "wall_us": 20.0, "tb_per_s": 1e6 / us / 1e6,
             "candidate": candidate}
        if candidate >= 0:
            r.update(algo_id=66, tile=20 + candidate, stages=3, split_k=1, reduction=0, swizzle=0, custom=0,
                     cluster=0, workspace=0, waves=0.5, max_abs_diff=0.0)
        return json.dumps(r)

    log = tmp_path / "calls.txt"
    body = (f"echo \"$@\" >> {log}\n"
            f"echo '{line(-1, 10.0)}'\n"
            f"case \"$*\" in *'--out-features 896 '*) echo '{line(0, 8.0)}'; echo '{line(1, 5.0)}' ;;\n"
            f"  *) echo '{line(0, 8.0)}'; echo '{line(1, 12.0)}' ;; esac\n")
    tool = stand_in(tmp_path, body)
    out = tmp_path / "out.json"
    cublas = ["q/k/v, 64 rows, cublas", "o, 64 rows, cublas", "gate/up, 64 rows, cublas", "down, 64 rows, cublas"]
    proc = run("--tool", tool, "--calls", 3, "--only", *cublas, "o, 64 rows, mma", "--cublaslt", 4, "--out", out)
    assert proc.returncode == 0, proc.stderr
    calls = [c.split() for c in log.read_text().splitlines()]
    assert len(calls) == 5
    for c in calls:  # the cuBLAS shapes ask for the candidates instead of --cublas; mma is untouched
        if "--mma" in c:
            assert "--cublaslt" not in c
        else:
            assert "--cublas" not in c and c[c.index("--cublaslt") + 1] == "4"
    assert "| o, 64 rows, cublas, candidate 1 | 5.00 |" in proc.stdout
    assert "algo 66, tile 21, stages 3, split-K 1, workspace 0, max diff 0 |" in proc.stdout
    # o and down (896 outputs) find candidate 1 at 5 us, q/k/v and gate/up candidate 0 at 8 us.
    assert "| o, 64 rows, cublas | 10.00 | 1 | 5.00 | 2.00x | nvjet_x |" in proc.stdout
    assert "| q/k/v, 64 rows, cublas | 10.00 | 0 | 8.00 | 1.25x | nvjet_x |" in proc.stdout
    assert ("A 64-row layer's four projections: torch::linear 40.0 us, each shape's fastest candidate 26.0 us "
            "(24 layers: 960 against 624 us)") in proc.stdout
    # torch::linear's lines keep the shape's own label, so the layer sum per path still reads them.
    assert "A 64-row layer's four projections on cublas: 40.0 us" in proc.stdout
    got = json.loads(out.read_text())
    assert len(got) == 13 and sum(r["candidate"] == -1 for r in got if "candidate" in r) == 4
