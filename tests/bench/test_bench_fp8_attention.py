"""bench/policy/bench_fp8_attention.py (CPU): the tool's JSON line and its output's hash read into the
table and --out (a failing shape: tests/bench/test_kernel_bench.py). The tool here is a stand-in
script that prints what `policy_model_tool decode-attention --time` prints; the real tool runs on
the GPU (tests/policy/model/test_fp8_kv_gpu.py and the bench itself on the device)."""
import hashlib
import json
import pathlib

from stand_in_tool import run_script, stand_in  # tests/bench, on pytest's path

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench/policy/bench_fp8_attention.py"


def run(*args):
    return run_script(SCRIPT, *args)


def test_the_tools_line_gives_the_row_and_the_json(tmp_path):
    line = {"rows": 1, "attended_keys": 131072, "cache_bytes": 33554432.0, "calls": 3, "split_us": 10.0,
            "join_us": 2.0, "wall_us": 20.0, "split_tb_per_s": 3.3554432, "split_join_tb_per_s": 2.7962027}
    # The stand-in writes 8 bytes where the tool writes its output (the argument after --out).
    tool = stand_in(tmp_path, "while [ $# -gt 0 ]; do [ \"$1\" = --out ] && printf 'abcdefgh' > \"$2\"; shift; done\n"
                              f"echo 'some log line'\necho '{json.dumps(line)}'\n")
    out = tmp_path / "out.json"
    proc = run("--tool", tool, "--calls", 3, "--only", "1 x 131072", "--out", out)
    assert proc.returncode == 0, proc.stderr
    digest = hashlib.sha256(b"abcdefgh").hexdigest()
    assert f"| 1 x 131072 | 10.00 | 2.00 | 33.6 | 3.36 | 2.80 | 0.58 | {digest[:16]} |" in proc.stdout
    (got,) = json.loads(out.read_text())
    assert got == dict(shape="1 x 131072", **line, out_sha256=digest)
