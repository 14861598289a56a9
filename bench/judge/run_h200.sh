#!/usr/bin/env bash
# The judge's GPU runs on the H200 device machine, in one call (results under $OUT):
#   bash bench/judge/run_h200.sh [bench|agent|suite|all]...   (default: all = bench agent suite)
# kernelbench: verify of a reference copy over KernelBench problems (bench_kernelbench.py;
#        not part of "all": needs bench/judge/external/KernelBench; KB_PRIOR: earlier runs'
#        kernelbench.json files, space-separated, whose wall times order the queue);
# warm: torch.compile of the bench cases' references in the background (warm_inductor.py), so
#        a later bench step's cold profiles hit inductor's caches; it runs beside the next steps
#        but suite and bench wait for it (e.g. `warm kernelbench suite bench`);
# bench: bench_judge.py, one warm worker, the cases below (compile time, warm verify+profile,
#        CV over 10 profiles, reward tiers); agent: the released CUDA Agent workspace flow timed
#        on its own example (time_cuda_agent.sh; needs its workspace under
#        bench/judge/external/cuda_agent_workdir, not part of this repo); suite: the CUDA
#        reward-hack suite. Steps run one after another, never side by side (uncontended).
# DEV=cpu runs bench, warm and kernelbench on the CPU (a dry run of this script off the GPU).
# Caps (seconds, env): BT bench, AT agent, ST suite, KT kernelbench. Defaults fit one 600 s device call.
# BENCH_ARGS: more bench_judge.py flags (e.g. --no-compile-bench); AB: evaluation options as
# JSON for an A/B of every case (e.g. AB='{"timing": {"flush_in_stream": true}}'; several arms
# separated by ';'); CASES: the
# bench's cases, space-separated (default: the four below). SUITE_TIMING: timing options as
# JSON for the suite's evaluations (tests/reward_hacks/hack_helpers.py, CAF_SUITE_TIMING).
# Files under $OUT: env.txt, bench.json, bench.log, cuda_agent.log, suite.log, kernelbench.json/.log,
# their machine paths scrubbed at the end (bench/policy/device_env.sh, scrub_paths).
set -u
OUT=${OUT:-/tmp/judge-h200}; mkdir -p "$OUT"
PY=${PY:-python3}
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-16}
export CAF_EVAL_BUILD_ROOT=${CAF_EVAL_BUILD_ROOT:-/tmp/caf_eval_build}
KBDEV=cuda:0; [ "${DEV:-cuda}" = cpu ] && KBDEV=cpu
steps=${*:-all}; [ "$steps" = all ] && steps="bench agent suite"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv
  $PY -c 'import sys,torch,pytest,msgpack,numpy; print(sys.version); print(torch.__version__, torch.version.cuda)'
  nvcc --version | tail -1; nproc; } 2>&1 | tee "$OUT/env.txt"
# Warm the page cache with the torch and CUDA headers once, so neither flow's first compile
# pays for cold disk reads the other does not.
TI=$($PY -c 'import torch.utils.cpp_extension as c; print(c.include_paths()[0])' 2>/dev/null)
find "$TI" /usr/local/cuda/include -name '*.h' -type f -print0 2>/dev/null | xargs -0 cat > /dev/null 2>&1
# SM clock, power and temperature every 200 ms while the steps run (read-only queries).
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu,memory.used \
  --format=csv -lms 200 > "$OUT/smi.csv" 2>&1 &
