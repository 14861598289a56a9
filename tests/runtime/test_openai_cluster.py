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


def test_inference_role_serves_with_the_checkpoints_own_template(nodes, tmp_path):
    """The HTTP prompt is what transformers' apply_chat_template renders with the checkpoint's
    template (here the real Qwen2.5 one): default system prompt, tool definitions, a tool call
    with its arguments, a tool result, the generation prompt."""
    import shutil
    from transformers import AutoTokenizer

    model = tmp_path / "qwen25-template"
    shutil.copytree(tiny_model(), model)
    config = json.loads((model / "tokenizer_config.json").read_text())
    config["chat_template"] = (REPO / "tests" / "policy" / "text" / "templates" / "qwen2.5-instruct.jinja").read_text()
    (model / "tokenizer_config.json").write_text(json.dumps(config))
    serve = write_config(tmp_path / "inference.toml", f"""
[runtime]
run_dir = "{tmp_path / 'run'}"
[policy]
backend = "libtorch"
model_dir = "{model}"
max_batch = 2
max_context = 4096
serve_port = 0
""")
    port = free_port()
    coord = nodes("--role", "coordinator", "--config", str(serve), "--port", str(port), name="coordinator")
    coord.wait_for("listening on")
    inference = nodes("--role", "inference", "--config", str(serve), "--coordinator", f"127.0.0.1:{port}",
                      name="inference")
    inference.wait_for("OpenAI-compatible HTTP at", timeout=60)
    assert "(chat format Qwen2.5 instruct" in inference.log(), inference.log()
    base_url = re.search(r"HTTP at (http://\S+)", inference.log()).group(1)

    tools = [{"type": "function", "function": {"name": "Bash", "description": "Run a command",
                                               "parameters": {"type": "object",
                                                              "properties": {"command": {"type": "string"}},
                                                              "required": ["command"]}}}]
    messages = [{"role": "user", "content": "Write a relu kernel."},
                {"role": "assistant", "content": "",
                 "tool_calls": [{"type": "function",
                                 "function": {"name": "Bash", "arguments": {"command": "nvcc -O3 k.cu"}}}]},
                {"role": "tool", "content": "ok"}]
    wire = [dict(m) for m in messages]
    wire[1] = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_0", "type": "function",
         "function": {"name": "Bash", "arguments": json.dumps({"command": "nvcc -O3 k.cu"})}}]}
    wire[2] = {"role": "tool", "tool_call_id": "call_0", "content": "ok"}
    body = json.dumps({"model": "qwen25-template", "messages": wire, "tools": tools, "max_tokens": 4,
                       "temperature": 0}).encode()
    req = urllib.request.Request(base_url + "/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    answer = json.load(urllib.request.urlopen(req, timeout=60))
    tokenizer = AutoTokenizer.from_pretrained(str(model))
    text = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
    assert text.startswith("<|im_start|>system\nYou are Qwen"), text[:200]  # the template's default system
    assert answer["prompt_token_ids"] == tokenizer(text, add_special_tokens=False)["input_ids"]
