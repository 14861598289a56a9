"""bench/policy/bench_boundaries.py (CPU): the ways and sizes it asks the tool for, and the tool's
JSON lines read into the table and --out. The tool here is a stand-in script that logs its arguments
and prints what `policy_model_tool boundary-chain` prints; the real one runs on a GPU (the bench on
the device)."""
import json
import pathlib

from stand_in_tool import run_script, stand_in  # tests/bench, on pytest's path

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench/policy/bench_boundaries.py"
BOUND = 4.8e12  # no GPU here: the table is set beside the H200's bandwidth


def line(mode, programmatic, size, phases, us_per_phase):
    return {"mode": mode, "programmatic_launch": programmatic, "bytes_per_phase": size, "phases": phases,
            "blocks": 528, "resident_blocks": 528, "calls": 3, "us_per_chain": us_per_phase * phases,
            "us_per_phase": us_per_phase, "tb_per_s": size / us_per_phase / 1e6}


def test_each_way_is_one_run_and_the_time_beyond_the_bytes_is_its_row(tmp_path):
    size = 9728 * 896 * 2  # gate/up
    phases = 24  # 17.4 MB x 24 >= 256 MB
    log = tmp_path / "calls.txt"
    kernels = json.dumps(line("kernels", True, size, phases, 9.0))
    unordered = json.dumps(line("kernels", False, size, phases, 11.0))
    flags = json.dumps(line("flags", True, size, phases, 6.5))
    tool = stand_in(tmp_path, f"echo \"$@\" >> {log}\n"
                              "case \"$*\" in\n"
                              f"  *--no-programmatic-launch*) echo '{unordered}' ;;\n"
                              f"  *'--mode flags'*) echo '{flags}' ;;\n"
                              f"  *) echo '{kernels}' ;;\n"
                              "esac\n")
    out = tmp_path / "out.json"
    proc = run_script(SCRIPT, "--tool", tool, "--calls", 3, "--only", "gate/up, 17.4 MB", "--out", out)
    assert proc.returncode == 0, proc.stderr
    calls = [c.split() for c in log.read_text().splitlines()]
    assert len(calls) == 5
    for c in calls:
        assert c[0] == "boundary-chain" and c[c.index("--bytes") + 1] == str(size)
        assert c[c.index("--phases") + 1] == str(phases) and c[c.index("--time") + 1] == "3"
    assert [c[c.index("--mode") + 1] for c in calls] == ["kernels", "kernels", "flags", "kernels", "flags"]
    assert "--no-programmatic-launch" in calls[1] and "--no-programmatic-launch" not in calls[0]
    assert ["--blocks-per-sm" in c for c in calls] == [False, False, False, True, True]
    at_bound = size / BOUND * 1e6
    assert f"| gate/up, 17.4 MB | kernels | 528 | 24 | 9.00 | {size / 9.0 / 1e6:.2f} | {at_bound:.2f} | " \
           f"{9.0 - at_bound:.2f} |" in proc.stdout
    assert f"| gate/up, 17.4 MB | flags | 528 | 24 | 6.50 |" in proc.stdout
    got = json.loads(out.read_text())
    assert [(r["way"], r["us_per_phase"]) for r in got] == [
        ("kernels", 9.0), ("kernels-np", 11.0), ("flags", 6.5), ("kernels, 1 a SM", 9.0), ("flags, 1 a SM", 6.5)]


def test_small_phases_take_enough_of_them_to_pass_l2(tmp_path):
    log = tmp_path / "calls.txt"
    tool = stand_in(tmp_path, f"echo \"$@\" >> {log}\n"
                              f"echo '{json.dumps(line('kernels', True, 1605632, 160, 4.0))}'\n")
    proc = run_script(SCRIPT, "--tool", tool, "--calls", 2, "--only", "o, 1.6 MB")
    assert proc.returncode == 0, proc.stderr
    (first, *_) = [c.split() for c in log.read_text().splitlines()]
    phases = int(first[first.index("--phases") + 1])
    assert phases * 896 * 896 * 2 >= 256e6 and (phases - 1) * 896 * 896 * 2 < 256e6


def test_a_failing_way_is_named_in_its_row_and_the_bench_fails(tmp_path):
    ok = json.dumps(line("kernels", True, 1605632, 160, 4.0))
    tool = stand_in(tmp_path, "case \"$*\" in\n"
                              "  *'--mode flags'*) echo 'boundary-chain: --mode flags takes at most 528 blocks' >&2;"
                              " exit 1 ;;\n"
                              f"  *) echo '{ok}' ;;\n"
                              "esac\n")
    proc = run_script(SCRIPT, "--tool", tool, "--calls", 2, "--only", "o, 1.6 MB")
    assert proc.returncode == 1
    assert "| o, 1.6 MB | flags | error: boundary-chain: --mode flags takes at most 528 blocks |" in proc.stdout
    assert "| o, 1.6 MB | kernels | 528 | 160 | 4.00 |" in proc.stdout
