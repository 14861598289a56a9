"""bench/policy/ncu_mma_rows.py (CPU): one ncu run a shape and cap on the shares, each profiling the
first mma_rows_kernel launch of the tool's linear-rows --mma with the clocks left alone; ncu's page
printed per run; a missing ncu, a bad cap and a run that profiled nothing are named; --path gemv
profiles the 1- and 8-row GEMVs' first gemv_rows_kernel launch instead. ncu here is a
stand-in script (the real one runs on the GPU machine)."""
import json
import pathlib

from stand_in_tool import run_script, stand_in  # tests/bench, on pytest's path

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench/policy/ncu_mma_rows.py"


def stand_in_ncu(tmp_path, body):
    folder = tmp_path / "ncu-bin"
    folder.mkdir()
    ncu = stand_in(folder, body)  # named policy_model_tool; only its path matters
    return ncu


def test_each_shape_and_cap_is_one_ncu_run_of_the_first_launch(tmp_path):
    log = tmp_path / "calls.txt"
    ncu = stand_in_ncu(tmp_path, f"echo \"$@\" >> {log}\n"
                                 "echo '  mma_rows_kernel<__nv_bfloat16, 8, true> (152, 5, 1)x(128, 1, 1)'\n"
                                 "echo '    Duration  us  63.72'\n")
    tool = stand_in(tmp_path, "exit 0\n")
    out = tmp_path / "out.json"
    proc = run_script(SCRIPT, "--tool", tool, "--ncu", ncu, "--mma-shares", 1, 8, "--shape", "gate/up", "down",
                      "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert "## gate/up, silu, 64 rows, mma, shares 1" in proc.stdout
    assert "## down, 64 rows, mma, shares 8" in proc.stdout and "Duration  us  63.72" in proc.stdout
    calls = [c.split() for c in log.read_text().splitlines()]
    assert len(calls) == 4
    for c in calls:
        assert c[c.index("--clock-control") + 1] == "none" and c[c.index("--launch-count") + 1] == "1"
        assert c[c.index("--kernel-name") + 1] == "regex:mma_rows_kernel"
        assert c[c.index("linear-rows") - 1] == str(tool) and "--mma" in c and "--out" in c
        assert "WarpStateStats" in c and c[c.index("--rows") + 1] == "64"
    gate_up = calls[0]
    assert "--silu" in gate_up and gate_up[gate_up.index("--out-features") + 1] == "9728"
    assert gate_up[gate_up.index("--mma-shares") + 1] == "1" and calls[1][calls[1].index("--mma-shares") + 1] == "8"
    assert calls[2][calls[2].index("--in") + 1] == "4864"
    runs = json.loads(out.read_text())
    assert [(r["shape"], r["shares"], r["rc"]) for r in runs] == [
        ("gate/up, silu, 64 rows, mma", 1, 0), ("gate/up, silu, 64 rows, mma", 8, 0),
        ("down, 64 rows, mma", 1, 0), ("down, 64 rows, mma", 8, 0)]
    # The recorded commands name the scratch output, not the folder it had on this machine.
    for r in runs:
        out_arg = r["command"][r["command"].index("--out") + 1]
        assert out_arg == "SCRATCH/y.bin", out_arg


def test_a_run_that_profiled_nothing_is_an_error_and_the_rest_go_on(tmp_path):
    ncu = stand_in_ncu(tmp_path, "echo '==WARNING== No kernels were profiled.'\n")
    tool = stand_in(tmp_path, "exit 0\n")
    proc = run_script(SCRIPT, "--tool", tool, "--ncu", ncu, "--only", "o, 64 rows, mma", "down, 64 rows, mma")
    assert proc.returncode == 1
    assert proc.stdout.count("failed (exit status 0, or no mma_rows_kernel launch profiled)") == 2
    assert "No kernels were profiled." in proc.stdout


def test_a_missing_ncu_and_a_bad_cap_are_named(tmp_path):
    tool = stand_in(tmp_path, "exit 0\n")
    proc = run_script(SCRIPT, "--tool", tool, "--ncu", tmp_path / "no-ncu")
    assert proc.returncode != 0 and "no-ncu: not found" in proc.stderr
    ncu = stand_in_ncu(tmp_path, "exit 0\n")
    proc = run_script(SCRIPT, "--tool", tool, "--ncu", ncu, "--mma-shares", 9)
    assert proc.returncode != 0 and "--mma-shares: each must be 1 to 8" in proc.stderr


def test_the_gemv_path_profiles_the_first_gemv_launch_of_each_row_count_with_no_shares(tmp_path):
    log = tmp_path / "calls.txt"
    ncu = stand_in_ncu(tmp_path, f"echo \"$@\" >> {log}\n"
                                 "echo '  gemv_rows_kernel<__nv_bfloat16, 1, true, true> (608, 1, 1)x(256, 1, 1)'\n")
    tool = stand_in(tmp_path, "exit 0\n")
    out = tmp_path / "out.json"
    proc = run_script(SCRIPT, "--tool", tool, "--ncu", ncu, "--path", "gemv", "--shape", "gate/up", "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert "## gate/up, norm, silu, 1 row, gemv\n" in proc.stdout
    assert "## gate/up, norm, silu, 8 rows, gemv\n" in proc.stdout and "shares" not in proc.stdout
    calls = [c.split() for c in log.read_text().splitlines()]
    assert [c[c.index("--rows") + 1] for c in calls] == ["1", "8"]
    for c in calls:
        assert c[c.index("--kernel-name") + 1] == "regex:gemv_rows_kernel"
        assert "--mma" not in c and "--mma-shares" not in c and "--cublas" not in c
        assert {"--norm", "--delta", "--silu"} <= set(c) and c[c.index("--out-features") + 1] == "9728"
    assert [(r["shape"], r["shares"]) for r in json.loads(out.read_text())] == [
        ("gate/up, norm, silu, 1 row, gemv", None), ("gate/up, norm, silu, 8 rows, gemv", None)]
    # --rows keeps one row count; a run whose output names no gemv launch is an error.
    (tmp_path / "quiet").mkdir()
    quiet = stand_in_ncu(tmp_path / "quiet", "echo nothing\n")
    proc = run_script(SCRIPT, "--tool", tool, "--ncu", quiet, "--path", "gemv", "--rows", 1, "--shape", "o")
    assert proc.returncode == 1 and "## o, 1 row, gemv" in proc.stdout and "8 rows" not in proc.stdout
    assert "no gemv_rows_kernel launch profiled" in proc.stdout
