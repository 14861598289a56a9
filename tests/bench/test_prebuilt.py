"""bench/policy/prebuilt.py (CPU): the source stamp follows the tool's sources and nothing else; a
prebuilt tool is used only for the tree and torch it was built for, in an unconfigured build
folder, and when it starts with that torch's libraries (the wrapper puts them on LD_LIBRARY_PATH
and passes the arguments through); a torch wheel unpacks to its headers, libraries and version.
The binaries here are stand-in scripts; the real one runs on the GPU machine."""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench/policy"))
import prebuilt  # noqa: E402

STARTS = "#!/bin/sh\necho \"usage: policy_model_tool logits|...\" >&2\necho \"LD=$LD_LIBRARY_PATH ARGS=$*\"\nexit 1\n"


def tree(root):
    for rel, text in (("CMakeLists.txt", "project(x)\n"), ("cmake/a.cmake", "set(A 1)\n"),
                      ("policy/model/k.cu", "// kernel\n"), ("learner/l.hpp", "// learner\n"),
                      ("base/b.hpp", "// base\n"), ("docs/readme.md", "text\n")):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_the_stamp_follows_the_tools_sources_only(tmp_path):
    root = tree(tmp_path / "src")
    first = prebuilt.source_stamp(root)
    (root / "docs/readme.md").write_text("other text\n")
    assert prebuilt.source_stamp(root) == first
    (root / "policy/model/k.cu").write_text("// kernel, changed\n")
    changed = prebuilt.source_stamp(root)
    assert changed != first
    (root / "policy/model/k2.cu").write_text("")
    assert prebuilt.source_stamp(root) not in (first, changed)


def folder(tmp_path, root, binary=STARTS, torch_version="2.11.0+cu130"):
    out = tmp_path / "prebuilt"
    out.mkdir()
    (out / "policy_model_tool.bin").write_text(binary)
    (out / "policy_model_tool.bin").chmod(0o755)
    (out / "stamp.json").write_text(json.dumps({"sources": prebuilt.source_stamp(root), "torch": torch_version}))
    torch_dir = tmp_path / "site/torch"
    (torch_dir / "lib").mkdir(parents=True)
    (tmp_path / "site/nvidia/cu13/lib").mkdir(parents=True)
    return out, torch_dir


def test_a_fitting_prebuilt_tool_is_installed_as_a_wrapper_with_torchs_libraries(tmp_path):
    root = tree(tmp_path / "src")
    out, torch_dir = folder(tmp_path, root)
    build = tmp_path / "build"
    tool, why = prebuilt.install(out, build, torch_dir, "2.11.0+cu130", root)
    assert tool == build / "policy/model/policy_model_tool", why
    assert "prebuilt: " in why and "torch 2.11.0+cu130" in why
    ran = subprocess.run([str(tool), "bench", "--model", "m"], capture_output=True, text=True)
    assert ran.returncode == 1 and "ARGS=bench --model m" in ran.stdout
    assert f"LD={torch_dir / 'lib'}:{tmp_path / 'site/nvidia/cu13/lib'}" in ran.stdout


def test_a_prebuilt_tool_that_does_not_fit_is_refused_and_the_caller_builds(tmp_path):
    root = tree(tmp_path / "src")
    out, torch_dir = folder(tmp_path, root)
    build = tmp_path / "build"
    tool, why = prebuilt.install(out, build, torch_dir, "2.15.0+cu132", root)
    assert tool is None and "built for torch 2.11.0+cu130, this is 2.15.0+cu132" in why
    (root / "policy/model/k.cu").write_text("// kernel, changed after the build\n")
    tool, why = prebuilt.install(out, build, torch_dir, "2.11.0+cu130", root)
    assert tool is None and "other sources" in why
    tool, why = prebuilt.install(tmp_path / "nowhere", build, torch_dir, "2.11.0+cu130", root)
    assert tool is None and "has no policy_model_tool.bin" in why
    assert not (build / "policy/model/policy_model_tool").exists()


