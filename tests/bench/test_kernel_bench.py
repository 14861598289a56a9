"""bench/policy/kernel_bench.py (CPU): what the kernel benches share. Each bench checks --tool before
it runs anything, reports a failing shape by the first line of the tool's message with a nonzero
exit, and sets each card's read rates beside its own bandwidth."""
import pathlib
import sys

import pytest

from stand_in_tool import run_script, stand_in  # tests/bench, on pytest's path

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench/policy"))
import kernel_bench  # noqa: E402


@pytest.mark.parametrize("script", ["bench_fp8_attention.py", "bench_gemv.py"])
def test_a_tool_that_is_not_there_is_named(script):
    proc = run_script(ROOT / "bench/policy" / script, "--tool", "/nonexistent/policy_model_tool")
    assert proc.returncode != 0
    assert "--tool /nonexistent/policy_model_tool: no such file" in proc.stderr


# A bench's shapes, two of them, and the blank cells its table ends an error row with.
FAILING = [("bench_fp8_attention.py", ["64 x 4096", "64 x 16384"], "||||||"),
           ("bench_gemv.py", ["down, 1 row, gemv", "down, 64 rows, cublas"], "||||||")]


@pytest.mark.parametrize("script,shapes,cells", FAILING)
def test_a_failing_shape_is_the_first_line_of_the_tools_message_and_exit_1(tmp_path, script, shapes, cells):
    tool = stand_in(tmp_path, "echo 'the tool: no GPU here' >&2\necho 'frame #0: trace' >&2\nexit 1\n")
    proc = run_script(ROOT / "bench/policy" / script, "--tool", tool, "--only", *shapes)
    assert proc.returncode == 1
    rows = [r for r in proc.stdout.splitlines() if "error:" in r]
    assert len(rows) == 2 and all(r.endswith(f"error: the tool: no GPU here {cells}") for r in rows), rows
    assert "A 1-row step" not in proc.stdout  # bench_gemv's sum: no shape ran


def test_the_bound_is_the_named_cards():
    assert kernel_bench.card_bound("NVIDIA H100 80GB HBM3") == ("H100", 3.35e12)
    assert kernel_bench.card_bound("NVIDIA H200") == ("H200", 4.8e12)
    assert kernel_bench.card_bound("NVIDIA A100-SXM4-80GB") == ("H200 (not this card's)", 4.8e12)


@pytest.mark.parametrize("stdout,error", [
    ('{"last_sums": inf}', "not JSON"),  # what an overflowed chain once printed
    ("nothing here", "no JSON line on stdout"),
])
def test_a_tool_whose_stdout_is_not_json_is_that_runs_error(tmp_path, stdout, error):
    tool = stand_in(tmp_path, f"echo '{stdout}'\nexit 0\n")
    r = kernel_bench.tool_line([tool], {"size": "x"})
    assert r["size"] == "x" and r["error"].startswith(error), r
