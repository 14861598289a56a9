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
    "timing": {
        "input_sets": 3,         # Rationale: rotating sets defeat input-keyed caching.
        "warmup": 3,
        "iters_per_round": 10,
        "min_iters": 20,         # Rationale: n >= 20 makes the order-statistic CI meaningful.
        "max_iters": 300,
        "rel_ci": 0.01,          # Rationale: stop once the median is known to within 1%.
        "budget_s": 2.0,         # Rationale: keeps verify+profile within ~3 s per job.
        "samples_per_round": 2,  # timed calls whose outputs are checked, per round
        "peak_gbps": 0.0,        # 0: from the device table in profile.PEAK_GBPS
        "roofline_enforce": None,  # None: enforce on CUDA only (CPU caches beat DRAM floors)
        "fresh_baselines": False,  # True: re-measure eager/compile interleaved for this job
        "compile_baseline": True,
    },
}


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
    if default is None or value is None:
        return value
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise OptionError(f"option '{name}' must be a boolean")
        return value
    if isinstance(default, (int, float)) and not isinstance(value, bool) and isinstance(value, (int, float)):
        return type(default)(value)
    raise OptionError(f"option '{name}' has the wrong type ({type(value).__name__})")
