#pragma once
// flat_params: the trained fp32 master parameters of one model (the actor, or the critic without
// its LM head) as views into one contiguous fp32 buffer, one flat fp32 gradient beside it, and
// the model's compute copy in bf16 (or fp16) as views into one flat buffer of that dtype. Each
// forward then casts every master with one kernel (instead of one per parameter), the backward
// adds the compute gradients into the fp32 gradient with one kernel, and the optimizer
// (optimizer.hpp) norms, clips, steps and clears single tensors.
//
// The masters keep their tensor objects: each is moved into the flat buffer in place
// (Tensor::set_), so every handle to it (the decoder, its copies, a caller's tensors) sees the
// flat storage. Names and shapes are unchanged: checkpoints, weight publication and the
// optimizer's state by name read as before.
//
// Shape legend: p elements of all flat parameters together.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "learner/result.hpp"
#include "policy/model/decoder.hpp"
#include "policy/model/safetensors.hpp"

namespace caf_agent::learner {

/// The masters of one model in one fp32 buffer, and their gradient.
class flat_params {
 public:
  /// Moves `params` (fp32 leaf tensors on one device, in map order) into one flat buffer; their
  /// values are unchanged and requires_grad is switched on. Errors: no parameter, a non-fp32 or
  /// non-leaf tensor, two devices, two parameters sharing memory (flattening would untie them).
  static result<std::shared_ptr<flat_params>> create(const policy::tensor_map& params);

  /// Parameter names, in the flat buffer's order.
  const std::vector<std::string>& names() const { return names_; }
  /// The master tensors (views into values_p()), in names() order.
  const std::vector<torch::Tensor>& params() const { return params_; }
  /// Every master end to end: fp32 [p], the masters' own storage.
  const torch::Tensor& values_p() const { return values_p_; }
  /// Views of `flat_p` (numel p, any dtype) shaped as the parameters, in names() order.
  std::vector<torch::Tensor> views(const torch::Tensor& flat_p) const;

  /// The accumulated gradient of every parameter, fp32 [p]: what compute copies added, plus any
  /// .grad that autograd (fp32 compute) or a caller left on a master, which is added in (one
  /// multi-tensor add) and cleared. A parameter without a gradient contributes zeros.
  const torch::Tensor& grad_p();
  /// Adds `g_p` ([p], any floating dtype) to the gradient in one kernel.
  void add_grad(const torch::Tensor& g_p);
  /// Clears every gradient (the flat one is zeroed when next read or added to).
  void zero_grad();
  /// The name of the first parameter whose gradient holds a NaN or an Inf; empty when none does.
  std::string first_non_finite_grad();
  /// Changes whenever a master is written in place, through values_p() or a parameter's handle
  /// (the sum of their version counters), or marked written.
  int64_t values_version() const;
  /// Marks values_p() written by a kernel that autograd does not count as an in-place write
  /// (torch's fused AdamW leaves the version counter alone).
  void mark_values_written() { ++writes_; }

 private:
  std::vector<std::string> names_;
  std::vector<torch::Tensor> params_;
  std::vector<int64_t> offsets_;
  torch::Tensor values_p_, grad_p_;
  bool grad_zero_ = true;  ///< grad_p_ stands for zeros (its contents are stale).
  int64_t writes_ = 0;     ///< mark_values_written() calls.
};

/// A decoder's compute copy: its flat masters cast into one flat buffer of the compute dtype.
class compute_copy {
 public:
  /// The copy of `master` in `dtype` (bf16 or fp16), whose parameters in `flat` are cast as one
  /// buffer; any other parameter (the critic's unused LM head) is cast on its own per forward.
  static result<compute_copy> create(const policy::decoder& master, std::shared_ptr<flat_params> flat,
                                     torch::ScalarType dtype);

  /// The decoder of one forward. Casts the masters into the flat buffer (one kernel; skipped
  /// when no master changed since the last cast) and returns a decoder whose weights are views
  /// of it, all outputs of one autograd node: its backward copies their gradients into one flat
  /// buffer of the compute dtype and adds that to the masters' flat gradient in one kernel.
  /// Between a forward and its backward the masters must not change (autograd then reports a
  /// tensor modified in place).
  result<policy::decoder> for_forward();
  /// The compute dtype.
  torch::ScalarType dtype() const { return dtype_; }

  /// Internal: what the autograd node shares with the copy.
  struct state;

 private:
  policy::decoder master_;
  policy::decoder template_;  ///< In the compute dtype: its RoPE table is cast once.
  std::shared_ptr<flat_params> flat_;
  std::shared_ptr<state> state_;
  torch::ScalarType dtype_ = torch::kBFloat16;
  int64_t cast_version_ = -1;
};

}  // namespace caf_agent::learner
