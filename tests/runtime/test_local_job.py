"""The main job: `caf-agent --role local` on the embedded default runs every bundled task
through real sandboxes and real evaluations, prints the report, and exits 0; an
interrupted run still gives every started episode its one record."""
import json
import os
import pathlib
import re
import signal
import subprocess

import pytest

from cafagent_testlib import REPO, build_dir, records_in, store_of, tiny_model


def local_config(tmp_path, ws, build_workers=-1):
    python = os.environ.get("CAF_AGENT_PYTHON", str(REPO / ".venv" / "bin" / "python"))
    cfg = tmp_path / "local.toml"
    cfg.write_text(f'[cluster]\nport = 0\n[runtime]\nrun_dir = "{tmp_path / "run"}"\n'
                   f'[sandbox]\nworkspace_root = "{ws}"\n'
                   f'[gpu_pool]\nworker_python = "{python}"\nbuild_workers = {build_workers}\n'
                   f'[policy]\nbackend = "replay"\n')
    return cfg


def test_local_eval_run_reports_every_task(caf_agent, tmp_path, workspace_root):
    # With a build stage (the default only on CUDA slots): the recorded kernels below are
    # compiled by a --build-only worker ahead of the slot, and judged the same. With the small
    # model's tokenizer the replay is token-level: the records are RFT demonstrations.
    cfg = local_config(tmp_path, workspace_root, build_workers=1)
    cfg.write_text(cfg.read_text() + f'model_dir = "{tiny_model()}"\n')
    res = subprocess.run([str(caf_agent), "--role", "local", "--eval", "--config", str(cfg)],
                         capture_output=True, text=True, timeout=900, cwd=REPO)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "started gpu-pool: eval_builders=1, eval_slots=1" in res.stderr
    builder_log = (tmp_path / "run" / "eval-builder-0.log").read_text()
    assert "build for job" in builder_log and ": ok in" in builder_log, builder_log[-2000:]
    assert "level    episodes" in res.stdout and "terminations:" in res.stdout
    tasks = sorted(p.stem for p in (REPO / "skills" / "tasks").glob("*.py"))
    records = records_in(store_of(res.stdout))
    assert sorted(r["task_id"] for r in records) == tasks
    by_task = {r["task_id"]: r for r in records}
    # Every bundled task has a recorded honest kernel (tools/make_replay.py): each compiles in
    # the sandbox and passes the judge.
    for task in tasks:
        assert by_task[task]["correct"], by_task[task]["verdict"]
        assert by_task[task]["reward"] >= 1 and by_task[task]["termination"] == "finished"
        assert any("compile: OK" in o for o in by_task[task]["observations"])
        assert any(o.startswith("verify: PASS") for o in by_task[task]["observations"])
    check_replay_tokens(records)
    # Every record is a clean success, so all of them are RFT training data.
    packed = subprocess.run([str(build_dir() / "rollout" / "trajectory_tool"), "batch", "--store",
                             str(store_of(res.stdout)), "--stage", "rft", "--out", str(tmp_path / "rft.json")],
                            capture_output=True, text=True, timeout=60)
    assert packed.returncode == 0, packed.stderr
    assert json.loads(packed.stdout)["kept"] == len(tasks), packed.stdout


