#!/usr/bin/env bash
# Issue 15's H200 figures in one device call, from a source tree's root (results under $OUT):
#   OUT=... bash bench/policy/run_h200.sh
# 1. a LibTorch-only build (-DCAF_AGENT_LIBTORCH_ONLY=ON) of policy_model_tool into $BUILD;
# 2. the gpu tests of the engine: CUDA-graph decode against eager over multi-turn conversations
#    with eviction (test_decode_graphs_gpu.py), flash against sdpa and transformers
#    (test_cache_attention_gpu.py), the fused kernels against transformers and the composites
#    (test_fused_kernels_gpu.py), overlapped decoding against stepping one at a time (test_overlap_gpu.py),
#    the e4m3 KV cache (test_fp8_kv_gpu.py), the boundary bench's two ways' sums (test_boundary_chain_gpu.py);
# 3. bench_agent.py: 64 x 512, the 64-row step profiled with and without graphs, the agent workload
#    with the prefix cache, one sequence at 131,072 context, the prefills of turns 5, 10, ..., 30 of
#    the re-prefilling run timed alone (its lower bound), then the whole re-prefilling run until
#    START + BUDGET seconds.
# 4. PAGED=1: first, the 64 x 512 bench and the cached agent workload again with kv_layout = paged
#    (bench_agent.py --kv-layout paged --skip-uncached --skip long, capped at PAGED_S seconds).
# UNFUSED=1: before step 3, the 64 x 512 bench with --no-fused-kernels (the ATen composites; an A/B
# of policy/model/fused_ops.hpp in the same call). OVERLAP=1: before step 3, the 64 x 512 bench and
# the cached agent workload with --overlap (engine_options::overlap; an A/B against step 3's runs,
# capped at OVERLAP_S seconds). BATCH_AB / LONG_AB / CACHED_AB ("flags;flags"): before step 3, the
# 64 x 512 bench / the 131k decode / the cached agent workload once per set of bench_agent.py
# flags (A/Bs against step 3's runs, e.g. LONG_AB="--flash-decode-shares 16;--decode-gemv-rows 1";
# each run capped at BATCH_AB_S / LONG_AB_S / CACHED_AB_S seconds; agent-batch-K.json,
# agent-long-K.json, agent-cached-K.json).
# BENCH_ARGS: more bench_agent.py arguments for step 3 (e.g. --skip-uncached).
# GATE: pytest arguments run right after the build; the call stops there if they fail (GATE_SOFT=1:
# it goes on, for an A/B whose speed is wanted whichever way the test goes; GATE_S: its cap, 120 s).
# MICRO ("script args;script args"): kernel benches with the built tool after step 2 (micro-K.md).
# TESTS_S caps step 2 (default 300 s: 48 of its tests took 245 s on an H100); GPU_TESTS=0 leaves out step 2; SAMPLE_TURNS (default 5,10,15,20,25,30; empty: none) are the turns
# timed alone; PROFILE_KEYS (default 16384; 0: none) profiles the 64-row step at that context too.
# Each step's log is in $OUT; bench_agent's JSON in $OUT/agent.json (paged: $OUT/agent-paged.json).
# PACK=1: everything under $OUT packed into $OUT/policy-h200.tgz whenever the script exits (the device
# machine returns at most 8 files; OVERLAP=1 or PAGED=1 with the profiles write more).
# STOP_AT (seconds since the epoch): every step's cap cut to end by then (cap in device_env.sh), so
# that a call that runs short of time still packs what it measured.
# PREBUILT (a folder carried to the device): bench/policy/prebuilt.py's tool instead of step 1's
# build where its stamp fits this tree and torch and $BUILD is not configured yet; build.log says
# which ran.
set -u
OUT=${OUT:-/tmp/policy-h200}; mkdir -p "$OUT"
PY=${PY:-python3}
BUILD=${BUILD:-/tmp/policy-build}
BUDGET=${BUDGET:-300}
START=$(date +%s)
# Whenever the script exits (at its end, on an error, or on TERM once the step under way has ended):
# no machine paths in what comes back (scrub_paths in device_env.sh), then PACK's archive.
finish() {
  scrub_paths "$OUT"
  if [ "${PACK:-0}" = 1 ]; then
    pack_out "$OUT" policy-h200
  fi
}
trap 'echo "stopped at $(( $(date +%s) - START )) s"; exit 143' TERM INT
trap finish EXIT
. bench/policy/device_env.sh
write_device_env "$OUT"
timeout "$(cap 200)" $PY -c "import pathlib, sys; sys.path.insert(0, 'bench/policy'); import bench_generate; \
bench_generate.build_tool(pathlib.Path('$BUILD'), prebuilt='${PREBUILT:-}' or None)" > "$OUT/build.log" 2>&1
echo "build rc=$? at $(( $(date +%s) - START )) s"; tail -3 "$OUT/build.log"
if [ -n "${GATE:-}" ]; then  # e.g. GATE="tests/policy/model/test_fused_kernels_gpu.py -k sample"
  CAF_AGENT_BUILD_DIR=$BUILD timeout "$(cap ${GATE_S:-120})" $PY -m pytest -v -m gpu $GATE > "$OUT/gate-tests.log" 2>&1
  rc=$?; echo "gate tests rc=$rc at $(( $(date +%s) - START )) s"; tail -8 "$OUT/gate-tests.log"
  [ $rc = 0 ] || [ "${GATE_SOFT:-0}" = 1 ] || exit $rc
