#!/usr/bin/env bash
# Runs the data synthesis pipeline (datasets/caf_agent_data/pipeline.py) with the repository's
# venv; every argument goes to the pipeline. Example (the bundled sample):
#   tools/synth_tasks.sh --out datasets/sample --seed 0 --count 60 --eval-set skills/tasks --force
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${CAF_AGENT_PYTHON:-$ROOT/.venv/bin/python}"
cd "$ROOT"
PYTHONPATH="$ROOT/datasets${PYTHONPATH:+:$PYTHONPATH}" exec "$PY" -m caf_agent_data.pipeline "$@"
