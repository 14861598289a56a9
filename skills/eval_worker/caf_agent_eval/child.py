"""The disposable submission process: builds and imports one submission, runs the calls the
parent asks for, and reports raw facts. It holds no reference outputs and decides nothing:
every pass/fail decision is made in the parent (job.py) with trusted code.

Started as `python -m caf_agent_eval.child`; frames on stdin/stdout (duplicated to private
descriptors at start), large tensors' bytes as sealed memfds on the socket named by
CAF_EVAL_FD_SOCK (shm_transport.py), everything the submission prints goes to stderr (the
capped log).
"""
from __future__ import annotations

import importlib.util
import os
import sys
import threading
import time
import traceback

# Rationale: keep a traceback readable but bounded; the parent caps the whole log too.
ERROR_CAP = 4000
# Rationale: an output more than 4x the reference's size is a runaway; refuse to ship it.
OUTPUT_SIZE_FACTOR = 4
# Rationale: work that a submission leaves running after return (a thread, a side stream)
# lands within milliseconds; a 10 ms wait catches it.
LATE_WRITE_WAIT_S = 0.01
# Rationale: a check's outputs up to this size (with the earlier checks' still waiting) are
# compared with their snapshots once, after the job's last check and its wait, instead of
# after a wait of their own: one wait for the job, not one per check (5 x 10 ms of a small
# task's ~0.45 s verify+profile on the H200), and every earlier check's outputs have had
# longer to change. Larger outputs wait per check (a snapshot of each would be held).
DEFER_LATE_BYTES = 64 << 20


def _err(e: BaseException) -> str:
    text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    return text[-ERROR_CAP:]


