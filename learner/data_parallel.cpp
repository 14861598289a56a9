// c10d process groups for data-parallel shards (see data_parallel.hpp).

#include "learner/data_parallel.hpp"

#include <cstdlib>
#include <map>
#include <string>
#include <utility>

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#ifdef CAF_AGENT_C10D_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef CAF_AGENT_C10D_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace caf_agent::learner {

namespace {

// The message of a c10d exception without LibTorch's C++ backtrace.
std::string what_of(const std::exception& e) {
  if (const auto* ce = dynamic_cast<const c10::Error*>(&e)) return ce->what_without_backtrace();
  return e.what();
}

#ifdef CAF_AGENT_C10D_GLOO
bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}
#endif

c10d::ReduceOp to_c10d(reduce_op op) {
  switch (op) {
    case reduce_op::max:
      return c10d::ReduceOp::MAX;
    case reduce_op::min:
      return c10d::ReduceOp::MIN;
    default:
      return c10d::ReduceOp::SUM;  // mean divides the sum afterwards (gloo has no AVG)
  }
}

const char* op_name(reduce_op op) {
  switch (op) {
    case reduce_op::sum:
      return "sum";
    case reduce_op::mean:
      return "mean";
    case reduce_op::max:
      return "max";
    case reduce_op::min:
      return "min";
  }
  return "?";
}

// Indices of `tensors` grouped into buckets: same dtype and device, at most `bucket_bytes` each
// (a larger tensor alone), in the order of first appearance.
std::vector<std::vector<size_t>> make_buckets(const std::vector<torch::Tensor>& tensors, int64_t bucket_bytes) {
  std::vector<std::vector<size_t>> buckets;
  std::map<std::pair<int, std::string>, std::pair<size_t, int64_t>> open;  // key -> bucket, bytes
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    const auto key = std::make_pair(static_cast<int>(t.scalar_type()), t.device().str());
    const int64_t bytes = t.numel() * static_cast<int64_t>(t.element_size());
    auto it = open.find(key);
    if (it == open.end() || it->second.second + bytes > bucket_bytes) {
      buckets.push_back({});
      it = open.insert_or_assign(key, std::make_pair(buckets.size() - 1, int64_t{0})).first;
    }
    buckets[it->second.first].push_back(i);
    it->second.second += bytes;
  }
  return buckets;
}

}  // namespace

struct process_group::impl {
  process_group_options options;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> backend;  // null for a world of one
  std::string failed;                         // the first collective error; the group is unusable after it

  std::string who(const char* op) const {
    return std::string(op) + " (" + to_string(options.backend) + ", rank " + std::to_string(options.rank) + " of " +
           std::to_string(options.world_size) + ")";
  }

  // Waits for one collective; converts a c10d failure into an error value and poisons the group.
  status finish(const c10::intrusive_ptr<c10d::Work>& work, const char* op) {
    try {
      work->wait(options.timeout);
      return {};
    } catch (const std::exception& e) {
      failed = who(op) + " failed: " + what_of(e);
      return fail(failed);
    }
  }

  // Runs `collective` on flat buffers of each bucket of `tensors`, divides the result by
  // `divisor` (1: left as it is) and copies it back.
  template <class Collective>
  status bucketed(std::vector<torch::Tensor>& tensors, const char* op, bool floating_only, double divisor,
                  Collective collective) {
    if (!failed.empty()) return fail(who(op) + ": the group failed earlier: " + failed);
    for (size_t i = 0; i < tensors.size(); ++i) {
      const auto& t = tensors[i];
      if (!t.defined()) return fail(who(op) + ": tensor " + std::to_string(i) + " is undefined");
      if (floating_only && !t.is_floating_point())
        return fail(who(op) + ": tensor " + std::to_string(i) + " is not floating point");
      const bool on_cuda = t.is_cuda();
      if (backend && on_cuda != (options.backend == dp_backend::nccl))
        return fail(who(op) + ": tensor " + std::to_string(i) + " is on " + t.device().str() + ", which " +
                    to_string(options.backend) + " does not reduce");
    }
    if (!backend) return {};  // a world of one: nothing to exchange
    for (const auto& bucket : make_buckets(tensors, options.bucket_bytes)) {
      // Rationale: a bucket of one contiguous tensor (a model's flat gradient, flat_params.hpp)
      // is reduced in place: the concatenation and the copy back would move it twice more.
      const bool in_place = bucket.size() == 1 && tensors[bucket[0]].is_contiguous();
      std::vector<at::Tensor> flat;
      if (in_place) {
        flat.push_back(tensors[bucket[0]].detach().view({-1}));
      } else {
        std::vector<torch::Tensor> flat_parts;
        for (size_t i : bucket) flat_parts.push_back(tensors[i].detach().reshape({-1}));
        flat.push_back(torch::cat(flat_parts));
      }
      try {
        if (auto ok = finish(collective(flat), op); !ok) return ok;
      } catch (const std::exception& e) {  // a collective that throws at submission
        failed = who(op) + " failed: " + what_of(e);
        return fail(failed);
      }
      if (divisor != 1.0) flat[0].div_(divisor);
      if (in_place) {
        // The collective wrote the memory behind autograd's back; count it as an in-place write,
        // as the copy back would (a compute copy of reduced weights recasts them then).
        torch::autograd::impl::bump_version(tensors[bucket[0]]);
        continue;
      }
      int64_t offset = 0;
      for (size_t i : bucket) {
        auto& t = tensors[i];
        torch::NoGradGuard no_grad;
        t.copy_(flat[0].narrow(0, offset, t.numel()).view(t.sizes()));
        offset += t.numel();
      }
    }
    return {};
  }
};

