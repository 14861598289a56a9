#!/usr/bin/env python3
"""Builds caf-agent and learner_tool for another torch version than the build tree's (the
device's), without a second full build: the objects that include torch headers (found with
`ninja -t deps`) are compiled again with the other torch's headers, every other object and
static library is the build tree's, and both binaries are linked against the other torch's
libraries (--allow-shlib-undefined: its CUDA dependencies are the device's). Then stripped, with
the shared libraries the device image lacks copied beside them (bench/train/README.md).

    python3 bench/train/build_for_torch.py --build build --torch DIR/torch --out runs/device-bin [-j 2]

--torch: an unpacked torch wheel's torch/ folder (include/, lib/), e.g. of
`pip download torch==2.11.0 --no-deps`. The build tree must be built (caf-agent, learner_tool).
An object is compiled again only when it is older than its source or one of its headers.
"""
import argparse
import concurrent.futures as cf
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

# The libraries caf-agent needs that the device image (Ubuntu 24.04 with torch) lacks, and bwrap's.
CARRIED = ["libtomlplusplus.so.3", "libcaf_openssl.so.0.17.6", "libcaf_io.so.0.17.6", "libcaf_core.so.0.17.6",
           "libfmt.so.9", "libboost_filesystem.so.1.74.0", "libre2.so.9", "libssl.so.3", "libcrypto.so.3",
           "libselinux.so.1", "libcap.so.2", "libpcre2-8.so.0"]
TORCH_LIBS = ("policy/model/libcaf_agent_policy_model.a", "learner/libcaf_agent_learner.a")


def ninja(build, *args):
    return subprocess.run(["ninja", "-C", str(build), "-t", *args], capture_output=True, text=True, check=True).stdout


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", type=pathlib.Path, required=True)
    p.add_argument("--torch", type=pathlib.Path, required=True)
    p.add_argument("--out", type=pathlib.Path, required=True)
    p.add_argument("-j", type=int, default=2)
    a = p.parse_args()
    build, other, out = a.build.resolve(), a.torch.resolve(), a.out.resolve()
    objdir = out / "objects"
    cmds = {}
    for c in json.load(open(build / "compile_commands.json")):
        m = re.search(r"-o (\S+\.o)\b", c["command"])
        if m:
            cmds[m.group(1)] = c
    own = None  # the build tree's torch, read off an object's include flags
    for c in cmds.values():
        m = re.search(r"-isystem (\S+)/include(?:\s|$)", c["command"])
        if m and (pathlib.Path(m.group(1)) / "lib" / "libtorch.so").exists():
            own = m.group(1)
            break
    if own is None:
        sys.exit("build_for_torch: no torch include directory in the build tree's compile commands")
    wanted = []
    for line in ninja(build, "targets", "all").splitlines():
        o = line.split(":")[0]
        if o.endswith(".o") and not o.startswith(("tests/", "bench/")) and "policy_model_tool" not in o \
                and "weight_sync_bench" not in o and own + "/include" in ninja(build, "deps", o):
            wanted.append(o)

    def compile_one(o):
        c = cmds[o]
        args = shlex.split(c["command"].replace(own, str(other)))
        if os.path.basename(args[0]) == "ccache":
            args = args[1:]
        dst = objdir / o
        args[args.index("-o") + 1] = str(dst)
        dst.parent.mkdir(parents=True, exist_ok=True)
        deps = [d.strip().replace(own, str(other)) for d in ninja(build, "deps", o).splitlines()[1:] if d.strip()]
        newest = max([os.path.getmtime(c["file"])] + [os.path.getmtime(d) for d in deps if os.path.exists(d)])
        if dst.exists() and dst.stat().st_mtime > newest:
            return o, 0, "up to date"
        r = subprocess.run(args, cwd=c["directory"], capture_output=True, text=True)
        return o, r.returncode, r.stderr[-3000:]

    print(f"{len(wanted)} objects include torch headers", file=sys.stderr)
    with cf.ThreadPoolExecutor(a.j) as ex:
        for o, rc, err in ex.map(compile_one, wanted):
            print(o, "ok" if rc == 0 else "FAILED", err if rc else "", file=sys.stderr, flush=True)
            if rc:
                sys.exit(1)
    replaced = {}
    for lib in TORCH_LIBS:  # the two static libraries with torch objects, rebuilt from both sets
        members = subprocess.run(["ar", "t", str(build / lib)], capture_output=True, text=True, check=True).stdout.split()
        objs = []
        for m in members:
            rel = next(str(q.relative_to(build)) for q in (build / pathlib.Path(lib).parent / "CMakeFiles").rglob(m))
            objs.append(str(objdir / rel) if (objdir / rel).exists() else str(build / rel))
        dst = out / pathlib.Path(lib).name
        dst.unlink(missing_ok=True)
        subprocess.run(["ar", "qcs", str(dst), *objs], check=True)
        replaced[lib] = str(dst)
    for target, obj in (("caf-agent", None), ("learner/learner_tool", "learner/CMakeFiles/learner_tool.dir/learner_tool.cpp.o")):
        cmd = ninja(build, "commands", target).strip().splitlines()[-1]
        cmd = cmd.removeprefix(": && ").removesuffix(" && :")
        for lib, dst in replaced.items():
            cmd = cmd.replace(" " + lib, " " + dst)
        if obj:
            cmd = cmd.replace(" " + obj, " " + str(objdir / obj))
        name = pathlib.Path(target).name
        cmd = cmd.replace(own, str(other)).replace(f"-o {target} ", f"-o {out / ('unstripped-' + name)} ")
        cmd = cmd.replace(" -pthread", " -pthread -Wl,--allow-shlib-undefined", 1) if " -pthread" in cmd else \
            cmd.replace("c++ ", "c++ -Wl,--allow-shlib-undefined ", 1)
        subprocess.run(cmd, shell=True, cwd=build, check=True)
        subprocess.run(["strip", "-o", str(out / name), str(out / ("unstripped-" + name))], check=True)
    (out / "lib").mkdir(exist_ok=True)
    for lib in CARRIED:
        shutil.copy(pathlib.Path("/lib/x86_64-linux-gnu") / lib, out / "lib" / lib)
    shutil.copy(shutil.which("bwrap"), out / "bwrap")
    print(json.dumps({"out": str(out), "recompiled_objects": len(wanted)}))


if __name__ == "__main__":
    main()
