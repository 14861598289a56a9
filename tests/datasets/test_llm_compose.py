"""The LLM composer: a real inference node on loopback (the small random model writes garbage,
which must be rejected with reasons), and a scripted OpenAI-compatible server beside it for
the replies a real model would give (a good problem, a hostile one, one whose shapes do not
compose, one that hangs, an endpoint that errors)."""
import http.server
import json
import re
import threading

import pytest

from caf_agent_data import pipeline
from caf_agent_data.llm_compose import ChatEndpoint, ComposerError, extract_code, screen
from cafagent_testlib import free_port, tiny_model
from data_helpers import task

FAST = ["--slots", "1", "--min-ms", "0", "--max-ms", "10000", "--timeout-s", "20"]


class Scripted:
    """An OpenAI-compatible /v1/chat/completions answering from a list (status, text)."""

    def __init__(self, replies):
        self.replies, self.requests = list(replies), []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.path, body))
                status, text = outer.replies.pop(0) if outer.replies else (200, "no more replies")
                out = json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]}
                                 if status == 200 else {"error": {"message": text}}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def scripted():
    made = []

    def make(replies):
        made.append(Scripted(replies))
        return made[-1]
    yield make
    for s in made:
        s.close()


def fenced(src):
    return f"Here is the problem.\n```python\n{src}```\nDone."


def run_pipeline(tmp_path, url, model, count, candidates, *extra):
    out = tmp_path / "out"
    rc = pipeline.main(["--out", str(out), "--seed", "2", "--count", str(count), "--max-candidates",
                        str(candidates), "--composer", "llm", "--llm-url", url, "--llm-model", model,
                        "--no-transformers", *FAST, *extra])
    return rc, json.loads((out / "report.json").read_text()), out


def test_the_small_model_through_a_real_inference_node_is_rejected_with_reasons(nodes, tmp_path):
    model = tiny_model()
    cfg = tmp_path / "inference.toml"
    cfg.write_text(f"""
[runtime]
run_dir = "{tmp_path / 'run'}"
[policy]
backend = "libtorch"
model_dir = "{model}"
model_name = "tiny"
max_batch = 2
max_context = 4096
serve_host = "127.0.0.1"
serve_port = 0
""")
    port = free_port()
    coord = nodes("--role", "coordinator", "--config", str(cfg), "--port", str(port), name="coordinator")
    coord.wait_for("listening on")
    inference = nodes("--role", "inference", "--config", str(cfg), "--coordinator", f"127.0.0.1:{port}",
                      name="inference")
    inference.wait_for("OpenAI-compatible HTTP at", timeout=60)
    base_url = re.search(r"HTTP at (http://\S+)", inference.log()).group(1)

    rc, report, _ = run_pipeline(tmp_path, base_url, "tiny", 1, 3, "--llm-max-tokens", "48")
    assert rc == 1 and report["kept"] == 0 and "aborted" not in report
    assert report["dropped"] == {"compose_llm": 3}, report["dropped"]
    for why in report["dropped_examples"]["compose_llm"]:
        assert "no Python code block in the reply" in why or "does not parse" in why or "defines no" in why, why


def test_a_good_reply_is_kept_and_bad_ones_are_rejected_at_their_stage(scripted, tmp_path):
    good = task("return torch.nn.functional.gelu(self.fc(x)) * 2.0", "self.fc = nn.Linear(64, 32)")
    hostile = "import os\n" + task("return x + float(len(os.listdir('/')))")
    loads = task("return torch.load('w.pt') + x")
    no_compose = task("return self.b(self.a(x))", "self.a = nn.Linear(64, 32)\nself.b = nn.Linear(16, 8)")
    hang = task("return x", "while True:\n    pass")
    srv = scripted([(200, fenced(good)), (200, fenced(hostile)), (200, fenced(loads)), (200, fenced(no_compose)),
                    (200, "I cannot help with that."), (200, fenced("class Model(:\n")), (200, fenced(hang))])
    rc, report, out = run_pipeline(tmp_path, srv.url, "scripted", 7, 7, "--timeout-s", "8")
    assert rc == 1 and report["kept"] == 1
    assert report["dropped"] == {"compose_llm": 4, "meta": 1, "timeout": 1}, report["dropped"]
    reasons = " | ".join(report["dropped_examples"]["compose_llm"])
    for words in ("imports os", "`.load`", "no Python code block", "does not parse"):
        assert words in reasons, (words, reasons)
    assert "fails on meta tensors" in report["dropped_examples"]["meta"][0]
    manifest = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()[1:]]
    assert manifest[0]["origin"] == "llm:scripted" and manifest[0]["times"]["cpu"]["eager_ms"] > 0
    assert len(manifest[0]["ops"]) >= 1
    # what was asked: an OpenAI chat request naming the operators and the input shape
    path, body = srv.requests[0]
    assert path == "/v1/chat/completions" and body["model"] == "scripted"
    assert "float32 tensor of shape" in body["messages"][1]["content"]
    assert all(w in body["messages"][1]["content"] for w in manifest[0]["ops"])


def test_an_endpoint_that_errors_stops_the_run_with_the_reason(scripted, tmp_path):
    srv = scripted([(500, "engine exploded")] * 5)
    rc, report, _ = run_pipeline(tmp_path, srv.url, "m", 1, 10)
    assert rc == 2 and report["dropped"] == {"endpoint": 3}
    assert "failed 3 times in a row" in report["aborted"] and "HTTP 500" in report["aborted"]
    with pytest.raises(ComposerError, match="POST http://127.0.0.1:1/v1/chat/completions"):
        ChatEndpoint("http://127.0.0.1:1/v1", "m", timeout_s=5).complete([], 0)


def test_static_screen():
    assert extract_code("```py\nx = 1\n```")[0] == "x = 1\n"
    ok = task("return torch.relu(x)")
    assert screen(ok)[0]
    for body, words in (("return getattr(x, '__class__')", "`getattr`"),
                        ("return eval('x')", "`eval`"),
                        ("return x.__class__(x)", "dunder")):
        ident, why = screen(task(body))
        assert ident is None and words in why, why
    assert "subprocess" in screen("import subprocess\n" + ok)[1]
