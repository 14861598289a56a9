#pragma once
/// gpu_pool/worker_protocol.hpp: the eval worker's request/verdict structs and the framing
/// (4-byte big-endian length + msgpack map) spoken with skills/eval_worker.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "messages/enums.hpp"

namespace caf_agent::gpu_pool {

/// Rationale: a verdict is a few KiB (logs are capped at 16 + 64 KiB); 64 MiB bounds the
/// allocation a corrupt length prefix can cause.
inline constexpr std::uint32_t max_frame_bytes = 64u << 20;

/// What an eval measures: correctness only, correctness + timings, or the final reward run
/// (the protocol's enum; on the wire by its name, messages::name_of).
using messages::eval_mode;

/// Timing options of a profile; unset fields keep the worker's defaults.
struct timing_options {
  std::optional<double> budget_s;       ///< wall-clock budget of the candidate's timing
  std::optional<int> max_iters;         ///< cap on timed iterations
  std::optional<int> min_iters;         ///< minimum timed iterations
  std::optional<bool> fresh_baselines;  ///< re-measure eager/compile for this job
};

/// Verification options; unset fields keep the worker's defaults (atol = rtol = 1e-2, 5 checks).
struct eval_options {
  std::optional<double> atol;             ///< absolute tolerance
  std::optional<double> rtol;             ///< relative tolerance
  std::optional<int> num_checks;          ///< seeded checks
  std::optional<double> call_timeout_s;   ///< deadline of one forward call in the worker
  std::optional<double> build_timeout_s;  ///< deadline of the submission's build
  timing_options timing;                  ///< profile options
};

/// One evaluation request: the task, the agent's files and a per-job secret.
struct eval_request {
  std::string job_id;                        ///< echoed in the response
  eval_mode mode = eval_mode::verify;        ///< what to run
  std::string task_name;                     ///< for messages
  std::string model_py;                      ///< the pristine task source
  std::map<std::string, std::string> files;  ///< model_new.py and kernels/** only
  std::string seed_secret;                   ///< derives the unpredictable input seeds
  std::string device;                        ///< informational ("cpu", "cuda:0")
  eval_options options;                      ///< overrides of the worker's defaults
};

/// One verification check's outcome.
struct check_result {
  int index = 0;        ///< 0-based check number
  bool passed = false;  ///< outputs matched
  std::string reason;   ///< why it failed (empty when passed)
};

/// Median times (ms) and their 95% confidence intervals; NaN when not measured.
struct timings {
  double candidate_ms = 0;                          ///< submission (event time on GPU, wall on CPU)
  double candidate_wall_ms = 0;                     ///< submission wall time
  double eager_ms = 0;                              ///< eager baseline
  double compile_ms = 0;                            ///< torch.compile baseline
  double roofline_floor_ms = 0;                     ///< bytes moved / peak bandwidth
  int iterations = 0;                               ///< timed iterations of the candidate
  std::map<std::string, std::vector<double>> ci95;  ///< name -> [lo, hi]
};

/// The judge's verdict on one submission.
struct verdict {
  bool correct = false;              ///< every check passed
  std::string reason;                ///< agent-readable: names the check, op or input
  std::vector<check_result> checks;  ///< per check
  timings times;                     ///< present after profile/final
  bool has_timings = false;          ///< times is meaningful
  std::vector<std::string> flags;    ///< e.g. "torch_fallback", "crashed", "timeout"
  double speedup_eager = 0;          ///< eager_ms / candidate_ms (0 when absent)
  double speedup_compile = 0;        ///< compile_ms / candidate_ms (0 when absent)
  std::string compile_log;           ///< capped compiler output
  std::string log;                   ///< capped output of the submission
  bool cached_build = false;         ///< the job found its library built (no compile on the slot)
};

/// The worker's answer: status "ok" carries a verdict, "infra_error" an error text.
struct eval_response {
  std::string job_id;        ///< from the request
  bool infra_error = false;  ///< the judge, not the submission, failed (retry may help)
  std::string error;         ///< text of an infra error
  verdict result;            ///< the verdict when !infra_error
};

/// A build-stage request: compile the submission's kernels into the build root the slots'
/// jobs use, so the job that follows finds them built (no submission code runs).
struct build_request {
  std::string job_id;                        ///< echoed in the response
  std::map<std::string, std::string> files;  ///< model_new.py and kernels/** (sources are picked)
  std::string flavour;                       ///< "cpu" or "cuda"; empty: the worker's own
  std::optional<double> timeout_s;           ///< deadline of the build (the worker's default)
};

/// The answer to a build request.
struct build_response {
  std::string job_id;                     ///< from the request
  bool infra_error = false;               ///< the builder, not the submission, failed
  std::string error;                      ///< text of an infra error
  bool ok = false;                        ///< built (or found built)
  bool cached = false;                    ///< found built: nothing was compiled
  std::string log;                        ///< compiler output or the static checks' findings (capped)
  std::map<std::string, double> seconds;  ///< per step ("total", "pch", "kernels/x.cpp", "link")
};

/// True when `files` hold kernel sources a build would compile (kernels/*.cpp, *.cu, ...).
bool has_kernel_sources(const std::map<std::string, std::string>& files);

/// Encodes a build request as a msgpack map (no frame header).
std::string encode_build_request(const build_request& req);

/// Decodes a builder's response; nullopt with *error set on malformed input.
std::optional<build_response> decode_build_response(std::string_view payload, std::string* error);

/// Encodes a build response (the inverse of decode_build_response; tests and fakes).
std::string encode_build_response(const build_response& resp);

/// Encodes a request as a msgpack map (no frame header).
std::string encode_request(const eval_request& req);

/// Decodes a request (the inverse of encode_request; used by tests and fakes).
std::optional<eval_request> decode_request(std::string_view payload, std::string* error);

/// Encodes a response as a msgpack map (no frame header; used by tests and fakes).
std::string encode_response(const eval_response& resp);

/// Decodes a worker's response; nullopt with *error set on malformed input.
std::optional<eval_response> decode_response(std::string_view payload, std::string* error);

/// Prefixes payload with its 4-byte big-endian length.
std::string frame(std::string_view payload);

/// Incremental decoder of frames from a byte stream.
class frame_reader {
 public:
  /// Appends received bytes.
  void feed(std::string_view bytes);
  /// The next complete payload, if any; sets *error and returns nullopt on an oversize frame.
  std::optional<std::string> next(std::string* error);
  /// Bytes buffered but not yet returned.
  std::size_t buffered() const { return buf_.size(); }

 private:
  std::string buf_;
};

}  // namespace caf_agent::gpu_pool