fi
if [ "${GPU_TESTS:-1}" = 1 ]; then
CAF_AGENT_BUILD_DIR=$BUILD timeout "$(cap ${TESTS_S:-300})" $PY -m pytest -v -rP -m gpu tests/policy/model/test_decode_graphs_gpu.py \
  tests/policy/model/test_cache_attention_gpu.py tests/policy/model/test_fused_kernels_gpu.py \
  tests/policy/model/test_overlap_gpu.py tests/policy/model/test_fp8_kv_gpu.py \
  tests/policy/model/test_boundary_chain_gpu.py > "$OUT/gpu-tests.log" 2>&1
echo "gpu tests rc=$? at $(( $(date +%s) - START )) s"; tail -8 "$OUT/gpu-tests.log"
fi
# MICRO: ';'-separated kernel benches, each a script and its arguments (e.g.
# "bench/policy/bench_gemv.py --calls 30;bench/policy/bench_fp8_attention.py --calls 30"), run with
# the built tool (micro-K.md, micro-K.json), each capped at MICRO_S seconds.
if [ -n "${MICRO:-}" ]; then
  IFS=';' read -ra micros <<< "$MICRO"
  k=0
  for micro in "${micros[@]}"; do
    k=$((k + 1))
    # shellcheck disable=SC2086  # the script's words
    timeout "$(cap ${MICRO_S:-90})" $PY $micro --tool "$BUILD/policy/model/policy_model_tool" --out "$OUT/micro-$k.json" \
      > "$OUT/micro-$k.md" 2>&1
    echo "micro $k ($micro) rc=$? at $(( $(date +%s) - START )) s"; cat "$OUT/micro-$k.md"
  done
fi
if [ "${PAGED:-0}" = 1 ]; then
  timeout "$(cap ${PAGED_S:-150})" $PY bench/policy/bench_agent.py --build-dir "$BUILD" --kv-layout paged --skip-uncached \
    --skip long --out "$OUT/agent-paged.json" > "$OUT/agent-paged.log" 2>&1
  echo "paged bench rc=$? at $(( $(date +%s) - START )) s"; grep -v '^ ' "$OUT/agent-paged.log" | tail -4
fi
if [ "${UNFUSED:-0}" = 1 ]; then
  timeout "$(cap ${UNFUSED_S:-90})" $PY bench/policy/bench_agent.py --build-dir "$BUILD" --no-fused-kernels --skip cached long \
    --skip-uncached --out "$OUT/agent-unfused.json" > "$OUT/agent-unfused.log" 2>&1
  echo "unfused bench rc=$? at $(( $(date +%s) - START )) s"; grep -v '^ ' "$OUT/agent-unfused.log" | tail -3 | cut -c1-600
fi
if [ "${OVERLAP:-0}" = 1 ]; then
  timeout "$(cap ${OVERLAP_S:-150})" $PY bench/policy/bench_agent.py --build-dir "$BUILD" --overlap --skip long \
    --skip-uncached --out "$OUT/agent-overlap.json" > "$OUT/agent-overlap.log" 2>&1
  echo "overlap bench rc=$? at $(( $(date +%s) - START )) s"; grep -v '^ ' "$OUT/agent-overlap.log" | tail -4 | cut -c1-600
fi
# BATCH_AB / LONG_AB / CACHED_AB: ';'-separated sets of bench_agent.py flags, each one run of the
# 64 x 512 bench, the 131k decode or the cached agent workload with them, numbered in order
# (agent-batch-K.json, agent-long-K.json, agent-cached-K.json).
ab_runs() {  # ab_runs batch|long|cached "flags;flags" seconds
  local what=$1 k=0 flags skip
  case $what in batch) skip="cached long" ;; long) skip="batch cached" ;; *) skip="batch long" ;; esac
  IFS=';' read -ra sets <<< "$2"
  for flags in "${sets[@]}"; do
    k=$((k + 1))
    # shellcheck disable=SC2086  # flags are words
    timeout "$(cap $3)" $PY bench/policy/bench_agent.py --build-dir "$BUILD" $flags --skip $skip --skip-uncached \
      --profile-out "$OUT/$what-$k" --out "$OUT/agent-$what-$k.json" > "$OUT/agent-$what-$k.log" 2>&1
    echo "$what $k ($flags) rc=$? at $(( $(date +%s) - START )) s"; grep -v '^ ' "$OUT/agent-$what-$k.log" | tail -2 | cut -c1-400
  done
}
[ -n "${BATCH_AB:-}" ] && ab_runs batch "$BATCH_AB" "${BATCH_AB_S:-60}"
[ -n "${LONG_AB:-}" ] && ab_runs long "$LONG_AB" "${LONG_AB_S:-60}"
[ -n "${CACHED_AB:-}" ] && ab_runs cached "$CACHED_AB" "${CACHED_AB_S:-100}"
timeout "$(cap $(( START + BUDGET + 30 - $(date +%s) )))" $PY bench/policy/bench_agent.py --build-dir "$BUILD" ${BENCH_ARGS:-} \
  --uncached-sample-turns "${SAMPLE_TURNS-5,10,15,20,25,30}" --profile-keys "${PROFILE_KEYS:-16384}" --deadline $(( START + BUDGET )) --profile-out "$OUT" \
  --out "$OUT/agent.json" > "$OUT/agent.log" 2>&1
echo "bench rc=$? at $(( $(date +%s) - START )) s"; grep -v '^ ' "$OUT/agent.log" | tail -20
