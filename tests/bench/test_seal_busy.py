"""bench/judge/seal_busy.py: it seals memory files and reports what the kernel refused and what
the transport's retry recovered; bad arguments are refused by name."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "judge", "seal_busy.py")


def _run(*args):
    return subprocess.run([sys.executable, SCRIPT, *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def test_it_seals_and_summarizes():
    r = _run("--seconds", 0.5, "--mib", 1)
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r"SUMMARY seals=(\d+) busy=(\d+) recovered=(\d+) failed=(\d+)", r.stdout)
    assert m, r.stdout
    seals, busy, recovered, failed = map(int, m.groups())
    assert seals > 0 and failed == 0 and recovered == busy


@pytest.mark.parametrize("args, says", [
    (["--seconds", "0"], "--seconds and --mib must be positive"),
    (["--mib", "-1"], "--seconds and --mib must be positive"),
    (["--compact-every", "-1"], "--compact-every not negative"),
])
def test_bad_arguments_are_refused_by_name(args, says):
    r = _run(*args)
    assert r.returncode == 2 and says in r.stderr, r.stderr
