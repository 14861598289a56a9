#!/usr/bin/env python3
"""Assembles an agent workspace for one task.

    python skills/make_workspace.py --task softmax --flavour cpu --out /tmp/ws

Copies the workspace template (SKILL.md, model_new.py, compile/verify/profile, include/),
the task as model.py, and a copy of the harness (.harness/) for the local commands. The
judge never reads any of these back: it evaluates only model_new.py and kernels/**.
"""
import argparse
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))


def make(task: str, flavour: str, out: str) -> str:
    """Creates the workspace at out and returns its path."""
    src = task if task.endswith(".py") else os.path.join(HERE, "tasks", f"{task}.py")
    shutil.copytree(os.path.join(HERE, "workspace"), out, dirs_exist_ok=True)
    shutil.copy(src, os.path.join(out, "model.py"))
    os.makedirs(os.path.join(out, "kernels"), exist_ok=True)
    shutil.copytree(os.path.join(HERE, "eval_worker", "caf_agent_eval"),
                    os.path.join(out, ".harness", "caf_agent_eval"), dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    # the harness finds the kernel header relative to itself (build.INFRA_INCLUDE)
    shutil.copytree(os.path.join(HERE, "workspace", "include"),
                    os.path.join(out, "workspace", "include"), dirs_exist_ok=True)
    with open(os.path.join(out, ".flavour"), "w") as f:
        f.write(flavour + "\n")
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", required=True, help="bundled task name or path to a model.py")
    p.add_argument("--flavour", choices=["cpu", "cuda"], default="cuda")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    print(make(a.task, a.flavour, a.out))
