"""One evaluation job, run in the worker's parent process.

Order: validate paths -> static checks -> reference (parent only) -> child builds and imports
the submission -> num_checks seeded checks -> (profile/final) timing -> verdict. The parent
never runs submission code; the child never sees reference outputs.
"""
from __future__ import annotations

import os
import posixpath
import shutil
import tempfile
import time

import torch

from . import options as opts_mod
from . import protocol, reward, static_checks, verify
from .child_client import ChildCrashed, ChildProtocolError, ChildTimeout
from .task import as_outputs, derive_seed
from .task_check import TaskError

# Rationale: only what the agent is meant to write crosses into the judge.
MAX_FILES = 64
MAX_FILE_BYTES = 1 << 20


class JobFailed(Exception):
    """Ends a job early with a failed verdict (reason, flag)."""

    def __init__(self, reason: str, flag: str):
        super().__init__(reason)
        self.reason, self.flag = reason, flag


def new_verdict() -> dict:
    return {"correct": False, "reason": "", "checks": [], "timings": {}, "flags": [],
            "speedup_eager": None, "speedup_compile": None, "compile_log": "", "log": "",
            "reward": -1, "reward_reason": ""}


class PhaseClock:
    """Wall seconds per phase of a job, added up in the verdict's phases_s (for benchmarks:
    where a job's time goes). lap(name) closes the phase that started at the previous lap."""

    def __init__(self, v: dict, prefix: str = ""):
        self.t = time.monotonic()
        self.prefix = prefix
        self.phases = v.setdefault("phases_s", {})

    def lap(self, name: str) -> None:
        now = time.monotonic()
        key = self.prefix + name
        self.phases[key] = round(self.phases.get(key, 0.0) + now - self.t, 4)
        self.t = now


def validate_files(files: dict) -> tuple[dict, list[str]]:
    """Keeps model_new.py and kernels/** with safe relative paths; reports the rest."""
    kept, problems = {}, []
    if not isinstance(files, dict):
        return {}, ["files must be a map of relative path to content"]
    if len(files) > MAX_FILES:
        problems.append(f"too many files ({len(files)} > {MAX_FILES})")
    for path, text in files.items():
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        norm = posixpath.normpath(str(path))
        if norm.startswith(("/", "..")) or "\\" in norm or norm != path:
            problems.append(f"file path {path!r} is not a clean relative path")
        elif not isinstance(text, str) or len(text) > MAX_FILE_BYTES:
            problems.append(f"file {path} is too large or not text")
        elif norm == "model_new.py" or norm.startswith("kernels/"):
            kept[norm] = text
        # anything else (model.py, harness copies) is ignored: the judge uses pristine copies
    return kept, problems