bool process_group::backend_available(dp_backend backend) {
#ifdef CAF_AGENT_C10D_GLOO
  if (backend == dp_backend::gloo) return true;
#endif
#ifdef CAF_AGENT_C10D_NCCL
  if (backend == dp_backend::nccl) return torch::cuda::is_available();
#endif
  return false;
}

result<std::unique_ptr<process_group>> process_group::create(const process_group_options& options) {
  if (options.world_size < 1) return fail("process_group: world_size must be >= 1");
  if (options.rank < 0 || options.rank >= options.world_size)
    return fail("process_group: rank " + std::to_string(options.rank) + " is outside 0.." +
                std::to_string(options.world_size - 1));
  if (options.timeout.count() <= 0) return fail("process_group: timeout must be > 0");
  if (options.bucket_bytes <= 0) return fail("process_group: bucket_bytes must be > 0");
  auto state = std::make_unique<impl>();
  state->options = options;
  if (options.world_size == 1) return std::unique_ptr<process_group>(new process_group(std::move(state)));
  if (!backend_available(options.backend))
    return fail(std::string("process_group: this build has no ") + to_string(options.backend) +
                " backend (gloo needs gloo's headers at configure time, e.g. Debian's libgloo-dev; nccl needs "
                "LibTorch with CUDA and a GPU)");
  const std::string where = "process_group: rank " + std::to_string(options.rank) + " of " +
                            std::to_string(options.world_size) + " at " + options.master_addr + ":" +
                            std::to_string(options.master_port);
  try {
    c10d::TCPStoreOptions store_options;
    store_options.port = options.master_port;
    store_options.isServer = options.rank == 0;
    store_options.numWorkers = static_cast<size_t>(options.world_size);
    store_options.waitWorkers = true;
    store_options.timeout = options.timeout;
    state->store = c10::make_intrusive<c10d::TCPStore>(options.master_addr, store_options);
  } catch (const std::exception& e) {
    return fail(where + ": rendezvous failed: " + what_of(e));
  }
  try {
    if (options.backend == dp_backend::gloo) {
#ifdef CAF_AGENT_C10D_GLOO
      auto gloo_options = c10d::ProcessGroupGloo::Options::create(options.timeout);
      const std::string host = !options.gloo_host.empty()
                                   ? options.gloo_host
                                   : (is_loopback(options.master_addr) ? options.master_addr : "");
      gloo_options->devices.push_back(host.empty() ? c10d::ProcessGroupGloo::createDefaultDevice()
                                                   : c10d::ProcessGroupGloo::createDeviceForHostname(host));
      state->backend = c10::make_intrusive<c10d::ProcessGroupGloo>(state->store, static_cast<int>(options.rank),
                                                                   static_cast<int>(options.world_size), gloo_options);
#endif
    } else {
#ifdef CAF_AGENT_C10D_NCCL
      // Rationale: blocking wait makes a timed-out or aborted collective throw from wait() (an
      // error value here) instead of the watchdog ending the process; an operator's own setting
      // wins.
      setenv("TORCH_NCCL_BLOCKING_WAIT", "1", /*overwrite=*/0);
      c10::cuda::set_device(static_cast<c10::DeviceIndex>(options.rank % torch::cuda::device_count()));
      auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
      nccl_options->timeout = options.timeout;
      state->backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(state->store, static_cast<int>(options.rank),
                                                                   static_cast<int>(options.world_size), nccl_options);
#endif
    }
  } catch (const std::exception& e) {
    return fail(where + ": creating the " + to_string(options.backend) + " backend failed: " + what_of(e));
  }
  return std::unique_ptr<process_group>(new process_group(std::move(state)));
}

process_group::process_group(std::unique_ptr<impl> state) : impl_(std::move(state)) {}

process_group::~process_group() = default;

int64_t process_group::rank() const {
  return impl_->options.rank;
}

int64_t process_group::world_size() const {
  return impl_->options.world_size;
}

dp_backend process_group::backend() const {
  return impl_->options.backend;
}

status process_group::all_reduce(std::vector<torch::Tensor>& tensors, reduce_op op) {
  const std::string name = std::string("all_reduce ") + op_name(op);
  auto& state = *impl_;
  const double world = static_cast<double>(state.options.world_size);
  const bool mean = op == reduce_op::mean;
  return state.bucketed(tensors, name.c_str(), mean, mean ? world : 1.0, [&](std::vector<at::Tensor>& flat) {
    c10d::AllreduceOptions o;
    o.reduceOp = to_c10d(op);
    o.timeout = state.options.timeout;
    return state.backend->allreduce(flat, o);
  });
}

status process_group::broadcast(std::vector<torch::Tensor>& tensors, int64_t root) {
  auto& state = *impl_;
  if (root < 0 || root >= state.options.world_size)
    return fail(state.who("broadcast") + ": root " + std::to_string(root) + " is not a rank");
  return state.bucketed(tensors, "broadcast", false, 1.0, [&](std::vector<at::Tensor>& flat) {
    c10d::BroadcastOptions o;
    o.rootRank = root;
    o.timeout = state.options.timeout;
    return state.backend->broadcast(flat, o);
  });
}

status process_group::barrier() {
  auto& state = *impl_;
  if (!state.failed.empty()) return fail(state.who("barrier") + ": the group failed earlier: " + state.failed);
  if (!state.backend) return {};
  // One element reduced on the backend's device: works the same on gloo and NCCL.
  auto device = torch::Device(torch::kCPU);
#ifdef CAF_AGENT_C10D_NCCL
  if (state.options.backend == dp_backend::nccl) device = torch::Device(torch::kCUDA, c10::cuda::current_device());
#endif
  std::vector<torch::Tensor> token{torch::zeros({1}, torch::TensorOptions().device(device))};
  return all_reduce(token, reduce_op::sum);
}

}  // namespace caf_agent::learner
