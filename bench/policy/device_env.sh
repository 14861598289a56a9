# shellcheck shell=bash
# Sourced by bench/policy/run_*.sh: the device machine's description, written to $1/env.txt
# before any step runs (GPU, driver, SM clock and memory; torch, CUDA, transformers; cores), and
# the newer compiler where the image has one.
[ -x /opt/gcc/bin/g++ ] && export CXX=${CXX:-/opt/gcc/bin/g++}
write_device_env() {
  { date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.total --format=csv
    ${PY:-python3} -c 'import torch, transformers; print(torch.__version__, torch.version.cuda, transformers.__version__)'
    nproc; } > "$1/env.txt" 2>&1
}
# cap N: a step's time limit, N seconds, cut so that the step ends by STOP_AT (seconds since the
# epoch, optional: e.g. STOP_AT=$(( $(date +%s) + 570 )) for a call of at most 600 s), at least 1 s
# (a step with no time left fails at once, and the script goes on to pack what it has).
# Rationale: each step runs under `timeout`, which makes a process group of its own, so a TERM
# sent to the whole script reaches the script only (bash runs its trap once the step under way
# has ended), not the step; a deadline each step knows ends the call on time.
cap() {
  local n=$1 left
  if [ -n "${STOP_AT:-}" ]; then
    left=$(( STOP_AT - $(date +%s) ))
    [ "$left" -lt "$n" ] && n=$left
  fi
  [ "$n" -lt 1 ] && n=1
  echo "$n"
}
# scrub_paths DIR [BUILD]: no machine paths in the files under DIR (what a call brings back): this
# tree's root as ., the Python environment as <venv>, a compiler outside /usr as <cc>, BUILD (a build
# folder outside the tree) as <build>, Python's temporary folders (/tmp/tmpXXXX, a tool's scratch
# output named in a recorded command) and pytest's (/tmp/pytest-of-USER/pytest-N, a failing test's
# tmp_path in its traceback) as <tmp>.
scrub_paths() {
  local venv cc_dir scrub
  venv=$(${PY:-python3} -c "import sys; print(sys.prefix)")
  cc_dir=$(dirname "$(dirname "$(command -v "${CXX:-g++}")")")
  scrub="s|$PWD/|./|g; s|$PWD\b|.|g; s|/tmp/tmp[A-Za-z0-9_]*|<tmp>|g; s|/tmp/pytest-of-[A-Za-z0-9_.-]*/pytest-[0-9]*|<tmp>|g"
  [ -n "${2:-}" ] && scrub="s|$2|<build>|g; $scrub"
  case $venv in /usr | /usr/local | /) ;; *) scrub="$scrub; s|$venv/|<venv>/|g" ;; esac
  case $cc_dir in /usr | /usr/local | /) ;; *) scrub="$scrub; s|$cc_dir/|<cc>/|g" ;; esac
  grep -rlF -e "$PWD" -e "$venv/" -e "$cc_dir/" -e /tmp/tmp -e /tmp/pytest-of- ${2:+-e "$2"} "$1" 2>/dev/null |
    xargs -r sed -i "$scrub"
}
# pack_out DIR NAME: everything under DIR packed into DIR/NAME.tgz and nothing else left there (the
# device machine returns at most 8 files).
pack_out() {
  (cd "$1" && tar czf "/tmp/$2.tgz" --exclude "$2.tgz" . && rm -rf ./* && mv "/tmp/$2.tgz" .)
}