def run(ctx, req: dict) -> dict:
    """Evaluates one request; returns the verdict (exceptions mean infrastructure errors)."""
    mode = req.get("mode", "verify")
    if mode not in ("verify", "profile", "final", "baseline"):
        raise opts_mod.OptionError(f"unknown mode {mode!r}")
    o = opts_mod.merge(req.get("options"))
    if mode == "baseline":  # the task's reference timed, no submission (baseline.py)
        from . import baseline
        return baseline.run(ctx, req, o)
    v = new_verdict()
    clock = PhaseClock(v)
    task_req = req["task"]
    try:  # a task that cannot be judged is refused before any submission is looked at
        task = ctx.task(task_req["name"], task_req["model_py"], mode, o)
    except TaskError as e:
        v["flags"].append("task_error")
        v["task_error"] = str(e)
        v["reason"] = f"task error: {e}"
        v["reward"], v["reward_reason"] = None, "the task cannot be judged (not the submission's doing)"
        return v
    clock.lap("task")
    tol = (float(o["atol"]), float(o["rtol"]), float(o["rel_l2"]))
    degenerate = task.degenerate.get(tol)
    if degenerate:  # judged on how its outputs change between inputs too (_variation)
        v["task_degenerate"] = degenerate
    constant = task.constant.get(tol)
    if constant:  # judged (KernelBench's test), never correct: a constant is its answer
        v["task_constant"] = constant
    scale = task.param_scale.get(tol, 1.0)
    if scale != 1.0:  # task_check.PARAM_SCALES: judged with the parameters scaled
        v["task_conditioning"] = {"param_scale": scale, "why": task.degenerate_default.get(tol, "")}
    files, problems = validate_files(req.get("files", {}))
    problems += static_checks.check_files(files)
    if problems:
        v["flags"].append("static_check")
        v["reason"] = "static check failed: " + "; ".join(problems[:8])
        return v
    secret, job_id = str(req.get("seed_secret", "")), str(req.get("job_id", ""))
    if not secret:
        raise opts_mod.OptionError("seed_secret is required")
    clock.lap("static")
    ref = _reference(ctx, task, o, secret, job_id, scale)
    ref["degenerate"] = bool(degenerate) and not constant
    if constant:
        ref["strict_fail"] = (f"{constant}: a constant is this task's answer, so the judge cannot "
                              "certify a kernel on it (kernelbench_correct holds KernelBench's own "
                              "verdict)", "constant_task")
    clock.lap("reference")
    base = None
    if mode in ("profile", "final") and not o["timing"]["fresh_baselines"]:
        base, v["baseline_cache"] = _baselines(ctx, task, o, secret, job_id)
        clock.lap("baselines")
    job_dir = tempfile.mkdtemp(prefix="job_", dir=ctx.work_root)
    child = ctx.take_child(o["start_timeout_s"], prestart_next=(mode == "verify"))
    clock.lap("child_wait")
    v["child_start"] = ("forked (lite server)" if child.zygote.lite else "forked") \
        if child.forked else "spawned"
    if child.startup_s:  # context, timers, guard: what a starting spare's quiesce waits for
        v["child_startup_s"] = child.startup_s
    phase = "setup"
    open_phase = "build_import"  # the PhaseClock key of the phase under way (for a failed job)
    try:
        for path, text in files.items():
            dst = os.path.join(job_dir, path)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(dst, "w") as f:
                f.write(text)
        phase = "build, load and import"
        _setup(ctx, child, task, ref, files, job_dir, o, v)
        clock.lap("build_import")
        open_phase = "checks"
        for k in range(o["num_checks"]):
            phase = f"check {k + 1}/{o['num_checks']}"
            _check(child, ref, k, o, v)
        clock.lap("checks")
        open_phase = ""
        v["kernelbench_correct"] = True  # every check's outputs within atol/rtol
        if ref["strict_fail"]:  # within KernelBench's tolerance, not the judge's stricter tests
            raise JobFailed(*ref["strict_fail"])
        v["correct"] = True
        if mode in ("profile", "final"):
            phase = "timing"
            from .measure import measure
            ref["current"] = None  # the last check's tensors are not needed for timing
            ctx.quiesce(o["start_timeout_s"])
            clock.lap("quiesce")
            open_phase = "timing"
            measure(ctx, child, task, ref["model"], secret, job_id, o, v, base,
                    anchor=ref["anchors"].get(None))
            clock.lap("timing")
            open_phase = ""
    except JobFailed as e:
        v["correct"] = False
        v["reason"] = e.reason
        v["flags"].append(e.flag)
    except ChildTimeout as e:
        v["correct"] = False
        v["flags"].append("timeout")
        where = str(e) if phase.startswith("build") and str(e) else phase
        v["reason"] = f"timeout: {where} did not finish within its deadline (process killed)"
    except ChildCrashed as e:
        v["correct"] = False
        if "SIGSYS" in str(e):  # seccomp.py: killed for a forbidden system call
            v["flags"].append("forbidden_syscall")
            v["reason"] = ("the submission made a forbidden system call (a new process, exec, a "
                           f"socket or ptrace): the evaluation process was killed ({e})")
        else:
            v["flags"].append("crashed")
            v["reason"] = f"the submission crashed the evaluation process: {e}"
            last = child.last_output()
            if last:  # e.g. a traceback's last line: what the process died of
                v["reason"] += f" (its last output: {last})"
    except ChildProtocolError as e:
        v["correct"] = False
        v["flags"].append("bad_frame")
        v["reason"] = f"the evaluation process sent an {e} (process killed)"
    finally:
        if open_phase:  # a failed phase's time is its own, not the cleanup's
            clock.lap(open_phase)
        ctx.release_child(child)
        v["log"] = child.log()
        if ctx.device.startswith("cuda"):  # how the child's tensors came back (ipc.py)
            v["child_transport"] = dict(child.transfers)
        shutil.rmtree(job_dir, ignore_errors=True)
        ctx.job_done()
        clock.lap("cleanup")
    if v["correct"] and v["timings"].get("compile_ms") is not None:
        t = v["timings"]
        v["reward"], v["reward_reason"] = reward.robust_reward(
            True, t.get("candidate_ms"), t.get("eager_ms"), t.get("compile_ms"))
    elif v["correct"]:
        v["reward"], v["reward_reason"] = None, "correct; no eager+compile timings to rank"
    else:
        v["reward"], v["reward_reason"] = -1, "verification failed"
    return v


