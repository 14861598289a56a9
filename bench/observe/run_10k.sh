#!/usr/bin/env bash
# bench/observe/run_10k.sh: the registry's cost. 10,000 sim episodes (sim policy and sim
# GPU slots at ~0 latency, so the run is orchestration only) in the local role, with
# [observe] instrument on and off, twice each, alternating; prints wall and CPU time.
set -euo pipefail
cd "$(dirname "$0")/../.."
for on in true false true false; do
  cfg=$(mktemp --suffix=.toml)
  sed "s/^instrument = .*/instrument = $on/" bench/observe/sim_10k.toml > "$cfg"
  /usr/bin/time -f "instrument=$on wall %e s user %U s sys %S s" \
    build/caf-agent --role local --config "$cfg" --episodes 10000 2>&1 >/dev/null | tail -1
done