def test_a_side_is_taken_by_its_stamp_whatever_its_name(tmp_path):
    """A build of several patches serves a later call that runs one of them alone: that call's side
    is `b`, the tool sits under sides/b2, and the stamp (the tree with the patch applied) finds it."""
    root = tree(tmp_path / "src")
    out, torch_dir = folder(tmp_path, root)  # the tree's own tool
    for name, text in (("b1", "// kernel, patch one\n"), ("b2", "// kernel, patch two\n")):
        (root / "policy/model/k.cu").write_text(text)
        side = out / "sides" / name
        side.mkdir(parents=True)
        (side / "policy_model_tool.bin").write_text(STARTS.replace("echo \"LD=", f"echo \"SIDE={name} LD="))
        (side / "policy_model_tool.bin").chmod(0o755)
        (side / "stamp.json").write_text(json.dumps({"sources": prebuilt.source_stamp(root), "torch": "2.11.0+cu130"}))
    # The tree with patch two applied: sides/b2's tool.
    tool, why = prebuilt.install(out, tmp_path / "build-b", torch_dir, "2.11.0+cu130", root)
    assert tool is not None and "sides/b2/policy_model_tool.bin" in why, why
    assert "SIDE=b2 " in subprocess.run([str(tool)], capture_output=True, text=True).stdout
    # The patch taken out again: the folder's own tool.
    (root / "policy/model/k.cu").write_text("// kernel\n")
    tool, why = prebuilt.install(out, tmp_path / "build-a", torch_dir, "2.11.0+cu130", root)
    assert tool is not None and "sides" not in why and "SIDE=" not in subprocess.run(
        [str(tool)], capture_output=True, text=True).stdout
    # A tree no tool was built from: the caller builds.
    (root / "policy/model/k.cu").write_text("// kernel, patch three\n")
    tool, why = prebuilt.install(out, tmp_path / "build-c", torch_dir, "2.11.0+cu130", root)
    assert tool is None and "other sources" in why


def test_a_configured_build_folder_stays_ninjas(tmp_path):
    root = tree(tmp_path / "src")
    out, torch_dir = folder(tmp_path, root)
    build = tmp_path / "build"
    build.mkdir()
    (build / "build.ninja").write_text("")
    tool, why = prebuilt.install(out, build, torch_dir, "2.11.0+cu130", root)
    assert tool is None and "configured build folder" in why
    assert not (build / "policy/model/policy_model_tool").exists()


def test_a_binary_that_does_not_start_leaves_no_tool_and_says_why(tmp_path):
    root = tree(tmp_path / "src")
    broken = "#!/bin/sh\necho 'policy_model_tool.bin: error while loading shared libraries: libc10.so' >&2\nexit 127\n"
    out, torch_dir = folder(tmp_path, root, binary=broken)
    build = tmp_path / "build"
    tool, why = prebuilt.install(out, build, torch_dir, "2.11.0+cu130", root)
    assert tool is None and "does not start here" in why and "libc10.so" in why
    assert not (build / "policy/model/policy_model_tool").exists()


def test_a_wheel_unpacks_to_its_headers_libraries_and_version(tmp_path):
    wheel = tmp_path / "torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("torch/version.py", "from typing import Optional\n__version__ = '2.11.0+cu130'\n")
        z.writestr("torch/lib/libc10.so", "elf")
        z.writestr("torch/include/c10/core.h", "// header")
        z.writestr("torch/share/cmake/Torch/TorchConfig.cmake", "# config")
        z.writestr("torch/__init__.py", "# python")
    torch_dir, version = prebuilt.unpack_torch(wheel, tmp_path / "into")
    assert version == "2.11.0+cu130"
    assert (torch_dir / "lib/libc10.so").is_file() and (torch_dir / "share/cmake/Torch/TorchConfig.cmake").is_file()
    assert (torch_dir / "include/c10/core.h").is_file() and not (torch_dir / "__init__.py").exists()


def test_build_tool_takes_a_fitting_prebuilt_tool_without_building(tmp_path, capsys):
    import bench_generate  # imports torch and transformers
    import torch
    out = tmp_path / "prebuilt"
    out.mkdir()
    (out / "policy_model_tool.bin").write_text(STARTS)
    (out / "policy_model_tool.bin").chmod(0o755)
    (out / "stamp.json").write_text(json.dumps({"sources": prebuilt.source_stamp(), "torch": torch.__version__}))
    build = tmp_path / "build"
    tool = bench_generate.build_tool(build, prebuilt=out)
    assert tool == build / "policy/model/policy_model_tool" and not (build / "build.ninja").exists()
    assert "prebuilt: " in capsys.readouterr().out
    # A later call without `prebuilt` (bench_agent.py --build-dir) takes it too, without building.
    assert bench_generate.build_tool(build) == tool and not (build / "build.ninja").exists()
    ran = subprocess.run([str(tool), "logits"], capture_output=True, text=True)
    assert "ARGS=logits" in ran.stdout and f"{pathlib.Path(torch.__file__).parent / 'lib'}" in ran.stdout


