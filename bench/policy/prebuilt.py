#!/usr/bin/env python3
"""policy_model_tool built on this machine for the GPU machine's torch, so that a device call skips its build.

A fresh GPU machine spends 85-116 s of a call building policy_model_tool (the LibTorch-only
build), out of 600 s a call and 30 minutes a session. The same binary can be built here, against
the GPU machine's torch wheel unpacked (its headers and libraries; this machine need not import
it), and carried to the device:

    python3 bench/policy/prebuilt.py build --wheel torch-2.11.0-....whl [--out prebuilt] [--patch P ...]
    # then on the device: PREBUILT=prebuilt bash bench/policy/run_h200.sh ...
    #                  or PREBUILT=prebuilt PATCH="P ..." bash bench/policy/run_patch_ab.sh ...

`build` writes OUT/policy_model_tool.bin (stripped) and OUT/stamp.json: a hash of the sources that
go into the tool (SOURCES) and the wheel's torch version. With --patch, also each patch's tool, the
patch applied alone to this tree (and taken out again), as run_patch_ab.sh's sides name them:
OUT/sides/b (one patch) or OUT/sides/b1, b2, .. in order (`install` takes whichever tool of a
folder and its sides/ fits the tree by its stamp, whatever the side's name). Every tool built is also held to
tests/policy/model/test_sass_order.py over its own kernel objects (a side with its patch in place):
`build` fails, naming the sides, where those checks fail. On the device, `install` (called by
bench_generate.build_tool when given `prebuilt`) uses the binary only if the stamp matches the
tree it runs in and the torch it imports, the build folder has not been configured (an earlier
build there stays ninja's), and the binary starts with that torch's libraries (its usage line).
Then it writes the build folder's policy/model/policy_model_tool as a small script that runs the
binary with those libraries on LD_LIBRARY_PATH, and the folder's prebuilt.json; otherwise it says
why and the caller builds. Later build_tool calls on that folder without `prebuilt` (bench_agent.py
--build-dir, the kernel benches) take the installed tool while the tree's sources still match
(`installed`), instead of configuring the folder and building.
"""
import argparse
import hashlib
import json
import os
import pathlib
import shutil
import stat
import subprocess
import sys
import zipfile

REPO = pathlib.Path(__file__).resolve().parents[2]
# What the LibTorch-only build of policy_model_tool reads: the top-level and cmake/ files and the
# folders its sources and headers come from (policy/ includes base/ and learner/ headers).
SOURCES = ("CMakeLists.txt", "cmake", "base", "policy", "learner")
TOOL = "policy/model/policy_model_tool"


