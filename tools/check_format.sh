#!/usr/bin/env bash
# Every C++/CUDA file (tracked, or new and not ignored) is formatted by .clang-format (120 columns, Google base).
# Debian 12's clang-format 14 is the reference: another major version formats a few
# constructs differently, so this check refuses to judge with one.
#   tools/check_format.sh          list the files that differ; exit 1 if any
#   tools/check_format.sh --fix    format them in place
set -euo pipefail
cd "$(dirname "$0")/.."
cf=""
for c in clang-format-14 clang-format; do
  if command -v "$c" >/dev/null && "$c" --version | grep -qE 'version 14\.'; then cf="$c"; break; fi
done
if [ -z "$cf" ]; then
  echo "format: clang-format 14 not found (Debian 12 package clang-format; ./x setup installs it)" >&2
  exit 1
fi
# Tracked files and new ones git does not ignore, so a file is checked before its first commit.
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.cpp' '*.hpp' '*.h' '*.cu' '*.cuh')
if [ "${1:-}" = "--fix" ]; then
  "$cf" -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  if ! "$cf" --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if [ "${#bad[@]}" -ne 0 ]; then
  echo "format: ${#bad[@]} file(s) differ from .clang-format (run tools/check_format.sh --fix):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
