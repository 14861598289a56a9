// Shape legend: see flat_params.hpp.
#include "learner/flat_params.hpp"

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <tuple>

namespace caf_agent::learner {

struct compute_copy::state {
  std::shared_ptr<flat_params> masters;
  torch::Tensor values_p;  ///< The compute weights end to end, in the compute dtype.
  torch::Tensor grad_p;    ///< The backward's gradient of them, same dtype.
  std::vector<torch::Tensor> grad_views;
};

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// Keeps the copy's state alive inside the autograd graph (saved_data holds IValues).
struct state_capsule : torch::CustomClassHolder {
  explicit state_capsule(std::shared_ptr<compute_copy::state> s) : state(std::move(s)) {}
  std::shared_ptr<compute_copy::state> state;
};

/// One node from the fp32 flat masters to every compute weight. Forward: views of the cast
/// buffer (cast before, under no-grad). Backward: the weights' gradients gathered into one flat
/// buffer of the compute dtype (one multi-tensor copy), added to the fp32 flat gradient in one
/// kernel. It returns no gradient for `masters_p`: the sum lands in flat_params directly, where
/// the per-parameter path (autograd into each .grad) would have put it.
struct flat_cast_function : torch::autograd::Function<flat_cast_function> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& /*masters_p*/,
                               const c10::intrusive_ptr<state_capsule>& capsule) {
    // Rationale: a weight the loss never reached (an unused head) gets no zero-filled gradient.
    ctx->set_materialize_grads(false);
    ctx->saved_data["state"] = c10::IValue::make_capsule(capsule);
    const auto& s = *capsule->state;
    return s.masters->views(s.values_p);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto capsule = c10::static_intrusive_pointer_cast<state_capsule>(ctx->saved_data["state"].toCapsule());
    auto& s = *capsule->state;
    std::vector<torch::Tensor> dst, src;
    for (size_t i = 0; i < grads.size(); ++i) {
      if (grads[i].defined()) {
        dst.push_back(s.grad_views[i]);
        src.push_back(grads[i]);
      } else {
        s.grad_views[i].zero_();
      }
    }
    if (!dst.empty()) at::_foreach_copy_(dst, src);
    s.masters->add_grad(s.grad_p);
    return {torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

result<std::shared_ptr<flat_params>> flat_params::create(const policy::tensor_map& params) {
  if (params.empty()) return fail("no parameters");
  auto out = std::make_shared<flat_params>();
  int64_t total = 0;
  // (storage, first byte, end byte, name): two parameters whose bytes overlap share memory.
  std::vector<std::tuple<const void*, int64_t, int64_t, std::string>> spans;
  const torch::Device device = params.begin()->second.device();
  for (const auto& [name, p] : params) {
    if (!p.defined()) return fail("parameter '" + name + "' is undefined");
    if (p.scalar_type() != torch::kFloat32)
      return fail("parameter '" + name + "' is not fp32 (master weights must be fp32)");
    if (!p.is_leaf()) return fail("parameter '" + name + "' is not a leaf tensor");
    if (p.device() != device)
      return fail("parameter '" + name + "' is on " + p.device().str() + ", the others on " + device.str());
    const int64_t first = p.storage_offset() * static_cast<int64_t>(p.element_size());
    spans.emplace_back(p.storage().data(), first, first + static_cast<int64_t>(p.nbytes()), name);
    out->names_.push_back(name);
    out->params_.push_back(p);
    out->offsets_.push_back(total);
    total += p.numel();
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i)
    if (std::get<0>(spans[i]) == std::get<0>(spans[i - 1]) && std::get<1>(spans[i]) < std::get<2>(spans[i - 1]))
      return fail("parameters '" + std::get<3>(spans[i - 1]) + "' and '" + std::get<3>(spans[i]) + "' share memory");
  at::NoGradGuard no_grad;
  const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  out->values_p_ = torch::empty({total}, options);
  out->grad_p_ = torch::empty({total}, options);
  for (size_t i = 0; i < out->params_.size(); ++i) {
    auto& p = out->params_[i];
    out->values_p_.narrow(0, out->offsets_[i], p.numel()).view(p.sizes()).copy_(p);
    // Rationale: set_ changes the tensor object itself, so the decoder's handles (and any
    // copy of them) now read the flat storage; a replaced map entry would leave them behind.
    p.set_(out->values_p_.storage(), out->offsets_[i], p.sizes());
    p.requires_grad_(true);
    if (p.grad().defined()) p.mutable_grad() = torch::Tensor();
  }
  // The compute copies' autograd node hangs off values_p_; its gradient is never stored there.
  out->values_p_.requires_grad_(true);
  return out;
}

std::vector<torch::Tensor> flat_params::views(const torch::Tensor& flat_p) const {
  std::vector<torch::Tensor> out;
  out.reserve(params_.size());
  for (size_t i = 0; i < params_.size(); ++i)
    out.push_back(flat_p.narrow(0, offsets_[i], params_[i].numel()).view(params_[i].sizes()));
  return out;
}

const torch::Tensor& flat_params::grad_p() {
  at::NoGradGuard no_grad;
  if (grad_zero_) {
    grad_p_.zero_();
    grad_zero_ = false;
  }
  std::vector<torch::Tensor> dst, src;
  auto all = views(grad_p_);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
    dst.push_back(all[i]);
    src.push_back(params_[i].grad());
  }
  if (!dst.empty()) {
    at::_foreach_add_(dst, src);
    for (auto& p : params_) p.mutable_grad() = torch::Tensor();
  }
  return grad_p_;
}

void flat_params::add_grad(const torch::Tensor& g_p) {
  at::NoGradGuard no_grad;
  if (grad_zero_) {
    grad_p_.copy_(g_p);  // zeros + g, without reading the stale buffer
    grad_zero_ = false;
  } else {
    grad_p_.add_(g_p);
  }
}

void flat_params::zero_grad() {
  grad_zero_ = true;
  for (auto& p : params_)
    if (p.grad().defined()) p.mutable_grad() = torch::Tensor();
}

std::string flat_params::first_non_finite_grad() {
  const auto& g = grad_p();
  at::NoGradGuard no_grad;
  auto all = views(g);
  for (size_t i = 0; i < all.size(); ++i)
    if (!torch::isfinite(all[i]).all().item<bool>()) return names_[i];
  return {};
}

int64_t flat_params::values_version() const {
  int64_t v = writes_ + static_cast<int64_t>(values_p_._version());
  for (const auto& p : params_) v += static_cast<int64_t>(p._version());
  return v;
}

result<compute_copy> compute_copy::create(const policy::decoder& master, std::shared_ptr<flat_params> flat,
                                          torch::ScalarType dtype) {
  if (dtype != torch::kBFloat16 && dtype != torch::kFloat16)
    return fail("compute copy: the dtype must be bfloat16 or float16");
  if (!flat) return fail("compute copy: no flat parameters");
  const auto& named = master.named_parameters();
  for (const auto& name : flat->names())
    if (!named.count(name)) return fail("compute copy: the model has no parameter '" + name + "'");
  compute_copy out;
  out.master_ = master;
  out.flat_ = flat;
  out.dtype_ = dtype;
  out.state_ = std::make_shared<state>();
  out.state_->masters = flat;
  const auto options = flat->values_p().options().dtype(dtype).requires_grad(false);
  out.state_->values_p = torch::empty({flat->values_p().numel()}, options);
  out.state_->grad_p = torch::empty({flat->values_p().numel()}, options);
  out.state_->grad_views = flat->views(out.state_->grad_p);
  // The template is only ever asked for its RoPE table and layout: parameters outside the flat
  // buffer are zero-stride placeholders of the right shape (no memory), each forward passes its own.
  policy::tensor_map params;
  auto views = flat->views(out.state_->values_p);
  for (size_t i = 0; i < views.size(); ++i) params[flat->names()[i]] = views[i];
  for (const auto& [name, p] : named)
    if (!params.count(name)) params[name] = torch::zeros({}, options).expand(p.sizes());
  auto made = master.with_parameters(params);
  if (!made) return fail("compute copy: " + made.error().message);
  out.template_ = std::move(made.value());
  return out;
}

result<policy::decoder> compute_copy::for_forward() {
  try {
    if (const int64_t v = flat_->values_version(); v != cast_version_) {
      at::NoGradGuard no_grad;
      state_->values_p.copy_(flat_->values_p());
      cast_version_ = v;
    }
    auto outs = flat_cast_function::apply(flat_->values_p(), c10::make_intrusive<state_capsule>(state_));
    policy::tensor_map params;
    for (size_t i = 0; i < outs.size(); ++i) params[flat_->names()[i]] = outs[i];
    for (const auto& [name, p] : master_.named_parameters())
      if (!params.count(name)) params[name] = p.to(dtype_);
    return template_.with_parameters(params);
  } catch (const c10::Error& e) {
    return fail(std::string("compute copy: ") + e.what_without_backtrace());
  }
}

}  // namespace caf_agent::learner