def source_stamp(root=REPO):
    """sha256 over SOURCES' files under `root` (relative path and bytes, in path order)."""
    digest = hashlib.sha256()
    files = []
    for name in SOURCES:
        path = root / name
        files += [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    for path in sorted(f for f in files if "__pycache__" not in f.parts):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def library_dirs(torch_dir):
    """torch's lib/ and the wheel's nvidia libraries beside it (libcudart, libcupti): what the
    binary itself links; torch's own libraries find the rest through their RUNPATH."""
    dirs = [torch_dir / "lib"]
    dirs += sorted(p for p in (torch_dir.parent / "nvidia").glob("*/lib") if p.is_dir())
    return dirs


def tools_in(prebuilt):
    """The tools of a `build` output folder: the folder itself and its sides/ folders, each that
    holds policy_model_tool.bin and stamp.json, as (folder, stamp) in that order."""
    folders = [prebuilt, *sorted(p for p in (prebuilt / "sides").glob("*") if p.is_dir())]
    return [(f, json.loads((f / "stamp.json").read_text())) for f in folders
            if (f / "policy_model_tool.bin").is_file() and (f / "stamp.json").is_file()]


def install(prebuilt, build_dir, torch_dir, torch_version, root=REPO):
    """The build folder's tool as the prebuilt binary, or None; and a line saying which and why.
    `prebuilt` is a `build` output folder (or one of its sides/ folders): its tool or a side's,
    whichever was built from this tree's sources. Rationale: a side's name is its place in the
    build's --patch list, which need not be its place in a later call's PATCH (one patch of
    several built, a side of its own); the stamp says which tree a tool is."""
    prebuilt, build_dir = pathlib.Path(prebuilt).resolve(), pathlib.Path(build_dir)
    tools = tools_in(prebuilt)
    if not tools:
        return None, f"prebuilt: {prebuilt} has no policy_model_tool.bin and stamp.json; building"
    sources = source_stamp(root)
    fitting = [(f, stamp) for f, stamp in tools if stamp.get("sources") == sources]
    if not fitting:
        return None, "prebuilt: built from other sources than this tree's; building"
    prebuilt, stamp = fitting[0]
    binary = prebuilt / "policy_model_tool.bin"
    if stamp.get("torch") != torch_version:
        return None, f"prebuilt: built for torch {stamp.get('torch')}, this is {torch_version}; building"
    if (build_dir / "build.ninja").exists():
        return None, f"prebuilt: {build_dir} is a configured build folder; building there"
    tool = build_dir / TOOL
    tool.parent.mkdir(parents=True, exist_ok=True)
    libs = ":".join(str(d) for d in library_dirs(pathlib.Path(torch_dir)))
    tool.write_text("#!/bin/sh\n# bench/policy/prebuilt.py: the prebuilt tool with this machine's torch libraries.\n"
                    f"LD_LIBRARY_PATH='{libs}'${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}} exec '{binary}' \"$@\"\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    try:
        started = subprocess.run([str(tool)], capture_output=True, text=True, timeout=60)
        ok = "usage: policy_model_tool" in started.stderr + started.stdout
        why = (started.stderr or started.stdout).strip().splitlines()[-1:] if not ok else []
    except (OSError, subprocess.SubprocessError) as e:
        ok, why = False, [str(e)]
    if not ok:
        tool.unlink()
        return None, f"prebuilt: the binary does not start here ({' '.join(why) or 'no usage line'}); building"
    (build_dir / "prebuilt.json").write_text(json.dumps(dict(stamp, binary=str(binary)), indent=1) + "\n")
    return tool, f"prebuilt: {binary} (sources {stamp['sources'][:12]}, torch {torch_version})"


def installed(build_dir, torch_version, root=REPO):
    """The tool `install` put in an unconfigured build folder, while the tree's sources and torch
    are still those it was built for; else None."""
    build_dir = pathlib.Path(build_dir)
    marker, tool = build_dir / "prebuilt.json", build_dir / TOOL
    if (build_dir / "build.ninja").exists() or not marker.is_file() or not tool.is_file():
        return None
    stamp = json.loads(marker.read_text())
    if stamp.get("torch") != torch_version or stamp.get("sources") != source_stamp(root):
        return None
    return tool


def unpack_torch(wheel, into):
    """torch/{include,lib,share} and version.py of a torch wheel under `into`; its torch folder and version."""
    torch_dir = into / "torch"
    with zipfile.ZipFile(wheel) as z:
        for member in z.namelist():
            if member.startswith(("torch/include/", "torch/lib/", "torch/share/")) or member == "torch/version.py":
                z.extract(member, into)
    version = None
    for line in (torch_dir / "version.py").read_text().splitlines():
        if line.startswith("__version__"):
            version = line.split("=", 1)[1].strip().strip("'\"")
    return torch_dir, version


def build_one(torch_dir, version, cmake_build, out, wheel):
    """The tree as it is now, built into `cmake_build`; its stripped tool and stamp into `out`."""
    configure = ["cmake", "-S", str(REPO), "-B", str(cmake_build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                 "-DCAF_AGENT_LIBTORCH_ONLY=ON", f"-DCAF_AGENT_TORCH_PREFIX={torch_dir / 'share/cmake'}",
                 # torch's own libraries need others of the wheel's (cusparseLt, nvshmem) that are not
                 # unpacked here; the GPU machine's torch resolves them when the tool starts.
                 "-DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined"]
    subprocess.run(configure, check=True)
    subprocess.run(["cmake", "--build", str(cmake_build), "--target", "policy_model_tool", "-j",
                    str(os.cpu_count() or 2)], check=True)
    out.mkdir(parents=True, exist_ok=True)
    binary = out / "policy_model_tool.bin"
    shutil.copy2(cmake_build / TOOL, binary)
    subprocess.run(["strip", "--strip-unneeded", str(binary)], check=True)
    stamp = {"sources": source_stamp(), "torch": version, "wheel": pathlib.Path(wheel).name}
    (out / "stamp.json").write_text(json.dumps(stamp, indent=1) + "\n")
    print(f"{binary}: {binary.stat().st_size / 2**20:.1f} MiB, torch {version}, sources {stamp['sources'][:12]}")


# The static checks of the kernels' order around the programmatic wait, and where they read the objects.
SASS_TEST = "tests/policy/model/test_sass_order.py"
KERNEL_OBJECTS = "policy/model/CMakeFiles/caf_agent_policy_kernels.dir"


def check_sass(cmake_build):
    """test_sass_order.py over `cmake_build`'s kernel objects, with the tree as it is now (a side's
    patch applied, its own checks with it): None when they pass, else what failed. Rationale: a held
    patch whose kernel reads or writes before its programmatic wait is found here in seconds, not on
    the device after its gate has spent a call's minutes (the checks need no GPU)."""
    objects = pathlib.Path(cmake_build) / KERNEL_OBJECTS
    if not (objects / "fused_kernels.cu.o").is_file():
        return f"no kernel objects in {objects}: the checks cannot run"
    # The project's venv (./x setup): pytest, and cuobjdump from its nvidia wheel (requirements.txt).
    venv = REPO / ".venv/bin/python"
    python = str(venv) if venv.is_file() else sys.executable
    done = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", SASS_TEST], cwd=REPO,
                          env=dict(os.environ, CAF_AGENT_BUILD_DIR=str(cmake_build)), capture_output=True, text=True)
    if done.returncode == 0:
        lines = done.stdout.strip().splitlines()
        print(f"prebuilt: {SASS_TEST} over {cmake_build}: {lines[-1] if lines else 'passed'}")
        return None
    return "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])


def side_names(patches):
    """run_patch_ab.sh's names of the patches' sides: b for one, else b1, b2, .."""
    return ["b"] if len(patches) == 1 else [f"b{k}" for k in range(1, len(patches) + 1)]


def build(args):
    torch_dir, version = unpack_torch(args.wheel, args.build_dir / "wheel")
    if version is None:
        sys.exit(f"prebuilt: {args.wheel} has no torch/version.py __version__")
    for patch in args.patch:
        if subprocess.run(["git", "apply", "--check", str(patch)], cwd=REPO).returncode != 0:
            sys.exit(f"prebuilt: --patch {patch} does not apply to this tree")
    failed = {}
    build_one(torch_dir, version, args.build_dir / "build", args.out, args.wheel)
    if (why := check_sass(args.build_dir / "build")) is not None:
        failed["a (the tree)"] = why
    shutil.rmtree(args.out / "sides", ignore_errors=True)
    for patch, side in zip(args.patch, side_names(args.patch)):
        # Applied in place (as run_patch_ab.sh does on the device), built in a folder of its own,
        # checked, and taken out again whatever happens.
        subprocess.run(["git", "apply", str(patch)], cwd=REPO, check=True)
        try:
            build_one(torch_dir, version, args.build_dir / f"build-{side}", args.out / "sides" / side, args.wheel)
            if (why := check_sass(args.build_dir / f"build-{side}")) is not None:
                failed[f"{side} ({patch})"] = why
        finally:
            subprocess.run(["git", "apply", "-R", str(patch)], cwd=REPO, check=True)
    if failed:
        sys.exit("prebuilt: the kernels' order around the programmatic wait (" + SASS_TEST + ") fails for " +
                 "; ".join(failed) + ":\n" + "\n\n".join(f"{side}:\n{why}" for side, why in failed.items()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the tool against a torch wheel into --out")
    b.add_argument("--wheel", type=pathlib.Path, required=True, help="the GPU machine's torch wheel (pip download)")
    b.add_argument("--out", type=pathlib.Path, default=REPO / "prebuilt")
    b.add_argument("--build-dir", type=pathlib.Path, default=pathlib.Path("/tmp/caf-agent-prebuild"))
    b.add_argument("--patch", type=pathlib.Path, nargs="*", default=[],
                   help="patches (run_patch_ab.sh's PATCH, in its order): each one's tool too, under OUT/sides")
    args = parser.parse_args()
    if not args.wheel.is_file():
        sys.exit(f"prebuilt: --wheel {args.wheel}: no such file")
    build(args)


if __name__ == "__main__":
    main()