class Child:
    def __init__(self, fd_in: int, fd_out: int, fd_sock=None):
        import torch
        from . import profile, protocol
        self.torch, self.protocol = torch, protocol
        self.fd_in, self.fd_out, self.fd_sock = fd_in, fd_out, fd_sock
        self.device = os.environ.get("CAF_EVAL_DEVICE", "cpu")
        threads = int(os.environ.get("CAF_EVAL_THREADS", "0"))
        if threads > 0:
            torch.set_num_threads(threads)
        t0 = time.monotonic()
        if self.device.startswith("cuda"):
            torch.cuda.set_device(self.device)
            torch.empty(1, device=self.device)  # create the context before the job arrives
        t1 = time.monotonic()
        self.timers = profile.Timers(self.device)  # captured before any submission import
        t2 = time.monotonic()
        from . import dispatch_guard
        dispatch_guard.warm_up(self.device)  # the guard's first use costs seconds
        # Where this process's start-up went (before any submission code: diagnostic, the
        # verdict's child_startup_s; the wait for a starting spare is a job's quiesce phase).
        self.startup_s = {"context": round(t1 - t0, 4), "timers": round(t2 - t1, 4),
                          "guard": round(time.monotonic() - t2, 4)}
        self.Tensor = torch.Tensor
        self.model = None
        self.library, self.compile_log, self.cached_build = None, "", False
        self.out_specs: list = []
        self.kept: list = []        # outputs of earlier calls, kept alive (buffer-reuse check)
        self.pending: list = []     # (check number, output index, output, snapshot) not yet settled
        self.checks_done = 0
        self.sets: list = []
        self.task_mod = None        # the task's model.py, for gen_sets only
        self.round_outputs: list = []
        self.threads_before = threading.active_count()
        self.ipc = False            # the worker asks for device-to-device replies (ipc.py)
        self.exported: dict = {}    # id -> tensor exported in the last reply (kept alive until the next request)
        from .shm_transport import INLINE_MAX_BYTES
        self.ipc_min_bytes = INLINE_MAX_BYTES

    # ---- setup --------------------------------------------------------------------------
    def build(self, req):
        """Compiles kernels/** (compilers are processes: before the system-call filter)."""
        from . import build
        res = build.build(req["files"], req["flavour"], req["build_root"])
        if not res.ok:
            stage = "native" if res.rejected else "compile"
            return {"ok": False, "stage": stage, "error": "compile error", "compile_log": res.log}
        self.library, self.compile_log, self.cached_build = res.library, res.log, res.cached
        return {"ok": True, "compile_log": res.log, "cached_build": res.cached}

    def load(self, req):
        """Checks the library's native symbols again, installs the system-call filter, then
        runs submission code for the first time: the library's static initialisers, the
        import of model_new.py, ModelNew(...) and its state_dict (own deadline: load_timeout_s)."""
        from . import build, dispatch_guard, seccomp
        torch = self.torch
        log = self.compile_log
        problems = build.verify_native(self.library)
        if problems:
            return {"ok": False, "stage": "native", "error": "compile error",
                    "compile_log": build.native_code_log(problems)}
        if req.get("task_py"):  # the task's input generator (gen_sets); judge code, not the submission's
            from .task import load_module_from_source
            try:
                self.task_mod = load_module_from_source(req["task_py"], "caf_task_inputs")
            except BaseException as e:
                return {"ok": False, "stage": "setup", "error": _err(e)}
        if seccomp.wanted():
            seccomp.install(allow_rdwr_open=self.device.startswith("cuda"))
        # The reference's init inputs and state_dict are decoded before any submission code
        # runs (the library's initialisers, the import): a failure here (e.g. out of memory
        # beside other jobs) is the judge's, never blamed on the submission, and submission
        # code cannot fake one (its own failures come after, as load/import/init).
        try:
            init_inputs = self.protocol.decode_value(req["init_inputs"])
            sd = self.protocol.decode_value(req["state_dict"], self.device)
        except BaseException as e:
            return {"ok": False, "stage": "setup", "error": "decoding the reference's state: " + _err(e)}
        try:
            build.load(self.library)
        except Exception as e:
            return {"ok": False, "stage": "load", "error": _err(e), "compile_log": log}
        sys.modules["caf_ext"] = dispatch_guard.ExtensionProxy(torch.ops.caf_ext)
        try:
            spec = importlib.util.spec_from_file_location(
                "model_new", os.path.join(req["job_dir"], "model_new.py"))
            mod = importlib.util.module_from_spec(spec)
            sys.modules["model_new"] = mod
            spec.loader.exec_module(mod)
        except BaseException as e:
            return {"ok": False, "stage": "import", "error": _err(e), "compile_log": log}
        try:
            from .task import build_on
            model = build_on(lambda: mod.ModelNew(*init_inputs), self.device).eval()
            if sd or list(model.state_dict()):
                model.load_state_dict(sd, strict=bool(req.get("strict", True)))
        except BaseException as e:
            return {"ok": False, "stage": "init", "error": _err(e), "compile_log": log}
        self.model = model
        self.out_specs = req.get("out_specs", [])
        self.threads_before = threading.active_count()
        return {"ok": True, "compile_log": log, "cached_build": self.cached_build}

    # ---- checks -------------------------------------------------------------------------
    def poison(self):
        """Fills memory the allocator will hand out next with NaN / max values."""
        torch = self.torch
        for numel, dtype in self.out_specs:
            dt = getattr(torch, dtype)
            buf = torch.empty(int(numel), dtype=dt, device=self.device)
            buf.fill_(float("nan") if dt.is_floating_point else torch.iinfo(dt).max
                      if dt != torch.bool else True)
            del buf

    def call(self, req):
        from . import dispatch_guard
        from .task import as_outputs
        torch, T = self.torch, self.Tensor
        if "inputs" in req:
            inputs = self.protocol.decode_value(req["inputs"], self.device)
        else:  # drawn here from the worker's seed (task.generate_inputs), as the worker drew its copy
            from .task import generate_inputs
            if self.task_mod is None:
                return {"error": "no task input generator was loaded", "violations": []}
            batch = req.get("batch")
            inputs = generate_inputs(self.task_mod, int(req["seed"]), self.device,
                                     int(batch) if batch is not None else None)
        self.poison()
        guard = dispatch_guard.DispatchGuard()
        try:
            with torch.no_grad(), guard:
                out = self.model(*inputs)
            self.timers.sync()
        except BaseException as e:
            return {"error": _err(e), "violations": guard.violations()}
        violations = guard.violations()
        if violations:  # the worker fails the check on these first: no tensor need cross
            return {"violations": violations, "outputs": [], "inputs_after": [], "flags": [],
                    "tampered": self.timers.tampered()}
        outs = as_outputs(out)
        flags, enc, snaps = [], [], []
        for i, o in enumerate(outs):
            if type(o) is not T:
                flags.append(f"output {i} is a {type(o).__module__}.{type(o).__qualname__}, "
                             "not a plain torch.Tensor")
                snaps.append(None)
                continue
            if i < len(self.out_specs) and o.numel() > OUTPUT_SIZE_FACTOR * max(1, self.out_specs[i][0]):
                return {"error": f"output {i} has {o.numel()} elements, expected "
                                 f"{self.out_specs[i][0]}", "violations": guard.violations()}
            snaps.append(T.clone(o))
            flags += self._layout_flags(i, o, inputs)
        self.checks_done += 1
        mine = [(self.checks_done, i, o, s) for i, (o, s) in enumerate(zip(outs, snaps)) if s is not None]
        held = sum(x[2].numel() * x[2].element_size() for x in self.pending + mine)
        if req.get("settle", True) or held > DEFER_LATE_BYTES:
            # This check's outputs and every earlier check's still waiting, after one wait.
            time.sleep(LATE_WRITE_WAIT_S)
            self.timers.sync()
            for k, i, o, s in self.pending + mine:
                if not torch.equal(o, s) and not \
                        bool(torch.isclose(o, s, rtol=0, atol=0, equal_nan=True).all()):
                    which = f"output {i}" if k == self.checks_done else f"output {i} of check {k}"
                    flags.append(f"{which} changed after forward returned (work continued "
                                 "after the call: background thread or unsynchronised stream)")
            self.pending = []
        else:
            self.pending += mine
        if threading.active_count() > self.threads_before:
            flags.append("forward left a Python thread running")
        self.kept += [o for o in outs if type(o) is T]
        enc = [self._enc(s) if s is not None else None for s in snaps]
        after = [self._enc_value(x) for x in inputs]
        return {"outputs": enc, "inputs_after": after, "violations": guard.violations(),
                "flags": flags, "tampered": self.timers.tampered()}

    def _layout_flags(self, i, o, inputs):
        flags = []
        ptr = o.untyped_storage().data_ptr()
        if o.numel() > 1 and any(st == 0 and n > 1 for st, n in zip(o.stride(), o.shape)):
            flags.append(f"output {i} is an expanded view (a stride is 0): outputs must be "
                         "materialised")
        for j, x in enumerate(inputs):
            if isinstance(x, self.Tensor) and x.numel() and ptr == x.untyped_storage().data_ptr():
                flags.append(f"output {i} aliases input {j} (outputs must be new tensors)")
        for k in self.kept:
            if o.numel() and ptr == k.untyped_storage().data_ptr():
                flags.append(f"output {i} reuses the buffer of an earlier call's output")
                break
        return flags

    # ---- timing -------------------------------------------------------------------------
    def load_sets(self, req):
        self.sets = [self.protocol.decode_value(s, self.device) for s in req["sets"]]
        return {"ok": True}

    def gen_sets(self, req):
        """The timing input sets drawn here, on the device, from the seeds the worker sends
        just before the round (task.generate_inputs, the worker's own code and seeds): no
        tensor crosses the host. The worker draws the same sets itself and compares the
        sampled calls' outputs and inputs with its own."""
        from .task import generate_inputs
        if self.task_mod is None:
            return {"error": "no task input generator was loaded"}
        self.sets = []  # the previous round's sets are freed before the new ones are drawn
        self.sets = [generate_inputs(self.task_mod, int(seed), self.device) for seed in req["seeds"]]
        self.timers.sync()
        return {"ok": True}

    def time_round(self, req):
        """A round of timed calls of the submission, or with req["calibrate"] = {"ms": S} a
        calibration round: the same harness, the same number of calls and outputs kept alive,
        but each call is the judge's own wait of S ms (the hold kernel on a GPU, which spins
        on the GPU's nanosecond timer, so its length is known to the parent without trusting
        this process's clock) that returns fresh outputs of the reference's sizes. The parent
        times both kinds of round on its own clock; their difference is the submission's
        real time (measure.py, the wall-clock cross-check).

        The low-memory path (measure.low_memory) sends drop_previous: the previous round's
        outputs are freed before the calls, so this round's are checked against the checks'
        kept outputs and each other only; and keep=False (its warm-up): none of this round's
        outputs are kept.
        Rationale: on that path a round is one call and the worker fetches and compares every
        timed call's output with its own reference on that call's fresh input set, so a
        cached or reused buffer returns a stale answer the comparison fails; holding the
        previous round's outputs (one more output of 6-8 GiB on KernelBench's largest
        problems) is not needed for that defence there. What goes unflagged there is a
        submission that writes the right answer into a buffer it reuses: it computed the
        answer, and the allocation it saves costs microseconds against these tasks'
        milliseconds. Other tasks keep the previous round's outputs."""
        from . import profile
        torch = self.torch
        tampered = self.timers.tampered()
        t0 = self.timers.perf()
        if req.get("drop_previous") is True:
            self.round_outputs = []
        keep = req.get("keep") is not False
        calibrate = req.get("calibrate")
        fn = self._calibration_call(float(calibrate.get("ms") or 0.0)) \
            if isinstance(calibrate, dict) else self.model
        try:
            with torch.no_grad():
                r = profile.time_calls(fn, self.sets, req["order"], self.timers, keep=keep,
                                       flush_in_stream=bool(req.get("flush_in_stream")),
                                       hold_ms=float(req.get("hold_ms") or 0.0))
        except BaseException as e:
            return {"error": _err(e)}
        if calibrate is not None:
            flags = []
        else:
            flags = self._reused_buffers(r.outs)
            self.round_outputs = r.outs  # the previous round's outputs stayed alive until here
        if threading.active_count() > self.threads_before:
            flags.append("forward left a Python thread running")
        # span_ms: this process's clock over the whole round (diagnostic only: untrusted).
        return {"primary": r.primary, "wall": r.wall, "gap": r.gap, "ref_gap": r.ref_gap,
                "tampered": tampered, "flags": flags, "held": r.held, "launch": r.launch,
                "hold_error": self.timers.hold_error,
                "span_ms": (self.timers.perf() - t0) * 1e3}

    def _calibration_call(self, ms: float):
        """The call of a calibration round: a wait of `ms` on the current stream (the hold
        kernel; without it torch's cycle spin), then outputs of the reference's sizes."""
        torch, timers, dev = self.torch, self.timers, self.device
        specs = [(int(n), getattr(torch, d)) for n, d in self.out_specs]

        def call(*_):
            if ms > 0 and timers.cuda:
                if timers.hold is not None:
                    timers.hold(ms, timers.current_stream().cuda_stream)
                else:
                    timers.gpu_sleep(timers.sleep_cycles(ms))
            return [torch.empty(n, dtype=dt, device=dev) for n, dt in specs]
        return call

    def _reused_buffers(self, outs) -> list[str]:
        """A timed call whose output shares storage with another output that is still alive
        (this round's, the previous round's, the checks' kept outputs) returned a cached
        result: honest outputs are new tensors."""
        from .task import as_outputs
        seen = {}
        for o in self.kept:
            seen[o.untyped_storage().data_ptr()] = "a verification call"
        for out in self.round_outputs:
            for o in as_outputs(out):
                if type(o) is self.Tensor and o.numel():
                    seen[o.untyped_storage().data_ptr()] = "the previous round"
        for k, out in enumerate(outs):
            for o in as_outputs(out):
                if type(o) is not self.Tensor or not o.numel():
                    continue
                ptr = o.untyped_storage().data_ptr()
                if ptr in seen:
                    return [f"timed call {k + 1} of a round returned the buffer of an earlier "
                            f"call's output ({seen[ptr]}): a cached result"]
                seen[ptr] = "this round"
        return []

    def fetch(self, req):
        """The outputs of the last round's timed calls at req["indices"], and the input sets
        at req["sets"] as they are now (the parent checks them for mutation)."""
        from .task import as_outputs
        calls = []
        for i in req["indices"]:
            outs = as_outputs(self.round_outputs[i])
            if any(type(o) is not self.Tensor for o in outs):
                return {"error": "a timed call returned something other than plain tensors"}
            calls.append([self._enc(o) for o in outs])
        sets = [[self._enc_value(x) for x in self.sets[j]] for j in req.get("sets", [])]
        return {"calls": calls, "sets": sets}

    def sets_after(self, req):
        """The input sets at req["indices"] (all without it) as they are now."""
        idx = req.get("indices")
        chosen = self.sets if idx is None else [self.sets[int(i)] for i in idx]
        return {"sets": [self._enc_value(s) for s in chosen]}

    # ---- replies' tensors -----------------------------------------------------------------
    def _enc(self, t):
        """A tensor of a reply: on a GPU, when the worker asks for it and the tensor is one
        the memfd path would carry (>= 64 KiB; smaller ones go inline), as a CUDA IPC map
        (the worker copies it device to device, ipc.py) kept alive until the next request;
        else (or when it cannot be exported) its bytes."""
        if self.ipc and t.is_cuda and t.numel() * t.element_size() >= self.ipc_min_bytes:
            from . import ipc
            try:
                m, keep = ipc.export(t)
            except ipc.IpcUnavailable:
                return self.protocol.encode_tensor(t)
            m["id"] = len(self.exported)
            self.exported[m["id"]] = keep
            return m
        return self.protocol.encode_tensor(t)

    def _enc_value(self, v):
        if isinstance(v, self.Tensor):
            return self._enc(v)
        if isinstance(v, (list, tuple)):
            return {"__seq__": [self._enc_value(x) for x in v], "tuple": isinstance(v, tuple)}
        return self.protocol.encode_value(v)

    def resend(self, req):
        """The last reply's exported tensors at req["ids"], by memfd (the worker could not map
        their handles)."""
        try:
            return {"tensors": [self.protocol.encode_tensor(self.exported[int(i)]) for i in req["ids"]]}
        except (KeyError, TypeError, ValueError):
            return {"error": "resend: no such tensor in the last reply"}

    def serve(self):
        handlers = {"build": self.build, "load": self.load, "call": self.call, "load_sets": self.load_sets,
                    "gen_sets": self.gen_sets, "resend": self.resend,
                    "time": self.time_round, "fetch": self.fetch, "sets_after": self.sets_after}
        self.protocol.write_frame(self.fd_out, {"ready": True, "pid": os.getpid(),
                                                "startup_s": getattr(self, "startup_s", None)})
        while True:
            try:
                req = self.protocol.read_frame(self.fd_in, fd_sock=self.fd_sock)
            except self.protocol.FrameEOF:
                return
            op = req.get("op")
            if op == "exit":
                return
            handler = handlers.get(op)
            if op != "resend":  # the worker has copied the last reply's tensors: free them
                self.exported = {}
                self.ipc = req.get("ipc") is True
            try:
                reply = handler(req) if handler else {"error": f"unknown op {op!r}"}
            except BaseException as e:
                reply = {"error": _err(e)}
            lie = _test_lie()
            if lie:
                from ._test_lies import write_lying_frame
                write_lying_frame(self.fd_out, self.fd_sock, reply, lie)
            else:
                self.protocol.write_frame(self.fd_out, reply, self.fd_sock)
            # The reply's tensors (a check's inputs and snapshot, by memfd) are freed now, not
            # once the next request's handler has returned: a large task's check held the
            # previous check's input set and output beside its own.
            req = reply = None


def _test_lie() -> str:
    """Tests only (CAF_EVAL_TEST_HOOKS=1): how to lie in the next reply with tensors, read from
    the file CAF_EVAL_CHILD_LIE_FILE names (set in the worker's environment, which no
    submission reaches)."""
    path = os.environ.get("CAF_EVAL_CHILD_LIE_FILE")
    if os.environ.get("CAF_EVAL_TEST_HOOKS") != "1" or not path:
        return ""
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def main():
    from ._pdeathsig import die_with_parent
    die_with_parent()  # a hung submission must not outlive a killed worker
    fd_in, fd_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)  # the submission's prints go to the capped log, never to the frame stream
    fd_sock = None
    if os.environ.get("CAF_EVAL_FD_SOCK"):
        import socket
        fd_sock = socket.socket(fileno=int(os.environ.pop("CAF_EVAL_FD_SOCK")))
        fd_sock.set_inheritable(False)  # the build's compilers must not hold it
    Child(fd_in, fd_out, fd_sock).serve()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
