"""bench/policy/device_env.sh (CPU): what a device call brings back names no machine path, and is
packed into one archive (the device machine returns at most 8 files)."""
import subprocess
import sys
import tarfile

import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def sourced(cwd, script):
    """`script` run by bash in `cwd` after sourcing device_env.sh, with this Python as PY."""
    return subprocess.run(["bash", "-c", f". {ROOT}/bench/policy/device_env.sh; {script}"], cwd=cwd,
                          capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin",
                                                                            "PY": sys.executable})


def test_scrub_paths_names_the_tree_the_build_and_temporary_folders_by_role(tmp_path):
    tree, out, build = tmp_path / "tree", tmp_path / "tree/out", tmp_path / "build-elsewhere"
    out.mkdir(parents=True)
    (out / "log.txt").write_text(f"tool {tree}/build/x\nin {build}/policy\n"
                                 "\"--out\", \"/tmp/tmpt2yej19f/y.bin\"\nsix /tmp/other stays\n"
                                 "tmp_path = PosixPath('/tmp/pytest-of-root/pytest-1/test_a0')\n")
    proc = sourced(tree, f"scrub_paths out {build}")
    assert proc.returncode == 0, proc.stderr
    text = (out / "log.txt").read_text()
    assert str(tmp_path) not in text and "/tmp/tmpt2yej19f" not in text
    assert "tool ./build/x" in text and "in <build>/policy" in text and '"<tmp>/y.bin"' in text
    assert "six /tmp/other stays" in text
    assert "tmp_path = PosixPath('<tmp>/test_a0')" in text  # pytest's folder, in a failing test's traceback


def test_pack_out_leaves_one_archive_of_everything(tmp_path):
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    (out / "a.json").write_text("{}")
    (out / "sub/b.log").write_text("b")
    proc = sourced(tmp_path, "pack_out out calls")
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in out.iterdir()] == ["calls.tgz"]
    with tarfile.open(out / "calls.tgz") as tar:
        names = {n.lstrip("./") for n in tar.getnames()}
    assert {"a.json", "sub/b.log"} <= names
