#!/usr/bin/env bash
# Builds and runs the sandbox benchmark. Usage: bench/sandbox/run.sh [build_dir] [bash_calls] [file_calls]
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-${CAF_AGENT_BUILD_DIR:-$repo/build}}"
cmake --build "$build" --target sandbox_bench -j2
"$build/bench/sandbox/sandbox_bench" "${2:-300}" "${3:-2000}"