# Rationale: torch's caching allocator keeps what a job freed reserved for this process; the
# slots of one GPU share its memory, so after a large job (a KernelBench activation holds
# ~24 GiB in the worker) the cache goes back to the driver. Below this it stays (a small
# task's next job reuses it; freeing and allocating again costs milliseconds).
KEEP_RESERVED_BYTES = 2 << 30


def release_device_memory(ctx) -> None:
    """After a job (worker.handle): the allocator's cache back to the driver when it is large."""
    if ctx.device.startswith("cuda") and torch.cuda.memory_reserved(ctx.device) > KEEP_RESERVED_BYTES:
        torch.cuda.empty_cache()


def _baselines(ctx, task, o, secret, job_id) -> tuple[dict, str]:
    """(base, where) of a profile job: the task's eager/compile baselines from the one cache
    (baseline_cache.py: this worker's memory, then the entries the node's workers share),
    else measured now (baseline.measure, the baseline job's own code) and stored. Measured
    here, before this job's child loads the submission and once the spare child is idle, so
    no submission code runs beside them: a cached baseline serves every later job."""
    from . import baseline, baseline_cache
    t = o["timing"]
    base, where = baseline_cache.get(ctx, task, t)
    if base is not None and (not t["compile_baseline"] or "compile" in base):
        return base, where
    ctx.quiesce(o["start_timeout_s"])
    base, compile_error, _ = baseline.measure(ctx, task, secret, job_id, t, o)
    if compile_error:  # the judge's own failure to time the task, never the submission's
        raise RuntimeError(f"the torch.compile baseline failed: {compile_error[-1500:]}")
    baseline_cache.put(ctx, task, t, base, {"compile_error": compile_error})
    return base, "measured"


def _reference(ctx, task, o, secret, job_id, param_scale: float = 1.0) -> dict:
    """Reference model and the checks' seeds; they stay in this process. A check's inputs
    and reference outputs are drawn when the check runs (_check_reference) and dropped
    before the next one's: one set at a time, not num_checks (for KernelBench's 6 GiB
    activations that is 12 GiB held instead of 60). Check 0's are drawn here (its outputs'
    sizes go to the child for the poison)."""
    dev = ctx.device
    init = task.init_inputs(derive_seed(secret, job_id, "init", 0))
    model = task.make_model(init, derive_seed(secret, job_id, "weights", 0), dev)
    if param_scale != 1.0:  # before the state_dict is taken: the child's ModelNew gets these
        with torch.no_grad():
            for p in model.parameters():
                if p.is_floating_point():
                    p.mul_(param_scale)
    draws = [(derive_seed(secret, job_id, "check", k), task.check_batch(k)) for k in range(o["num_checks"])]
    ref = {"init": init, "model": model, "task": task, "draws": draws, "current": None, "device": dev,
           "state_dict": {k: t.detach() for k, t in model.state_dict().items()},
           "degenerate": False, "anchors": {}, "strict_fail": None}
    ref["specs"] = [[t.numel(), str(t.dtype).removeprefix("torch.")] for t in _check_reference(ref, 0)[1]]
    return ref


def _check_reference(ref: dict, k: int) -> tuple[list, list]:
    """(inputs, reference outputs) of check k, drawn in this process from the check's seed
    (the child draws the same inputs on its device)."""
    cur = ref["current"]
    if cur is not None and cur[0] == k:
        return cur[1], cur[2]
    ref["current"] = None  # the previous check's tensors are freed before the next are drawn
    seed, batch = ref["draws"][k]
    x = ref["task"].inputs(seed, ref["device"], batch)
    with torch.no_grad():
        y = [t.clone() for t in as_outputs(ref["model"](*x))]
    ref["current"] = (k, x, y)
    return x, y