def check_replay_tokens(records):
    """Token-level replay records: the loss mask covers exactly the recorded assistant turns
    (each ending with <|im_end|>), which decode (with the `tokenizers` library, not ours) to
    the recorded texts; everything else (system prompt, task, tool results) is masked out."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(tiny_model() / "tokenizer.json"))
    im_end = tok.token_to_id("<|im_end|>")
    for r in records:
        tokens, mask = list(r["tokens"]), list(r["loss_mask"])
        assert tokens and len(tokens) == len(mask) == len(r["logprobs"]), r["task_id"]
        spans, start = [], None
        for i, m in enumerate(mask + [0]):
            if m and start is None:
                start = i
            elif not m and start is not None:
                spans.append((start, i))
                start = None
        assert [s for s, _ in spans] == r["turn_starts"], r["task_id"]
        assert len(spans) == len(r["turn_texts"]) == r["turns"], r["task_id"]
        for (s, e), text in zip(spans, r["turn_texts"]):
            assert tokens[e - 1] == im_end
            assert tok.decode(tokens[s:e - 1], skip_special_tokens=False) == text
        # The prompt before the first turn is the chat template's system and user messages.
        head = tok.decode(tokens[:spans[0][0]], skip_special_tokens=False)
        assert head.startswith("<|im_start|>system\n") and head.endswith("<|im_start|>assistant\n")
        assert f"Task {r['task_id']}" in head


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
        # Interrupted once the first episode has ended: the others are then mid-episode
        # (a fixed sleep after the start raced a slow machine into interrupting none).
        while "[1/12]" not in log.read_text() and time.monotonic() - start < deadline and proc.poll() is None:
            time.sleep(0.2)
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


@pytest.mark.parametrize("overlap", [False, True], ids=["plain", "overlap"])
def test_local_run_with_the_small_model_records_the_sampled_tokens(caf_agent, tmp_path, workspace_root, overlap):
    """The libtorch backend end to end: every record holds the exact token sequence the
    sampler saw, the loss mask covers sampled tokens only, and the recorded logprobs are
    what an independent implementation (transformers) computes for those tokens; also with
    overlapped decoding ([policy] overlap), whose replies end on <|im_end|> a step after it is drawn."""
    model = tiny_model()
    cfg = local_config(tmp_path, workspace_root)
    cfg.write_text(cfg.read_text().replace('backend = "replay"', f'backend = "libtorch"\nmodel_dir = "{model}"\n'
                                           'max_new_tokens = 48\nmax_batch = 4\nseed = 7\nmax_context = 8192\n'
                                           f'overlap = {"true" if overlap else "false"}'))
    res = subprocess.run([str(caf_agent), "--role", "local", "--config", str(cfg), "--episodes", "3"],
                         capture_output=True, text=True, timeout=600, cwd=REPO)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "policy: libtorch" in res.stderr, res.stderr[-2000:]
    # The local role's inference and rollout roles share one loaded model.
    assert res.stderr.count("the engine this process already loaded") == 1, res.stderr[-2000:]
    # Its summary once the roles let it go: overlapped steps only with [policy] overlap.
    summary = re.findall(r"policy: engine ran \d+ steps: (\d+) decode \((\d+) overlapped", res.stderr)
    assert len(summary) == 1, res.stderr[-2000:]
    decode, overlapped = map(int, summary[0])
    assert decode > 0 and (overlapped > 0 if overlap else overlapped == 0), summary
    records = records_in(store_of(res.stdout))
    assert len(records) == 3

    import torch
    import transformers
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(model / "tokenizer.json"))
    lm = transformers.AutoModelForCausalLM.from_pretrained(str(model), dtype=torch.float32).eval()
    skill_first_line = (REPO / "skills" / "workspace" / "SKILL.md").read_text().splitlines()[0]
    for r in records:
        assert r["termination"] != "aborted", r["abort_reason"]
        tokens, mask, logprobs = r["tokens"], r["loss_mask"], r["logprobs"]
        assert len(tokens) == len(mask) == len(logprobs) > 0
        assert r["turns"] >= 1 and len(r["turn_starts"]) == r["turns"]
        prompt = tok.decode(tokens[:r["turn_starts"][0]], skip_special_tokens=False)
        assert prompt.startswith("<|im_start|>system\n") and skill_first_line in prompt
        assert prompt.endswith("<|im_start|>assistant\n")
        sampled = [i for i, m in enumerate(mask) if m]
        assert sampled and all(mask[s] for s in r["turn_starts"])
        assert all(logprobs[i] == 0 for i, m in enumerate(mask) if not m)
        # The assistant text of each turn is the decoding of its sampled tokens.
        im_end = tok.token_to_id("<|im_end|>")
        for k, start in enumerate(r["turn_starts"]):
            end = start
            while end < len(mask) and mask[end]:
                end += 1
            body = [t for t in tokens[start:end] if t != im_end]
            assert tok.decode(body, skip_special_tokens=False) == r["turn_texts"][k]
        with torch.no_grad():
            logits = lm(torch.tensor([tokens])).logits[0]
        ref = torch.log_softmax(logits.double(), dim=-1)
        for i in sampled:
            want = ref[i - 1, tokens[i]].item()
            assert abs(want - logprobs[i]) < 1e-3, (i, want, logprobs[i])
