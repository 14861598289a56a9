# Sourced by bench/policy/run_*_h200.sh: the device machine's description, written to $1/env.txt
# before any step runs (GPU, driver, SM clock and memory; torch, CUDA, transformers; cores), and
# the newer compiler where the image has one.
[ -x /opt/gcc/bin/g++ ] && export CXX=${CXX:-/opt/gcc/bin/g++}
write_device_env() {
  { date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.total --format=csv
    ${PY:-python3} -c 'import torch, transformers; print(torch.__version__, torch.version.cuda, transformers.__version__)'
    nproc; } > "$1/env.txt" 2>&1
}