def _setup(ctx, child, task, ref, files, job_dir, o, v):
    """Two requests with their own deadlines: the build (compilers: build_timeout_s), then
    the load (the first submission code: static initialisers, the import, ModelNew(...):
    load_timeout_s), so a spin at load time holds the slot for seconds, not the build's 300."""
    rep = child.request({"op": "build", "files": files, "flavour": ctx.flavour,
                         "build_root": ctx.build_root}, o["build_timeout_s"], "build")
    if rep.get("ok"):
        v["cached_build"] = bool(rep.get("cached_build"))  # False: the slot paid for the compile
        specs = ref["specs"]
        rep = child.request({
            "op": "load", "job_dir": job_dir, "init_inputs": protocol.encode_value(ref["init"]),
            "state_dict": _test_state(protocol.encode_value(ref["state_dict"])), "strict": task.strict,
            "out_specs": specs, "task_py": task.source}, o["load_timeout_s"], "load and import")
    v["compile_log"] = rep.get("compile_log", "")
    if not rep.get("ok"):
        stage = rep.get("stage", "setup")
        if stage == "setup":  # the child's own code raised (e.g. no libseccomp): the judge's failure
            raise RuntimeError(f"evaluation process setup failed: {rep.get('error', '')[-2000:]}")
        what = {"compile": "compile error (see compile_log)",
                "native": "native code check failed (see compile_log)",
                "load": "the extension failed to load (missing symbol?)",
                "import": "model_new.py failed to import",
                "init": "ModelNew could not be built or take the reference's state_dict"}
        detail = rep.get("error", "") if stage not in ("compile", "native") else \
            (_first_problem(v["compile_log"]) if stage == "native" else "")
        raise JobFailed(f"{what.get(stage, stage)}: {detail}".strip().rstrip(":"), stage)


def _test_state(encoded):
    """Tests only (CAF_EVAL_TEST_HOOKS=1 and CAF_EVAL_TEST_BAD_STATE=1): a state_dict the
    child cannot decode, to show such a failure is reported as the judge's."""
    if os.environ.get("CAF_EVAL_TEST_HOOKS") == "1" and os.environ.get("CAF_EVAL_TEST_BAD_STATE") == "1":
        return {"__dict__": 5}
    return encoded


def _first_problem(log: str) -> str:
    lines = [ln for ln in log.splitlines() if ln.startswith("the extension calls")]
    return "; ".join(lines[:3])[:1500]


def _check(child, ref, k, o, v):
    """Check k: the child's call on the check's inputs, judged here. A miss of KernelBench's
    own test (atol/rtol) ends the job; a miss of only the judge's stricter tests (relative L2,
    a degenerate task's variation check) is kept in ref["strict_fail"] and the job fails
    after the last check, so the verdict also says whether KernelBench's harness would have
    passed it (kernelbench_correct)."""
    seed, batch = ref["draws"][k]  # the child draws the same inputs on its device (no transfer)
    # settle: the child compares this check's outputs, and the earlier checks' it deferred,
    # with their snapshots after its late-write wait (child.DEFER_LATE_BYTES): at the last.
    rep = child.request({"op": "call", "seed": int(seed), "batch": batch,
                         "settle": k + 1 >= o["num_checks"]}, o["call_timeout_s"], f"check {k + 1}")
    inputs, outputs = _check_reference(ref, k)
    where = f"check {k + 1}/{o['num_checks']} ({verify.describe_inputs(inputs)})"
    entry = {"index": k, "passed": False, "reason": ""}
    v["checks"].append(entry)

    def fail(reason, flag):
        entry["reason"] = reason
        raise JobFailed(f"{where}: {reason}", flag)

    if rep.get("violations"):
        fail("torch fallback: ModelNew.forward dispatched " + ", ".join(rep["violations"][:5])
             + " (only allocation/view ops and the extension's own kernels are allowed)",
             "torch_fallback")
    if rep.get("error"):
        fail("forward raised: " + rep["error"].strip().splitlines()[-1][:500], "exception")
    if rep.get("tampered"):
        fail("timing functions were replaced: " + ", ".join(rep["tampered"]), "timer_tampering")
    if rep.get("flags"):
        fail(rep["flags"][0], "bad_output")
    changed = verify.inputs_unchanged(inputs, [protocol.decode_value(x) for x in rep["inputs_after"]])
    if changed:
        fail(changed, "input_mutation")
    cands = decode_outputs(outputs, rep["outputs"], fail)
    strict = None  # the first miss of the judge's stricter tests, within KernelBench's tolerance
    for i, (r, c) in enumerate(zip(outputs, cands)):
        ok, why, stats = verify.compare(r, c, o["atol"], o["rtol"], o["rel_l2"])
        if not ok and not stats.get("allclose"):
            v["kernelbench_correct"] = False
            fail(f"output {i} {why}", "nan_inf" if "NaN" in why else "mismatch")
        if not ok and strict is None:
            strict = (f"output {i} {why}", "mismatch")
    if ref["degenerate"]:
        why = _variation(ref["anchors"], batch, outputs, cands, entry)
        if why and strict is None:
            strict = (why, "variation_mismatch")
    if strict:  # the remaining checks still run: they decide the KernelBench-standard verdict
        entry["reason"] = strict[0]
        if ref["strict_fail"] is None:
            ref["strict_fail"] = (f"{where}: {strict[0]}", strict[1])
        return
    entry["passed"] = True


