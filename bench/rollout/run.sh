#!/usr/bin/env bash
# bench/rollout/run.sh: 10,000 concurrent episodes x 150 turns against 128 sim GPU slots.
# Usage: bench/rollout/run.sh [episodes turns slots policy_ms tool_ms eval_ms]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${CAF_AGENT_BUILD_DIR:-$ROOT/build}"
cmake --build "$BUILD" --target scale_bench >/dev/null
exec "$BUILD/bench/rollout/scale_bench" "$@"
