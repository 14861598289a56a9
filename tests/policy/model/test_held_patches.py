"""The held patches (docs/held/*.patch) stay ready for the device call that measures them (CPU).

A held patch is a change built and tested here but kept out of the tree until a GPU run decides it
(docs/POLICY_MODEL_PERF.md, "Held patches"); bench/policy/prebuilt.py and run_patch_ab.sh apply it to the
tree as it is at that call. Two ways one goes stale without anyone seeing: a change to the files it
touches, after which `git apply` refuses it on the device machine and the call's time is lost
(two patches of 2026-12-05 were found that way); or no word of it in the docs, so nobody knows what
it is for or which call measures it. A patch that no longer applies is rebased, or moved beside its
results in bench/results/ with the docs saying why it was dropped.
"""
import pathlib
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
HELD = sorted((REPO / "docs" / "held").glob("*.patch"))
DOCS = REPO / "docs" / "POLICY_MODEL_PERF.md"


def git_apply_check(patch):
    """(return code, stderr) of `git apply --check` of `patch` against the working tree."""
    git = shutil.which("git")
    if git is None:
        pytest.skip("git not on PATH")
    done = subprocess.run([git, "apply", "--check", str(patch)], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    return done.returncode, done.stderr


@pytest.mark.parametrize("patch", HELD, ids=[p.name for p in HELD])
def test_a_held_patch_applies_to_the_tree(patch):
    rc, err = git_apply_check(patch)
    assert rc == 0, (f"{patch.relative_to(REPO)} no longer applies to the tree: rebase it, or move it beside "
                     f"its results in bench/results/ and say why in docs/POLICY_MODEL_PERF.md.\n{err}")


@pytest.mark.parametrize("patch", HELD, ids=[p.name for p in HELD])
def test_a_held_patch_is_described_in_the_docs(patch):
    name = f"docs/held/{patch.name}"
    assert name in DOCS.read_text(), f"{name} is not named in {DOCS.relative_to(REPO)}: say what it is and how it is measured"


def test_the_apply_check_refuses_a_patch_that_does_not_apply(tmp_path):
    # The check itself: a patch whose context is not in the tree is refused.
    stale = tmp_path / "stale.patch"
    stale.write_text("--- a/docs/POLICY_MODEL.md\n+++ b/docs/POLICY_MODEL.md\n@@ -1,1 +1,1 @@\n"
                     "-# a first line the file does not have\n+# another\n")
    rc, err = git_apply_check(stale)
    assert rc != 0 and "patch does not apply" in err, err
