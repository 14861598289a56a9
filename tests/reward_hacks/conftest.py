"""Fixtures of the reward-hack suite: one CPU eval worker per session (see hack_helpers)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hack_helpers import Judge, WorkerClient, build_root  # noqa: E402


@pytest.fixture(scope="session")
def judge():
    env = {"MAX_JOBS": "2"}
    client = WorkerClient(device="cpu", threads=1, build_root=build_root(), env=env)
    yield Judge(client)
    client.close()
