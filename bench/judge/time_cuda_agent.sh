#!/usr/bin/env bash
# Times the released CUDA Agent workspace flow on its own example (axpby): its compile, verify
# and profile commands, each a fresh process as its agent runs them, in a scratch copy.
#   bash bench/judge/time_cuda_agent.sh WORKDIR OUTDIR
# WORKDIR is that project's agent workspace folder (not part of this repo: fetch it from its
# public repository into bench/judge/external/, which git ignores). Prints SUMMARY lines.
set -u
src=$(cd "${1:?workspace folder}" && pwd); out=$(mkdir -p "${2:-/tmp}" && cd "${2:-/tmp}" && pwd)
PY=${PY:-python3}
work=$(mktemp -d)/agent_workdir
cp -r "$src" "$work" && cd "$work" || exit 1
step() {
  local name=$1; shift
  local t0 t1 rc
  echo "=== $name: $*" >> "$out/cuda_agent.log"
  t0=$(date +%s.%N); "$@" > "$out/cuda_agent_step.log" 2>&1; rc=$?; t1=$(date +%s.%N)
  cat "$out/cuda_agent_step.log" >> "$out/cuda_agent.log"
  awk -v a="$t0" -v b="$t1" -v n="$name" -v r="$rc" 'BEGIN { printf "SUMMARY cuda_agent %s %.2f s rc=%d\n", n, b - a, r }' \
    | tee -a "$out/cuda_agent.log"
  tail -2 "$out/cuda_agent_step.log"
  rm -f "$out/cuda_agent_step.log"
}
step compile bash utils/compile.sh
step verify $PY -m utils.verification
step profile $PY -m utils.profiling
