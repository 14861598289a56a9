"""Denoised timing: trusted timers, L2 flush, rotating inputs, median with a 95% CI.

The Timers object captures its clock and synchronisation functions when it is built, before
the submission is imported, so patching time.perf_counter or torch.cuda.Event afterwards
changes nothing it measures (and Timers.tampered() reports the attempt).
"""
from __future__ import annotations

import math
import time

import torch

# Rationale: twice the H200's 50 MiB L2 (and above any CPU's last-level cache we run on),
# so one memset evicts everything the previous iteration left in cache.
FLUSH_BYTES = 128 * 1024 * 1024

# Rationale: HBM peak bandwidths (GB/s); a time below bytes/peak cannot be real. The CPU
# figure is deliberately above any cache bandwidth of the 2-16 cores a CPU slot gets, so it
# only flags absurd (tampered) times on cache-resident inputs.
PEAK_GBPS = {"H200": 4800.0, "H100": 3350.0, "A100": 2039.0, "cpu": 1000.0}


class Timers:
    """Clock, sync and event functions captured at construction."""

    def __init__(self, device: str, flush: bool = True):
        self.device = device
        self.cuda = device.startswith("cuda")
        self.perf = time.perf_counter
        self._gap_ms = None
        self._identity = [(time, "perf_counter", time.perf_counter)]
        if self.cuda:
            self.sync = torch.cuda.synchronize
            self.event_cls = torch.cuda.Event
            self.record = torch.cuda.Event.record
            self.elapsed = torch.cuda.Event.elapsed_time
            self._identity += [(torch.cuda, "synchronize", self.sync),
                               (torch.cuda, "Event", self.event_cls),
                               (torch.cuda.Event, "record", self.record),
                               (torch.cuda.Event, "elapsed_time", self.elapsed)]
            self.flush_buf = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device=device) if flush else None
            self.zero = torch.Tensor.zero_
        else:
            self.sync = lambda: None
            self.flush_buf = None

    def tampered(self) -> list[str]:
        """Names of timing functions that were replaced since construction."""
        return [f"{getattr(owner, '__name__', owner)}.{name}" for owner, name, fn in self._identity
                if getattr(owner, name, None) is not fn]

    def sync_gap_ms(self) -> float:
        """Event time from a stop event, through a device-wide sync, to a second event, with
        no work in between (the harness's own gap; measured once, median of 21)."""
        if self._gap_ms is None:
            gaps = []
            for _ in range(21):
                a, b = self.event_cls(enable_timing=True), self.event_cls(enable_timing=True)
                self.sync()
                self.record(a)
                self.sync()
                self.record(b)
                self.sync()
                gaps.append(self.elapsed(a, b))
            self._gap_ms = sorted(gaps)[len(gaps) // 2]
        return self._gap_ms

    def flush(self) -> None:
        if self.flush_buf is not None:
            self.zero(self.flush_buf)


def time_calls(fn, input_sets: list, order: list[int], timers: Timers, keep: bool):
    """Runs fn on input_sets[i] for i in order; returns (primary_ms, wall_ms, outputs).

    Each iteration: flush L2, device-wide sync, start, call, stop, device-wide sync. The sync
    is device-wide (not stream-local) so work a submission puts on side streams is counted.
    primary_ms is CUDA event time on a GPU and wall time on a CPU.
    """
    primary, wall, outs = [], [], []
    perf, sync = timers.perf, timers.sync
    gap0 = timers.sync_gap_ms() if timers.cuda else 0.0
    events = [tuple(timers.event_cls(enable_timing=True) for _ in range(3))
              for _ in order] if timers.cuda else None
    for k, idx in enumerate(order):
        args = input_sets[idx]
        timers.flush()
        sync()
        w0 = perf()
        if events:
            timers.record(events[k][0])
        out = fn(*args)
        if events:
            timers.record(events[k][1])
        sync()
        if events:
            timers.record(events[k][2])
        w1 = perf()
        wall.append((w1 - w0) * 1e3)
        if keep:
            outs.append(out)
        del out
    if events:
        sync()
        # Work the current stream's stop event does not wait for (a side stream) ends before
        # the device-wide sync returns: the gap from stop to a post-sync event, less the gap an
        # empty call shows, is that work's time and is added to the event time.
        primary = [timers.elapsed(a, b) + max(0.0, timers.elapsed(b, c) - gap0)
                   for a, b, c in events]
    else:
        primary = list(wall)
    return primary, wall, outs


def median_ci(samples: list[float]) -> tuple[float, float, float]:
    """Median and its distribution-free 95% CI from order statistics."""
    xs = sorted(samples)
    n = len(xs)
    if n == 0:
        return math.nan, math.nan, math.nan
    med = xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])
    half = 1.96 * math.sqrt(n) / 2
    lo = max(0, int(math.floor(n / 2 - half)) - 1)
    hi = min(n - 1, int(math.ceil(n / 2 + half)))
    return med, xs[lo], xs[hi]


def settled(samples: list[float], rel_ci: float, min_n: int) -> bool:
    """True once the 95% CI half-width is within rel_ci of the median."""
    if len(samples) < min_n:
        return False
    med, lo, hi = median_ci(samples)
    return med > 0 and (hi - lo) / 2 <= rel_ci * med


def cv(samples: list[float]) -> float:
    """Coefficient of variation (stdev / mean)."""
    n = len(samples)
    if n < 2:
        return 0.0
    mean = sum(samples) / n
    var = sum((x - mean) ** 2 for x in samples) / (n - 1)
    return math.sqrt(var) / mean if mean else math.inf


def peak_gbps(device: str, override: float | None = None) -> float:
    """Peak memory bandwidth for the roofline floor (0 disables it)."""
    if override:
        return override
    if device.startswith("cuda"):
        name = torch.cuda.get_device_name(device)
        return next((v for k, v in PEAK_GBPS.items() if k in name), 0.0)
    return PEAK_GBPS["cpu"]


def roofline_floor_ms(tensors: list, gbps: float) -> float:
    """Minimum time to read the inputs and write the outputs once at peak bandwidth."""
    if gbps <= 0:
        return 0.0
    nbytes = sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))
    return nbytes / (gbps * 1e9) * 1e3
