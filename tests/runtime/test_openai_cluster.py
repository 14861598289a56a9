"""The openai backend against a real server: an inference node serves the small model over
OpenAI-compatible HTTP; a rollout node and a local job use it through the openai backend.
Weight publication reaches both the in-process engine and, through the HTTP reload
endpoint, the server behind the rollout node's backend."""
import json
import re
import subprocess
import urllib.request

from cafagent_testlib import REPO, free_port, make_tiny_checkpoint, records_in, store_of, tiny_model


def write_config(path, body):
    path.write_text(body)
    return path


def test_rollout_through_the_openai_backend_and_weight_reload(caf_agent, nodes, tmp_path, workspace_root):
    model = tiny_model()
    newer = make_tiny_checkpoint(tmp_path / "step-1", seed=1)
    serve = write_config(tmp_path / "inference.toml", f"""
[runtime]
run_dir = "{tmp_path / 'run'}"
[policy]
backend = "libtorch"
model_dir = "{model}"
model_name = "tiny"
max_batch = 4
max_context = 8192
serve_port = 0
""")
    port = free_port()
    addr = f"127.0.0.1:{port}"
    coord = nodes("--role", "coordinator", "--config", str(serve), "--port", str(port), name="coordinator")
    coord.wait_for("listening on")
    inference = nodes("--role", "inference", "--config", str(serve), "--coordinator", addr, name="inference")
    inference.wait_for("OpenAI-compatible HTTP at", timeout=60)
    base_url = re.search(r"HTTP at (http://\S+)", inference.log()).group(1)

    client = write_config(tmp_path / "client.toml", f"""
[runtime]
run_dir = "{tmp_path / 'run'}"
[sandbox]
workspace_root = "{workspace_root}"
[policy]
backend = "openai"
base_url = "{base_url}"
model_name = "tiny"
max_new_tokens = 32
seed = 3
""")
    nodes("--role", "rollout", "--config", str(client), "--coordinator", addr, name="rollout")
    coord.wait_for("service policy on rollout@", timeout=60)

    published = subprocess.run([str(caf_agent), "--role", "inspector", "--coordinator", addr,
                                "--publish-weights", str(newer), "--weights-version", "1"],
                               capture_output=True, text=True, timeout=120, cwd=REPO)
    assert published.returncode == 0, published.stdout + published.stderr
    assert len(published.stdout.strip().splitlines()) == 2, published.stdout

    body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
                       "max_tokens": 8, "temperature": 0, "logprobs": True}).encode()
    req = urllib.request.Request(base_url + "/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    answer = json.load(urllib.request.urlopen(req, timeout=60))
    assert answer["policy_version"] == 1
    choice = answer["choices"][0]
    assert len(choice["logprobs"]["content"]) == len(choice["token_ids"]) > 0

    python = str(REPO / ".venv" / "bin" / "python")
    local = write_config(tmp_path / "local.toml", client.read_text() + f"""
[gpu_pool]
worker_python = "{python}"
[cluster]
port = 0
""")
    run = subprocess.run([str(caf_agent), "--role", "local", "--config", str(local), "--episodes", "2"],
                         capture_output=True, text=True, timeout=600, cwd=REPO)
    assert run.returncode == 0, run.stderr[-3000:]
    records = records_in(store_of(run.stdout))
    assert len(records) == 2
    for r in records:
        assert r["termination"] != "aborted", r["abort_reason"]
        assert r["policy_versions"] and all(v == 1 for v in r["policy_versions"]), r["policy_versions"]
        assert len(r["tokens"]) == len(r["logprobs"]) > 0
        assert all(lp <= 0 for lp in r["logprobs"])