SMI=$!
WARM=()
for s in $steps; do
  case $s in
  warm)
    # torch.compile of the bench cases' references in the background (warm_inductor.py: inductor's
    # on-disk caches, nothing timed), e.g. beside kernelbench; the suite and bench steps wait for them.
    for c in ${CASES:-axpby:1x128 add_relu:16x16384 sin_chain:1024x8192:64 sin_chain:2048x8192:64}; do
      $PY bench/judge/warm_inductor.py --device "${DEV:-cuda}" --case "$c" >> "$OUT/warm.log" 2>&1 & WARM+=($!)
    done ;;
  bench)
    for w in "${WARM[@]}"; do wait "$w"; done; WARM=()
    cases=""; for c in ${CASES:-axpby:1x128 add_relu:16x16384 sin_chain:1024x8192:64 sin_chain:2048x8192:64}; do
      cases="$cases --case $c"; done
    abs=(); IFS=';' read -r -a arms <<< "${AB:-}"
    for x in "${arms[@]}"; do [ -n "${x// }" ] && abs+=(--ab "$x"); done
    # shellcheck disable=SC2086
    timeout "${BT:-170}" $PY bench/judge/bench_judge.py --device "${DEV:-cuda}" --build-root "$CAF_EVAL_BUILD_ROOT" \
      $cases ${BENCH_ARGS:-} "${abs[@]}" --out "$OUT/bench.json" 2> "$OUT/bench.log" \
      | tee "$OUT/bench_summary.txt"
    echo "bench rc=${PIPESTATUS[0]}" ;;
  agent)
    timeout "${AT:-100}" bash bench/judge/time_cuda_agent.sh bench/judge/external/cuda_agent_workdir "$OUT"
    echo "agent rc=$?" ;;
  kernelbench)
    # Verify of a reference copy over KernelBench (bench_kernelbench.py); needs its
    # KernelBench/ folder under bench/judge/external/ (not part of this repo: carry it).
    # KB_SELECT picks problems (e.g. 1:19-25,2:1-3), KB_JOB_S the per-job cap, KT the step's,
    # KB_WORKERS workers side by side (each with 1/N of the GPU's memory; what is too large
    # for that is judged again alone with all of it), KB_HONEST_RELU=1 also verifies an
    # honest kernel on level1/19_ReLU (6 GiB, all five checks) and records its peak memory.
    timeout "${KT:-300}" $PY bench/judge/bench_kernelbench.py --root bench/judge/external/KernelBench \
      --device "$KBDEV" --build-root "$CAF_EVAL_BUILD_ROOT" --job-timeout "${KB_JOB_S:-60}" \
      --budget-s "$(( ${KT:-300} - ${KB_RESERVE_S:-30} ))" ${KB_SELECT:+--select "$KB_SELECT"} \
      --workers "${KB_WORKERS:-1}" ${KB_HONEST_RELU:+--honest-relu} \
      $(for f in ${KB_PRIOR:-}; do printf -- '--prior %s ' "$f"; done) \
      --estimates bench/judge/external/KernelBench/caf_estimates.json \
      --out "$OUT/kernelbench.json" > "$OUT/kernelbench.log" 2>&1
    echo "kernelbench rc=$?"; grep -E "whole device|honest|SUMMARY|TIMES" "$OUT/kernelbench.log" | tail -40 ;;
  suite)
    # Three workers share the GPU, so a test that compares two profiles' times can see one
    # of them inflated by another test's kernels (the side-stream test's honest add_relu:
    # 0.36 ms beside another test, 0.036 ms alone, 2026-12-01): those run alone afterwards.
    # The suite waits for a warm step's compiles: beside its parallel part (2026-12-01, call 4)
    # an honest ~3 us fused kernel was timed at 0.163 ms (the torch.compile baseline of the
    # same ops: 0.0036 ms); the test had passed in every earlier run, without them beside it
    # (most likely contention, not re-run without them). Run warm beside kernelbench.
    for w in "${WARM[@]}"; do wait "$w"; done; WARM=()
    SERIAL="side_stream"; t_suite=$(date +%s)
    CAF_SUITE_TIMING=${SUITE_TIMING:-} timeout "${ST:-100}" $PY -m pytest -v -n "${SUITE_N:-3}" --tb=short \
      -p no:cacheprovider -m gpu -k "not ($SERIAL)" tests/reward_hacks/cuda tests/skills > "$OUT/suite.log" 2>&1
    a=$?
    left=$(( ${ST:-100} - ($(date +%s) - t_suite) )); [ "$left" -lt 30 ] && left=30
    CAF_SUITE_TIMING=${SUITE_TIMING:-} timeout "$left" $PY -m pytest -v --tb=short -p no:cacheprovider -m gpu \
      -k "$SERIAL" tests/reward_hacks/cuda tests/skills >> "$OUT/suite.log" 2>&1
    b=$?
    echo "suite rc=$(( a || b ))"; grep -E "PASSED|FAILED|ERROR|passed|failed" "$OUT/suite.log" | tail -20 ;;
  esac
done
kill $SMI 2>/dev/null
# No machine paths in what comes back (the tree's root as ., pytest's and Python's temporary
# folders as <tmp>: device_env.sh's scrub_paths), in a subshell so that nothing it sets reaches
# the steps above.
( . bench/policy/device_env.sh && scrub_paths "$OUT" )
