"""Evaluation options: defaults, merging with a request's options, validation."""
from __future__ import annotations

DEFAULTS = {
    # Rationale: KernelBench's fp32 tolerance; tight enough to reject wrong math, loose enough
    # for reordered fp32 reductions and TF32/fp16 accumulation the task allows.
    "atol": 1e-2, "rtol": 1e-2,
    "rel_l2": 0.05,              # see verify.DEFAULT_REL_L2
    "num_checks": 5,             # Rationale: 5 fresh seeded inputs, the CUDA Agent protocol.
    # Rationale (deadlines): a CPU compile of torch headers takes ~60 s on a loaded 2-core box
    # (CUDA builds on the GPU hosts are faster); a forward call of a level 1-2 task takes ms,
    # so 30 s only trips on an infinite loop; a start-up imports torch (seconds).
    "build_timeout_s": 300.0, "call_timeout_s": 30.0, "start_timeout_s": 120.0,
    "round_timeout_s": 60.0,
    # Rationale: loading the built library (its static initialisers), importing model_new.py
    # and building ModelNew with the reference's weights take well under a second for level
    # 1-2 tasks and a few seconds for level 3's larger weights on a loaded 2-core host; 30 s
    # only trips on a spin, which otherwise held the slot for the whole build deadline.
    "load_timeout_s": 30.0,
    "timing": {
        # Rationale: every timed call gets an input set no earlier call of the job saw (new
        # seeds each round, sent between rounds): rotating among 3 sets let a cache keyed on
        # the input's address and a few values return stored outputs at memcpy speed (r = 3,
        # Python and C++). False: the old rotation among input_sets sets (benchmarks only).
        "fresh_inputs": True,
        # Rationale: with fresh inputs both sides hold one round's sets; 1 GiB per side bounds
        # that (and the host-path transfer per round, ~0.1-0.2 s) whatever the task: a task
        # whose input set is larger gets rounds of fewer calls, down to one.
        "round_set_bytes": 1 << 30,
        "input_sets": 3,         # the warm-up's sets (and the rotation when fresh_inputs is off)
        "warmup": 3,
        # Rationale: an idle GPU sits at a low clock (an H200 read 465 MHz SM at idle) and
        # takes tens to hundreds of ms of load to reach its boost clock; timing before that
        # reads a slow first stretch (2.9% CV across profiles of a 0.63 ms task, 2026-11-30).
        # None: 0.25 s of calls on a GPU, none on a CPU.
        "warmup_s": None,
        # True (GPU): the warm-up ends early once the SM clock, measured by the worker between
        # warm-up rounds, is at the highest clock this worker measured at the end of a full
        # warm-up (measure.warm_up): a GPU that just finished the previous job is already
        # there, and the 0.25 s of calls were most of a small task's profile (axpby on the
        # H200: 0.44 s of 1.22 s, 2026-12-01). False: always warmup_s.
        "warmup_clock": True,
        "iters_per_round": 10,
        # Rationale: the order-statistic CI is coarse at 20 calls (a tight middle hides wide
        # tails: medians of 20-call profiles varied more than their CIs said, H200
        # 2026-11-30); 50 calls cost ~0.1 s on a 1 ms task.
        "min_iters": 50,
        "max_iters": 300,
        # Rationale: stop once the median's 95% CI is within +-0.5%. At +-1% (20 calls of a
        # task whose calls vary by 3-4%) the medians of 10 profiles still varied by 1.3%
        # (H200, 2026-11-30); the target is a CV of 1% across profiles.
        "rel_ci": 0.005,
        "budget_s": 2.0,         # Rationale: keeps verify+profile within ~3 s per job.
        "samples_per_round": 2,  # timed calls whose outputs are checked, per round
        "peak_gbps": 0.0,        # 0: from the device table in profile.PEAK_GBPS
        "roofline_enforce": None,  # None: enforce on CUDA only (CPU caches beat DRAM floors)
        # True (GPU): the L2 flush is queued after the sync, right before the start event (as
        # triton's do_bench does), so the memset covers the host's launch path. Off: work on
        # a side stream can run beside the memset, before the start event (the CUDA suite's
        # side-stream tests fail with it, H200 2026-11-30); hold_ms does the same job safely.
        "flush_in_stream": False,
        # > 0 (GPU): the hold kernel (hold.py: every SM's thread slots, spinning) for this many
        # ms after the flush and sync, before the start event, so the call is queued before
        # its start event fires. H200, sin_chain 1024x8192, 10 profiles: CV 2.13% without a
        # hold, 0.01% with 0.1 ms (2026-11-30, bench/results/2026-11-30-judge-h200-4.md); a
        # one-thread spin let side-stream work run before the start event, hence the
        # SM-filling kernel. Rationale for 0.5: with 0.1 the same torch.compile baseline took
        # 0.546 ms on one host and 0.636 ms on a slower one (the candidate: 0.5737 and 0.5736),
        # consistent with its host path (guards, wrapper) outlasting the hold there; 0.5 ms
        # leaves room (timings.launch_ms shows each function's host share, hold_short names
        # those longer than the hold). Not yet re-measured on a GPU at 0.5. 0: off.
        "hold_ms": 0.5,
        "fresh_baselines": False,  # True: re-measure eager/compile interleaved for this job
        "compile_baseline": True,
    },
}


# The types an option whose default is None (meaning "decide by device") may take.
NONE_DEFAULT_TYPES = {"timing.warmup_s": (int, float), "timing.roofline_enforce": (bool,)}


class OptionError(ValueError):
    """An unknown option key or a value of the wrong type."""


def merge(request_options: dict | None) -> dict:
    """DEFAULTS overridden by the request's options; unknown keys are an error."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in DEFAULTS.items()}
    for key, value in (request_options or {}).items():
        if key not in DEFAULTS:
            raise OptionError(f"unknown option '{key}'")
        if isinstance(DEFAULTS[key], dict):
            if not isinstance(value, dict):
                raise OptionError(f"option '{key}' must be a map")
            for k2, v2 in value.items():
                if k2 not in DEFAULTS[key]:
                    raise OptionError(f"unknown option '{key}.{k2}'")
                out[key][k2] = _typed(f"{key}.{k2}", DEFAULTS[key][k2], v2)
        else:
            out[key] = _typed(key, DEFAULTS[key], value)
    return out


def _typed(name, default, value):
    if value is None:
        return value
    if default is None:
        types = NONE_DEFAULT_TYPES.get(name, ())
        if types and (not isinstance(value, types) or (bool not in types and isinstance(value, bool))):
            raise OptionError(f"option '{name}' has the wrong type ({type(value).__name__})")
        return float(value) if float in types and bool not in types else value
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise OptionError(f"option '{name}' must be a boolean")
        return value
    if isinstance(default, (int, float)) and not isinstance(value, bool) and isinstance(value, (int, float)):
        return type(default)(value)
    raise OptionError(f"option '{name}' has the wrong type ({type(value).__name__})")
