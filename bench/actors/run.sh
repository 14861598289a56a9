#!/usr/bin/env bash
# bench/actors/run.sh: local actor request/response rate. Usage: bench/actors/run.sh [ROUND_TRIPS]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${CAF_AGENT_BUILD_DIR:-$ROOT/build}"
cmake --build "$BUILD" --target actor_bench >/dev/null
"$BUILD/bench/actors/actor_bench" "${1:-1000000}"
