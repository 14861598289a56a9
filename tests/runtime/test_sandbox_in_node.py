"""The sandbox inside a real node: the agent's shell, run by `caf-agent --role local`, sees
none of the node's descriptors (the trajectory store's open segment, the middleman's sockets,
directory descriptors of the host's `/`)."""
import json
import re
import subprocess

from cafagent_testlib import REPO, records_in, store_of
from test_local_job import local_config


def test_bash_in_a_local_node_lists_only_its_own_descriptors(caf_agent, tmp_path, workspace_root):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "add_relu.py").write_text((REPO / "skills" / "tasks" / "add_relu.py").read_text())
    # One recorded turn: the shell's own descriptor table and where each one points, read by a
    # child (`; true` keeps bash from exec'ing ls, so $$ is the shell, not the reader).
    # The listing goes through a file, not a pipe: with `ls | sed` the shell itself holds the
    # pipeline's two ends while ls reads its table (seen as FD 3 and 4 -> pipe:[...], at random).
    command = "ls -l /proc/$$/fd > fds.txt; sed -n 's/.* \\([0-9]*\\) -> /FD \\1 -> /p' fds.txt; true"
    call = json.dumps({"name": "Bash", "arguments": {"command": command}})
    replay = tmp_path / "replay.jsonl"
    replay.write_text(json.dumps({"task_id": "add_relu",
                                  "turns": [f"<tool_call>\n{call}\n</tool_call>", "Done."]}) + "\n")
    cfg = local_config(tmp_path, workspace_root)
    cfg.write_text(cfg.read_text() + f'replay_path = "{replay}"\n[rollout]\ntasks_dir = "{tasks}"\n')
    res = subprocess.run([str(caf_agent), "--role", "local", "--config", str(cfg), "--episodes", "1"],
                         capture_output=True, text=True, timeout=600, cwd=REPO)
    assert res.returncode == 0, res.stderr[-3000:]
    records = records_in(store_of(res.stdout))
    assert len(records) == 1
    listing = next(o for o in records[0]["observations"] if "FD " in o)
    fds = dict(re.findall(r"FD (\d+) -> (.*)", listing))
    assert set(fds) <= {"0", "1", "2", "255"}, listing
    assert "1" in fds, listing
    # The node's store segment (open for appending) is what leaked before.
    assert not any("trajectories" in target or target == "/" for target in fds.values()), listing
