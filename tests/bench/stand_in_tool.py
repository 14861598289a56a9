"""What the kernel benches' CPU tests share: running a bench script, and a stand-in script for
policy_model_tool that prints what the real one would (the real tool runs on the GPU)."""
import pathlib
import stat
import subprocess
import sys


def run_script(script, *args):
    """`script` (a path) run with `args` by this Python; its completed process."""
    return subprocess.run([sys.executable, str(script), *map(str, args)], capture_output=True, text=True, timeout=120)


def stand_in(tmp_path, body, name="policy_model_tool", shell="/bin/sh"):
    """An executable script tmp_path/`name` run by `shell`, with `body` after its #! line."""
    tool = pathlib.Path(tmp_path) / name
    tool.write_text(f"#!{shell}\n" + body)
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return tool
