"""Loads meant to go out before a kernel's programmatic wait (policy/model/programmatic_launch.cuh)
do so in the compiled code (CPU: reads the build's sm_90 SASS with cuobjdump).

A kernel launched with programmatic launch may start while the kernel before it runs; what it loads
before `dependency_wait()` (griddepcontrol.wait, SASS ACQBULK) overlaps that kernel's tail. The
order in the source is not the order in the machine code: ptxas issued the 1-row GEMVs' first
weight loads, written before the wait as plain loads, after it in every form, so they never
overlapped anything (docs/POLICY_MODEL_PERF.md, "Held patches"). Async copies to shared memory
(cp.async, SASS LDGSTS) stay where they are written. Each kernel below must issue at least one
LDGSTS before its first ACQBULK, in every instance of its template. The other tests hold the
classes that would make such a start unsafe: every kernel waits; no kernel reads global memory
before its wait except those that read what no kernel of a step writes, and none writes global
memory before it.
"""
import functools
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
BUILD = pathlib.Path(os.environ.get("CAF_AGENT_BUILD_DIR", REPO / "build"))
OBJECTS = BUILD / "policy/model/CMakeFiles/caf_agent_policy_kernels.dir"

# (object file, a pattern of the mangled kernel names, what stages before the wait)
KERNELS = [
    # The e4m3 split kernel at head_dim 64: the ring's first tiles (fp8_kernels.cu).
    ("fp8_kernels.cu.o", r"fp8_split_kernelI(13__nv_bfloat16|6__half)Li64E", "the ring's first tiles"),
    # The up-to-64-row tensor-core projections (decode_mma_rows): the first groups' weights (mma_kernels.cu).
    ("mma_kernels.cu.o", r"mma_rows_kernelI", "the first groups' weights"),
    # The 1-8 row GEMVs: the first weight vectors (fused_kernels.cu).
    ("fused_kernels.cu.o", r"gemv_rows_kernelI", "the first weight vectors"),
    # The boundary bench's phases as kernels: their first slice vectors (boundary_kernels.cu).
    ("boundary_kernels.cu.o", r"chain_phase_kernel", "the first slice vectors"),
]


def cuda_tool(name):
    """`name` (cuobjdump, nvdisasm) from PATH, or from its nvidia-cuda-* wheel (requirements.txt)."""
    found = shutil.which(name)
    if found:
        return found
    for base in map(pathlib.Path, sys.path):
        for candidate in base.glob(f"nvidia/cu*/bin/{name}"):
            return str(candidate)
    return None


def functions(sass):
    """{mangled name: [instruction, ...]} of cuobjdump -sass's text."""
    out = {}
    for part in re.split(r"\n\s*Function : ", sass)[1:]:
        name, body = part.split("\n", 1)
        out[name.strip()] = [line.split("*/", 1)[1].split(";")[0].strip()
                             for line in body.splitlines() if re.search(r"/\*[0-9a-f]{4}\*/", line)]
    return out


def wait_index(instructions):
    """The index of the first ACQBULK (griddepcontrol.wait), or None."""
    return next((i for i, ins in enumerate(instructions) if "ACQBULK" in ins), None)


def staged_before_wait(instructions):
    """Whether an LDGSTS comes before the first ACQBULK (False when there is no ACQBULK)."""
    wait = wait_index(instructions)
    return wait is not None and any("LDGSTS" in ins for ins in instructions[:wait])


@functools.lru_cache(maxsize=None)
def kernels_of(obj):
    """functions() of the build's object `obj` (skips the test where it was not built)."""
    path = OBJECTS / obj
    if not path.exists():
        pytest.skip(f"{path.relative_to(BUILD)} not built (a build without CUDA)")
    tool, disasm = cuda_tool("cuobjdump"), cuda_tool("nvdisasm")
    assert tool and disasm, "cuobjdump or nvdisasm not found: pip install -r requirements.txt"
    env = dict(os.environ, NVDISASM_PATH=str(pathlib.Path(disasm).parent))  # cuobjdump runs nvdisasm
    done = subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    return functions(done.stdout)


@pytest.mark.parametrize("obj,pattern,what", KERNELS, ids=[k[1] for k in KERNELS])
def test_loads_meant_to_precede_the_programmatic_wait_do(obj, pattern, what):
    named = {n: ins for n, ins in kernels_of(obj).items() if re.search(pattern, n)}
    assert named, f"no kernel matches {pattern} in {obj}"
    late = [n for n, ins in named.items() if not staged_before_wait(ins)]
    assert not late, f"{what}: no async copy before griddepcontrol.wait in {late}"


def test_the_check_sees_a_load_after_the_wait():
    # The check itself, on the order ptxas gave the GEMVs (a plain load issued after ACQBULK).
    assert not staged_before_wait(["PREEXIT", "ACQBULK", "LDG.E.128.CONSTANT R12, desc[UR10][R18.64]"])
    assert not staged_before_wait(["LDG.E.64.CONSTANT R2, desc[UR10][R2.64]", "ACQBULK", "LDGSTS.E.BYPASS.128 [R9]"])
    assert staged_before_wait(["LDGSTS.E.BYPASS.128 [R9], desc[UR10][R10.64], P4", "ACQBULK"])
    assert not staged_before_wait(["LDGSTS.E.BYPASS.128 [R9]"])  # no wait at all: not what is asked