def two_patches(tmp_path):
    """A git repository whose policy/k.cu holds "one", and patches to "two" and to "three"."""
    repo = tmp_path / "repo"
    (repo / "policy").mkdir(parents=True)
    (repo / "policy/k.cu").write_text("one\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    (repo / "policy/k.cu").write_text("two\n")
    patch_two = tmp_path / "two.patch"
    patch_two.write_text(subprocess.run(["git", "diff"], cwd=repo, capture_output=True, text=True).stdout)
    (repo / "policy/k.cu").write_text("three\n")
    patch_three = tmp_path / "three.patch"
    patch_three.write_text(subprocess.run(["git", "diff"], cwd=repo, capture_output=True, text=True).stdout)
    (repo / "policy/k.cu").write_text("one\n")
    return repo, patch_two, patch_three


def build_args(tmp_path, patches):
    return type("Args", (), {"wheel": tmp_path / "t.whl", "build_dir": tmp_path / "b", "out": tmp_path / "out",
                             "patch": patches})


def test_each_patch_is_built_applied_alone_and_taken_out_again(tmp_path, monkeypatch):
    repo, patch_two, patch_three = two_patches(tmp_path)
    monkeypatch.setattr(prebuilt, "REPO", repo)
    monkeypatch.setattr(prebuilt, "unpack_torch", lambda wheel, into: (into / "torch", "2.11.0+cu130"))
    monkeypatch.setattr(prebuilt, "check_sass", lambda cmake_build: None)
    built = []

    def build_one(torch_dir, version, cmake_build, out, wheel):
        built.append((out.relative_to(tmp_path).as_posix(), (repo / "policy/k.cu").read_text().strip()))
        if len(built) == 3:
            raise subprocess.CalledProcessError(1, "ninja")

    monkeypatch.setattr(prebuilt, "build_one", build_one)
    args = build_args(tmp_path, [patch_two, patch_three])
    try:
        prebuilt.build(args)
    except subprocess.CalledProcessError:
        pass
    # A on the tree as it is, then each patch alone (b1, b2); the second's failed build still
    # leaves the tree as it was.
    assert built == [("out", "one"), ("out/sides/b1", "two"), ("out/sides/b2", "three")]
    assert (repo / "policy/k.cu").read_text() == "one\n"
    assert prebuilt.side_names([patch_two]) == ["b"]


def test_a_side_failing_the_sass_checks_fails_the_build_after_every_side_is_built(tmp_path, monkeypatch):
    repo, patch_two, patch_three = two_patches(tmp_path)
    monkeypatch.setattr(prebuilt, "REPO", repo)
    monkeypatch.setattr(prebuilt, "unpack_torch", lambda wheel, into: (into / "torch", "2.11.0+cu130"))
    monkeypatch.setattr(prebuilt, "build_one", lambda torch_dir, version, cmake_build, out, wheel: None)
    checked = []

    def check_sass(cmake_build):
        # Each check sees the tree as the side was built: its patch in place.
        checked.append((cmake_build.name, (repo / "policy/k.cu").read_text().strip()))
        return "1 failed: global reads before griddepcontrol.wait" if cmake_build.name == "build-b1" else None

    monkeypatch.setattr(prebuilt, "check_sass", check_sass)
    with pytest.raises(SystemExit) as stopped:
        prebuilt.build(build_args(tmp_path, [patch_two, patch_three]))
    assert checked == [("build", "one"), ("build-b1", "two"), ("build-b2", "three")]
    message = str(stopped.value)
    assert "b1 (" in message and "global reads before griddepcontrol.wait" in message and "b2" not in message
    assert (repo / "policy/k.cu").read_text() == "one\n"


def test_the_sass_check_refuses_a_build_without_kernel_objects(tmp_path):
    # An empty folder would let test_sass_order.py skip every test and pass.
    why = prebuilt.check_sass(tmp_path / "empty-build")
    assert why is not None and "no kernel objects" in why


def test_the_sass_check_passes_the_builds_objects_and_fails_swapped_ones(tmp_path):
    # The real checks over the build's own sm_90 objects, then over a copy whose fp8_kernels.cu.o is
    # mma_kernels.cu.o: no e4m3 split kernel stages its tiles there, and the check says so.
    build = pathlib.Path(os.environ.get("CAF_AGENT_BUILD_DIR", ROOT / "build"))
    objects = build / prebuilt.KERNEL_OBJECTS
    if not (objects / "fused_kernels.cu.o").is_file():
        pytest.skip(f"{objects} has no kernel objects (a build without CUDA)")
    assert prebuilt.check_sass(build) is None
    swapped = tmp_path / prebuilt.KERNEL_OBJECTS
    swapped.mkdir(parents=True)
    for obj in objects.glob("*.cu.o"):
        shutil.copy(obj, swapped / obj.name)
    shutil.copy(objects / "mma_kernels.cu.o", swapped / "fp8_kernels.cu.o")
    why = prebuilt.check_sass(tmp_path)
    assert why is not None and "fp8_split_kernel" in why, why


def test_an_installed_tool_serves_later_calls_while_the_sources_match(tmp_path):
    root = tree(tmp_path / "src")
    out, torch_dir = folder(tmp_path, root)
    build = tmp_path / "build"
    assert prebuilt.installed(build, "2.11.0+cu130", root) is None
    tool, _ = prebuilt.install(out, build, torch_dir, "2.11.0+cu130", root)
    assert prebuilt.installed(build, "2.11.0+cu130", root) == tool
    assert prebuilt.installed(build, "2.15.0+cu132", root) is None
    (root / "learner/l.hpp").write_text("// learner, a patch applied\n")
    assert prebuilt.installed(build, "2.11.0+cu130", root) is None
