"""The system prompt of the episodes: `rollout.skill_file` replaces the workspace's SKILL.md and
`rollout.prompt_tools` lists only the named tools (the embedded default's short prompt for the
small model, docs/TRAINING.md); a tool name the sandbox does not serve is a clear error."""
import subprocess

from cafagent_testlib import REPO, records_in, store_of, tiny_model
from test_local_job import local_config


def test_skill_file_and_prompt_tools_make_the_prompt(caf_agent, tmp_path, workspace_root):
    cfg = local_config(tmp_path, workspace_root)
    # The RFT demonstrations, token-level (the tiny model's tokenizer), with simulated evaluations:
    # only the prompt matters here.
    cfg.write_text(cfg.read_text().replace('[gpu_pool]\n', '[gpu_pool]\nbackend = "sim"\n') +
                   f'model_dir = "{tiny_model()}"\nsim_eval_ms_mean = 5.0\nreplay_path = "skills/replay/demonstrations.jsonl"\n'
                   '[rollout]\nskill_file = "skills/compact/SKILL.md"\nprompt_tools = ["Read", "Write", "Bash"]\n'
                   'tasks_dir = "skills/tasks"\n')
    res = subprocess.run([str(caf_agent), "--role", "local", "--config", str(cfg)],
                         capture_output=True, text=True, timeout=300, cwd=REPO)
    assert res.returncode == 0, res.stderr[-3000:]
    records = records_in(store_of(res.stdout))
    assert len(records) == len(list((REPO / "skills" / "tasks").glob("*.py")))
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(tiny_model() / "tokenizer.json"))
    skill = (REPO / "skills" / "compact" / "SKILL.md").read_text()
    for r in records:
        prompt = tok.decode(list(r["tokens"])[:r["turn_starts"][0]], skip_special_tokens=False)
        assert prompt.startswith("<|im_start|>system\n" + skill), prompt[:300]
        tools = prompt.split("<tools>\n")[1].split("\n</tools>")[0]
        names = [line.split('"name": "')[1].split('"')[0] for line in tools.strip().splitlines()]
        assert names == ["Read", "Write", "Bash"], tools[:500]
        assert "# Writing a faster kernel" not in prompt  # the workspace's SKILL.md is not the prompt
        assert f"Task {r['task_id']} (level" in prompt
        assert r["turns"] == 3 and r["termination"] == "finished", (r["task_id"], r["turns"], r["termination"])


def test_unknown_prompt_tool_and_missing_skill_file_are_named(caf_agent, tmp_path, workspace_root):
    cfg = local_config(tmp_path, workspace_root)
    cfg.write_text(cfg.read_text() + '[rollout]\nprompt_tools = ["Read", "Telnet"]\n')
    res = subprocess.run([str(caf_agent), "--role", "local", "--config", str(cfg)],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert res.returncode != 0
    assert "rollout.prompt_tools: 'Telnet' is not a tool (Bash, " in res.stderr, res.stderr[-2000:]
    cfg.write_text(cfg.read_text().replace('prompt_tools = ["Read", "Telnet"]', 'skill_file = "no/such/SKILL.md"'))
    res = subprocess.run([str(caf_agent), "--role", "local", "--config", str(cfg)],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert res.returncode != 0
    assert "rollout.skill_file: 'no/such/SKILL.md' does not exist" in res.stderr, res.stderr[-2000:]
