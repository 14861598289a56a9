#pragma once
// Data-parallel shards: one process per GPU (or CPU shard), gradients all-reduced through c10d
// from LibTorch. ProcessGroupNCCL on CUDA tensors (when the build has CUDA and NCCL), ProcessGroupGloo
// on CPU tensors (when the build found gloo's headers: the torch wheel ships gloo inside
// libtorch_cpu but not its headers; Debian's libgloo-dev provides them); rendezvous through
// c10d::TCPStore, served by rank 0.
//
// Every call is collective: all ranks call the same operations in the same order with tensors of
// the same shapes and dtypes. A peer that dies or stops answering fails the call with an error
// value within `timeout` (gloo sees the closed connection at once; NCCL's watchdog aborts the
// communicator); the group is unusable afterwards, and the shard should end its step and exit.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "learner/config.hpp"
#include "learner/result.hpp"

namespace caf_agent::learner {

// dp_backend, the c10d backend of a process group, and its names: learner/config.hpp.

/// How to join a group.
struct process_group_options {
  int64_t rank = 0;        ///< This process, 0 .. world_size - 1.
  int64_t world_size = 1;  ///< Number of shards; 1 needs no rendezvous and no backend.
  /// Where rank 0 serves the TCPStore; the other ranks connect there.
  std::string master_addr = "127.0.0.1";
  /// The TCPStore port. Rationale: 29500 is torchrun's default, familiar to operators.
  uint16_t master_port = 29500;
  /// Rendezvous and collective timeout. Rationale: long enough for a 131k-token micro-batch
  /// on the slowest shard to reach the all-reduce, short enough that a dead peer ends the run
  /// in minutes, not hours.
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  /// The backend; gloo for CPU tensors, nccl for CUDA tensors.
  dp_backend backend = dp_backend::gloo;
  /// Flattened bucket size of all_reduce. Rationale: 25 MiB is DDP's default bucket: large
  /// enough to amortise a collective's latency, small enough to bound the staging memory.
  int64_t bucket_bytes = int64_t{25} << 20;
  /// Address gloo binds its transport to (empty: master_addr when it is a loopback address,
  /// else this host's name).
  std::string gloo_host;
};

/// A reduction of all_reduce.
enum class reduce_op { sum, mean, max, min };

/// A joined c10d process group. Not thread-safe: one thread issues the collectives.
class process_group {
 public:
  /// Joins the group: rank 0 starts the TCPStore, all ranks wait until the world is complete
  /// (at most `timeout`), then build the backend. Errors: bad rank or world, a backend this
  /// build lacks, rendezvous timeout, the port in use.
  static result<std::unique_ptr<process_group>> create(const process_group_options& options);

  /// True when this build can create groups of `backend` (gloo headers found, or CUDA + NCCL).
  static bool backend_available(dp_backend backend);

  ~process_group();
  process_group(const process_group&) = delete;
  process_group& operator=(const process_group&) = delete;

  /// This process's rank.
  int64_t rank() const;
  /// The number of ranks.
  int64_t world_size() const;
  /// The backend of the group.
  dp_backend backend() const;

  /// Reduces `tensors` across ranks in place. The tensors are grouped by dtype and device and
  /// flattened into buckets of at most bucket_bytes (a tensor larger than that is a bucket of its
  /// own; a contiguous tensor alone in its bucket is reduced where it lies, without a copy), one
  /// collective per bucket. mean is the sum divided by world_size. Every tensor must be
  /// defined, contiguous or not, on the backend's device kind. Errors: a bad tensor, a failed or
  /// timed-out collective (a peer died), named with the operation.
  status all_reduce(std::vector<torch::Tensor>& tensors, reduce_op op);

  /// all_reduce with reduce_op::mean: averages gradients over the shards.
  status all_reduce_mean(std::vector<torch::Tensor>& tensors) { return all_reduce(tensors, reduce_op::mean); }

  /// Overwrites `tensors` on every rank with rank `root`'s values (bucketed like all_reduce).
  /// Used to start every shard from rank 0's parameters.
  status broadcast(std::vector<torch::Tensor>& tensors, int64_t root = 0);

  /// Returns when every rank has reached it, or an error when one does not within the timeout.
  status barrier();

 private:
  struct impl;
  explicit process_group(std::unique_ptr<impl> state);
  std::unique_ptr<impl> impl_;
};

}  // namespace caf_agent::learner