def _variation(anchors: dict, batch, refs: list, cands: list, entry: dict) -> str:
    """The variation check of a degenerate task: the first check of each batch size is the
    anchor (its reference and candidate outputs are kept); each later check's outputs must
    change from the anchor's as the reference's do (verify.variation_error within
    VARIATION_REL_L2). Returns the reason of a miss, else ""."""
    if batch not in anchors:
        anchors[batch] = (refs, cands)
        return ""
    return variation_miss(anchors[batch], refs, cands, entry)


def variation_miss(anchor: tuple, refs: list, cands: list, entry: dict | None = None) -> str:
    """The reason the candidate's outputs do not change from the anchor's (ref outputs,
    candidate outputs) as the reference's do, else ""; entry gets the worst error."""
    worst = 0.0
    for i, (ra, ca, r, c) in enumerate(zip(anchor[0], anchor[1], refs, cands)):
        if ra.shape != r.shape:  # another size: nothing to difference against
            continue
        err, _ = verify.variation_error(ra, r, ca, c)
        worst = max(worst, err)
        if entry is not None:
            entry["variation_rel_err"] = round(worst, 6) if worst != float("inf") else "inf"
        if err > verify.VARIATION_REL_L2:
            return (f"output {i} does not change with the input as the reference's does: relative L2 "
                    f"error of its change {err:.3g} > {verify.VARIATION_REL_L2} (the task's output "
                    "barely depends on its input, so a constant passes the elementwise test; the "
                    "change between two inputs is judged instead)")
    return ""


def decode_outputs(refs, encoded, fail) -> list:
    """A call's outputs as tensors; calls fail(reason, flag) on a wrong count or a part that
    is not a tensor map."""
    if len(encoded) != len(refs):
        fail(f"returned {len(encoded)} outputs, expected {len(refs)}", "wrong_output")
    out = []
    for i, e in enumerate(encoded):
        if e is None:
            fail(f"output {i} is not a plain tensor", "bad_output")
        if not isinstance(e, dict) or "__tensor__" not in e:
            fail(f"output {i} arrived as {type(e).__name__}, not a tensor map", "bad_frame")
        out.append(protocol.decode_tensor(e))
    return out


def compare_outputs(refs, encoded, o, fail, anchor=None):
    """Compares a call's outputs with the reference's (the judge's full test: elementwise and
    relative L2; with anchor, a degenerate task's variation check against it); calls
    fail(reason, flag) on a miss."""
    cands = decode_outputs(refs, encoded, fail)
    for i, (r, c) in enumerate(zip(refs, cands)):
        ok, why, _ = verify.compare(r, c, o["atol"], o["rtol"], o["rel_l2"])
        if not ok:
            fail(f"output {i} {why}", "nan_inf" if "NaN" in why else "mismatch")
    if anchor is not None:
        why = variation_miss(anchor, refs, cands)
        if why:
            fail(why, "variation_mismatch")
