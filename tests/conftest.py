"""Fixtures shared by every Python test (helpers live in cafagent_testlib.py)."""
import pathlib
import shutil
import tempfile

import pytest

from cafagent_testlib import Node, build_dir, require_binary


@pytest.fixture(scope="session")
def caf_agent() -> pathlib.Path:
    return require_binary(build_dir() / "caf-agent")


@pytest.fixture
def nodes(caf_agent, tmp_path):
    started = []

    def start(*args, name=None):
        node = Node(caf_agent, args, tmp_path / f"{name or len(started)}.log")
        started.append(node)
        return node

    yield start
    for n in started:
        n.kill()


@pytest.fixture
def workspace_root():
    """Sandbox uids must reach the workspaces: pytest's tmp dirs are mode 0700."""
    ws = pathlib.Path(tempfile.mkdtemp(prefix="caf_agent_ws_", dir="/tmp"))
    ws.chmod(0o755)
    yield ws
    leftovers = list(ws.iterdir())
    shutil.rmtree(ws, ignore_errors=True)
    assert not leftovers, f"workspaces left behind: {leftovers}"
