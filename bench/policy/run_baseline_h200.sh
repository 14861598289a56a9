#!/usr/bin/env bash
# The agent workload on today's engine and on the engine before the KV cache was kept across
# turns (commit a0d4fec), in one device call, from a source tree's root (results under $OUT):
#   git archive a0d4fec CMakeLists.txt cmake policy learner tests | tar -x -C bench/policy/baseline/src
#   OUT=... bash bench/policy/run_baseline_h200.sh
# (bench/policy/baseline/src is ignored by git; carry it to the device machine.)
# 1. both trees built at once (LibTorch-only policy_model_tool; the older one also
#    bench/policy/baseline/agent_workload.cpp);
# 2. GPU_TESTS=1: today's engine's gpu tests (graph decode against eager, flash);
# 3. today's engine: bench_agent.py's 64 x 512 bench and the agent workload with the prefix cache;
# 4. the older engine: 64 x 512 and the agent workload, every turn re-prefilled, until
#    START + BUDGET - 15 seconds (bench_baseline.py --deadline); stopped there, its turns so far
#    and the time bound it from below.
set -u
OUT=${OUT:-/tmp/baseline-h200}; mkdir -p "$OUT"
PY=${PY:-python3}
BUILD=${BUILD:-/tmp/policy-build}
OLD_BUILD=${OLD_BUILD:-/tmp/policy-build-a0d4fec}
SRC=${BASELINE_SRC:-bench/policy/baseline/src}
BUDGET=${BUDGET:-585}
START=$(date +%s)
. bench/policy/device_env.sh
write_device_env "$OUT"
timeout 240 $PY -c "import pathlib, sys; sys.path.insert(0, 'bench/policy'); import bench_generate; \
bench_generate.build_tool(pathlib.Path('$BUILD'))" > "$OUT/build.log" 2>&1 &
timeout 240 $PY -c "import pathlib, sys; sys.path.insert(0, 'bench/policy'); import bench_baseline; \
bench_baseline.build(pathlib.Path('$SRC').resolve(), pathlib.Path('$OLD_BUILD'))" > "$OUT/build-old.log" 2>&1 &
wait
echo "builds done at $(( $(date +%s) - START )) s"; tail -1 "$OUT/build.log"; tail -1 "$OUT/build-old.log"
if [ "${GPU_TESTS:-0}" = 1 ]; then
  CAF_AGENT_BUILD_DIR=$BUILD timeout 120 $PY -m pytest -v -m gpu tests/policy/model/test_decode_graphs_gpu.py \
    tests/policy/model/test_cache_attention_gpu.py > "$OUT/gpu-tests.log" 2>&1
  echo "gpu tests rc=$? at $(( $(date +%s) - START )) s"; tail -3 "$OUT/gpu-tests.log"
fi
timeout 200 $PY bench/policy/bench_agent.py --build-dir "$BUILD" --skip-uncached --skip long \
  --out "$OUT/agent.json" > "$OUT/agent.log" 2>&1
echo "today's engine rc=$? at $(( $(date +%s) - START )) s"; grep -v '^ ' "$OUT/agent.log" | grep '^{"' | cut -c1-300
timeout $(( START + BUDGET + 10 - $(date +%s) )) $PY bench/policy/bench_baseline.py --source "$SRC" \
  --build-dir "$OLD_BUILD" --deadline $(( START + BUDGET - 15 )) --out "$OUT/baseline.json" > "$OUT/baseline.log" 2>&1
echo "older engine rc=$? at $(( $(date +%s) - START )) s"; grep '^{"' "$OUT/baseline.log" | cut -c1-400
