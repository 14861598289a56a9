"""Fixtures shared by every Python test (helpers live in cafagent_testlib.py)."""
import pathlib

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
