"""The main job: `caf-agent --role local` on the embedded default runs every bundled task
through real sandboxes and real evaluations, prints the report, and exits 0; an
interrupted run still gives every started episode its one record."""
import os
import pathlib
import shutil
import signal
import struct
import subprocess
import tempfile

import msgpack
import pytest

from cafagent_testlib import REPO


def records_in(store):
    out = []
    for seg in sorted(pathlib.Path(store).glob("segment-*.msgpack")):
        data, pos = seg.read_bytes(), 0
        while pos + 12 <= len(data):
            (n,) = struct.unpack("<I", data[pos + 4:pos + 8])
            out.append(msgpack.unpackb(data[pos + 12:pos + 12 + n], raw=False))
            pos += 12 + n
    return out


@pytest.fixture
def workspace_root():
    """Sandbox uids must reach the workspaces: pytest's tmp dirs are mode 0700."""
    ws = pathlib.Path(tempfile.mkdtemp(prefix="caf_agent_ws_", dir="/tmp"))
    ws.chmod(0o755)
    yield ws
    leftovers = list(ws.iterdir())
    shutil.rmtree(ws, ignore_errors=True)
    assert not leftovers, f"workspaces left behind: {leftovers}"


def local_config(tmp_path, ws):
    python = os.environ.get("CAF_AGENT_PYTHON", str(REPO / ".venv" / "bin" / "python"))
    cfg = tmp_path / "local.toml"
    cfg.write_text(f'[cluster]\nport = 0\n[runtime]\nrun_dir = "{tmp_path / "run"}"\n'
                   f'[sandbox]\nworkspace_root = "{ws}"\n'
                   f'[gpu_pool]\nworker_python = "{python}"\n')
    return cfg


def store_of(output):
    return [l.split(" in ")[-1].strip() for l in output.splitlines() if "records in" in l][-1]


def test_local_eval_run_reports_every_task(caf_agent, tmp_path, workspace_root):
    cfg = local_config(tmp_path, workspace_root)
    res = subprocess.run([str(caf_agent), "--role", "local", "--eval", "--config", str(cfg)],
                         capture_output=True, text=True, timeout=900, cwd=REPO)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "level    episodes" in res.stdout and "terminations:" in res.stdout
    tasks = sorted(p.stem for p in (REPO / "skills" / "tasks").glob("*.py"))
    records = records_in(store_of(res.stdout))
    assert sorted(r["task_id"] for r in records) == tasks
    by_task = {r["task_id"]: r for r in records}
    # The recorded honest kernels compile in the sandbox and pass the judge.
    for task in ("add_relu", "row_sum"):
        assert by_task[task]["correct"], by_task[task]["verdict"]
        assert by_task[task]["reward"] >= 1
        assert any("compile: OK" in o for o in by_task[task]["observations"])
        assert any(o.startswith("verify: PASS") for o in by_task[task]["observations"])
    # The give-up recording is judged incorrect, not crashed or aborted.
    assert by_task["softmax"]["reward"] == -1 and by_task["softmax"]["termination"] == "finished"


def test_interrupted_run_records_every_started_episode(caf_agent, tmp_path, workspace_root):
    cfg = local_config(tmp_path, workspace_root)
    log = tmp_path / "local.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(caf_agent), "--role", "local", "--config", str(cfg),
                                 "--episodes", "12"], stdout=out, stderr=subprocess.STDOUT,
                                cwd=REPO)
        deadline = 120
        import time
        start = time.monotonic()
        while "driver: running" not in log.read_text() and time.monotonic() - start < deadline:
            time.sleep(0.2)
        time.sleep(3)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=120)
    text = log.read_text()
    assert code == 130, text[-3000:]
    records = records_in(store_of(text))
    ids = [r["episode_id"] for r in records]
    assert len(ids) == len(set(ids)) and 0 < len(ids) < 12
    interrupted = [r for r in records if r["abort_reason"].startswith("run interrupted")]
    assert interrupted, [r["termination"] for r in records]
    assert "shut down cleanly" in text
