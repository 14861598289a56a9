// The standalone CUDA benches' way of failing (bench_rows_wgmma.cu, bench_cutlass_rows.cu): a call
// that failed ends the run with its name and why, prefixed by the bench's name, so a test or a
// device call's log says which bench and which call. Each bench defines `bench_name` before
// including this; nvcc finds it beside the bench's source, so the one-line builds need no -I.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

// Ends the run naming the call that failed and why (exit code 1 unless given: 2 for bad
// arguments, 3 for a wrong result, 4 for a hang, as each bench's header says).
inline void fail_if(bool failed, const char* call, const char* why, int code = 1) {
  if (!failed) return;
  std::fprintf(stderr, "%s: %s: %s\n", bench_name, call, why);
  std::exit(code);
}

#define CHECK(call)                                            \
  do {                                                         \
    const cudaError_t e_ = (call);                             \
    fail_if(e_ != cudaSuccess, #call, cudaGetErrorString(e_)); \
  } while (0)

#define CHECK_CUBLAS(call)                                                  \
  do {                                                                      \
    const cublasStatus_t s_ = (call);                                       \
    fail_if(s_ != CUBLAS_STATUS_SUCCESS, #call, cublasGetStatusString(s_)); \
  } while (0)