# The kernels that may read global memory before their wait, and what they read there; in any other
# kernel a read before the wait could see what the kernel before it has not written yet.
EARLY_READERS = {
    "gemv_rows_kernel": "weights (no kernel of a step writes them)",
    "fp8_split_kernel": "positions, block tables and keys before the newest (written before the step's kernels)",
    "mma_rows_kernel": "weights",
    "chain_phase_kernel": "the boundary bench's slices (written by no phase)",
    "chain_flags_kernel": "the boundary bench's slices; its waits are counters, not griddepcontrol.wait",
}
GLOBAL_READ = re.compile(r"^(@!?U?P\w+ )?(LDG|LD\.|ATOMG|RED\.)")
GLOBAL_WRITE = re.compile(r"^(@!?U?P\w+ )?(STG|ST\.|ATOMG|RED\.)")
OBJECTS_WITH_WAITS = ["fused_kernels.cu.o", "fp8_kernels.cu.o", "mma_kernels.cu.o", "boundary_kernels.cu.o"]


def before_wait(instructions, pattern):
    """The instructions matching `pattern` before the first ACQBULK; none where there is no ACQBULK."""
    wait = wait_index(instructions) or 0
    return [ins for ins in instructions[:wait] if pattern.search(ins)]


def reads_before_wait(instructions):
    """The global reads (and atomics) before the first ACQBULK."""
    return before_wait(instructions, GLOBAL_READ)


def writes_before_wait(instructions):
    """The global stores (and atomics) before the first ACQBULK."""
    return before_wait(instructions, GLOBAL_WRITE)


def early_accesses(obj, find, exempt=()):
    """{kernel: find(its instructions)} of `obj`'s kernels where that is not empty, but those whose
    names hold an `exempt` string."""
    kernels = kernels_of(obj)
    assert kernels, f"no kernel in {obj}"
    return {n: found for n, ins in kernels.items() if not any(k in n for k in exempt)
            for found in [find(ins)] if found}


@pytest.mark.parametrize("obj", OBJECTS_WITH_WAITS)
def test_no_other_kernel_reads_global_memory_before_its_wait(obj):
    early = early_accesses(obj, reads_before_wait, EARLY_READERS)
    assert not early, f"global reads before griddepcontrol.wait: {early}"


def test_the_early_read_check_sees_loads_and_atomics_and_not_shared_or_constant_ones():
    assert reads_before_wait(["LDC R1, c[0x0][0x28]", "LDS R2, [R3]", "ACQBULK", "LDG.E R4, desc[UR4][R2.64]"]) == []
    assert reads_before_wait(["@!P5 LDG.E.128.CONSTANT R16, desc[UR16][R4.64]", "ACQBULK"]) == [
        "@!P5 LDG.E.128.CONSTANT R16, desc[UR16][R4.64]"]
    assert reads_before_wait(["LD.E R0, desc[UR4][R2.64]", "ATOMG.E.ADD.STRONG.GPU PT, R1, desc[UR4][R2.64], R3",
                              "ACQBULK"]) == ["LD.E R0, desc[UR4][R2.64]",
                                              "ATOMG.E.ADD.STRONG.GPU PT, R1, desc[UR4][R2.64], R3"]
    assert reads_before_wait(["LDG.E R0, desc[UR4][R2.64]"]) == []  # no wait: nothing is before it


@pytest.mark.parametrize("obj", OBJECTS_WITH_WAITS)
def test_no_kernel_writes_global_memory_before_its_wait(obj):
    # A kernel that may start during the one before it must not write before its wait: the kernel
    # before may still read what it would overwrite (the caching allocator hands a buffer on as
    # soon as its last reader is queued), or write the same place after it.
    early = early_accesses(obj, writes_before_wait)
    assert not early, f"global writes before griddepcontrol.wait: {early}"


def test_the_early_write_check_sees_stores_and_atomics_and_not_shared_ones():
    assert writes_before_wait(["STS [R1], R2", "ACQBULK", "STG.E [R2.64], R3"]) == []
    assert writes_before_wait(["@P0 STG.E.128 desc[UR4][R2.64], R4", "ACQBULK"]) == [
        "@P0 STG.E.128 desc[UR4][R2.64], R4"]
    assert writes_before_wait(["RED.E.ADD.STRONG.GPU desc[UR4][R2.64], R5", "ACQBULK"]) == [
        "RED.E.ADD.STRONG.GPU desc[UR4][R2.64], R5"]
    assert writes_before_wait(["STG.E [R2.64], R3"]) == []  # no wait: nothing is before it


# The kernels with no griddepcontrol.wait, and why none is needed.
NO_WAIT = {
    "chain_flags_kernel": "the boundary bench's one cooperative launch (not programmatic): its phases wait on counters",
}


def has_wait(instructions):
    return wait_index(instructions) is not None


@pytest.mark.parametrize("obj", OBJECTS_WITH_WAITS)
def test_every_kernel_has_its_programmatic_wait(obj):
    # The read and write checks above hold by default for a kernel with no wait (nothing comes before
    # it), yet launch() starts every kernel programmatically: one with no wait would run wholly beside
    # the kernel before it, reading its outputs unfinished, and its own end would no longer mean that
    # kernel's, so the kernel after it would wait for too little.
    missing = [n for n, ins in kernels_of(obj).items() if not has_wait(ins) and not any(k in n for k in NO_WAIT)]
    assert not missing, f"kernels with no griddepcontrol.wait (ACQBULK): {missing}"


def test_the_wait_check_sees_a_kernel_without_one():
    assert has_wait(["LDC R1, c[0x0][0x28]", "ACQBULK", "LDG.E R4, desc[UR4][R2.64]"])
    assert not has_wait(["LDC R1, c[0x0][0x28]", "LDG.E R4, desc[UR4][R2.64]", "EXIT"])
