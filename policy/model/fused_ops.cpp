// Shape legend: see fused_ops.hpp.
#include "policy/model/fused_ops.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>

#include "policy/model/host_copy.hpp"

#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "policy/model/boundary_kernels.hpp"
#include "policy/model/fp8_kernels.hpp"
#include "policy/model/fused_kernels.hpp"
#endif

namespace caf_agent::policy {
namespace {

#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
bool element_of(torch::ScalarType type, kernels::element& out) {
  switch (type) {
    case torch::kBFloat16:
      out = kernels::element::bf16;
      return true;
    case torch::kHalf:
      out = kernels::element::fp16;
      return true;
    case torch::kFloat32:
      out = kernels::element::fp32;
      return true;
    default:
      return false;
  }
}

void check_launch(int error, const char* op) {
  TORCH_CHECK(error == 0, "fused_ops: launching ", op, " failed (CUDA error ", error, ")");
}

void* current_stream(const torch::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}
#endif

/// The kernels apply: built, CUDA, a supported dtype shared by all, contiguous, no autograd (the
/// kernels have no backward; training runs the composites).
bool applies(std::initializer_list<const torch::Tensor*> tensors) {
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  const auto& first = **tensors.begin();
  kernels::element e = kernels::element::fp32;
  if (!first.is_cuda() || !element_of(first.scalar_type(), e)) return false;
  for (const auto* t : tensors)
    if (!t->defined() || !t->is_cuda() || t->device() != first.device() || t->scalar_type() != first.scalar_type() ||
        !t->is_contiguous() || t->requires_grad())
      return false;
  return true;
#else
  (void)tensors;
  return false;
#endif
}

}  // namespace

bool fused_kernels_built() {
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  return true;
#else
  return false;
#endif
}

std::pair<torch::Tensor, torch::Tensor> add_rms_norm(const torch::Tensor& residual_xd, const torch::Tensor& delta_xd,
                                                     const torch::Tensor& weight_d, double eps, bool fused) {
  const bool has_delta = delta_xd.defined();
  const bool fits = has_delta ? applies({&residual_xd, &delta_xd, &weight_d}) && delta_xd.sizes() == residual_xd.sizes()
                              : applies({&residual_xd, &weight_d});
  if (!fused || !fits || weight_d.dim() != 1 || weight_d.size(0) != residual_xd.size(-1)) {
    auto sum_xd = has_delta ? residual_xd + delta_xd : residual_xd;
    return {sum_xd, rms_norm(sum_xd, weight_d, eps)};
  }
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  const c10::cuda::CUDAGuard guard(residual_xd.device());
  kernels::element e = kernels::element::fp32;
  element_of(residual_xd.scalar_type(), e);
  const int64_t d = residual_xd.size(-1), x = d == 0 ? 0 : residual_xd.numel() / d;
  auto sum_xd = has_delta ? torch::empty_like(residual_xd) : residual_xd;
  auto normed_xd = torch::empty_like(residual_xd);
  check_launch(kernels::add_rms_norm(e, residual_xd.data_ptr(), has_delta ? delta_xd.data_ptr() : nullptr,
                                     weight_d.data_ptr(), has_delta ? sum_xd.data_ptr() : nullptr, normed_xd.data_ptr(),
                                     x, d, static_cast<float>(eps), current_stream(residual_xd)),
               "add_rms_norm");
  return {sum_xd, normed_xd};
#else
  TORCH_CHECK(false, "fused_ops: unreachable without kernels");
#endif
}

torch::Tensor silu_mul(const torch::Tensor& gate_up_x2f, bool fused) {
  const int64_t f = gate_up_x2f.size(-1) / 2;
  if (!fused || !applies({&gate_up_x2f}) || gate_up_x2f.size(-1) % 2 != 0)
    return torch::silu(gate_up_x2f.narrow(-1, 0, f)) * gate_up_x2f.narrow(-1, f, f);
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  const c10::cuda::CUDAGuard guard(gate_up_x2f.device());
  kernels::element e = kernels::element::fp32;
  element_of(gate_up_x2f.scalar_type(), e);
  auto sizes = gate_up_x2f.sizes().vec();
  sizes.back() = f;
  auto out = torch::empty(sizes, gate_up_x2f.options());
  const int64_t x = f == 0 ? 0 : out.numel() / f;
  check_launch(kernels::silu_mul(e, gate_up_x2f.data_ptr(), out.data_ptr(), x, f, current_stream(gate_up_x2f)),
               "silu_mul");
  return out;
#else
  TORCH_CHECK(false, "fused_ops: unreachable without kernels");
#endif
}

namespace {

/// rope_kv_decode_fuses' conditions for b rows of heads of e entries in `like`'s dtype, on its device.
bool rope_kv_fits(const torch::Tensor& like, int64_t b, int64_t e, const torch::Tensor& k_cache_nkce,
                  const torch::Tensor& v_cache_nkce, const rope_table& table, bool paged) {
  // An e4m3 cache takes the model's bf16 or fp16 keys rounded (the kernel's to_cache).
  const bool fp8 = k_cache_nkce.defined() && k_cache_nkce.scalar_type() == torch::kFloat8_e4m3fn;
  const auto cache_fits = [&] {
    return fp8 ? v_cache_nkce.scalar_type() == k_cache_nkce.scalar_type() && k_cache_nkce.is_cuda() &&
                     k_cache_nkce.device() == like.device() && v_cache_nkce.device() == like.device() &&
                     k_cache_nkce.is_contiguous() && v_cache_nkce.is_contiguous() &&
                     like.scalar_type() != torch::kFloat32 && applies({&like, &table.cos_pe, &table.sin_pe})
               : applies({&like, &k_cache_nkce, &v_cache_nkce, &table.cos_pe, &table.sin_pe});
  };
  return like.defined() && cache_fits() && k_cache_nkce.dim() == 4 && k_cache_nkce.sizes() == v_cache_nkce.sizes() &&
         e == k_cache_nkce.size(3) && table.cos_pe.size(1) == e && (paged || b <= k_cache_nkce.size(0)) && e % 2 == 0;
}

}  // namespace

bool rope_kv_decode_fuses(const torch::Tensor& qkv_bne, const torch::Tensor& k_cache_nkce,
                          const torch::Tensor& v_cache_nkce, const rope_table& table, bool paged) {
  return qkv_bne.defined() && qkv_bne.dim() == 3 &&
         rope_kv_fits(qkv_bne, qkv_bne.size(0), qkv_bne.size(2), k_cache_nkce, v_cache_nkce, table, paged);
}

torch::Tensor rope_kv_decode(const torch::Tensor& qkv_bne, const torch::Tensor& positions_b, const rope_table& table,
                             torch::Tensor& k_cache_nkce, torch::Tensor& v_cache_nkce, int64_t h,
                             const torch::Tensor& rows_b) {
  const bool paged = rows_b.defined();
  TORCH_CHECK(rope_kv_decode_fuses(qkv_bne, k_cache_nkce, v_cache_nkce, table, paged),
              "rope_kv_decode: needs the CUDA kernels and contiguous CUDA tensors of one dtype");
  // Slots [n, k, c, e]; paged [k, blocks, block size, e] (a KV head's rows blocks x block size).
  const int64_t b = qkv_bne.size(0), e = qkv_bne.size(2), k = k_cache_nkce.size(paged ? 0 : 1);
  const int64_t c = paged ? k_cache_nkce.size(1) * k_cache_nkce.size(2) : k_cache_nkce.size(2);
  TORCH_CHECK(qkv_bne.size(1) == h + 2 * k, "rope_kv_decode: qkv has ", qkv_bne.size(1), " heads, expected ", h,
              " + 2 x ", k);
  const auto contiguous_int64 = [&](const torch::Tensor& t) {
    return t.scalar_type() == torch::kInt64 && t.is_contiguous() && t.numel() == b && t.device() == qkv_bne.device();
  };
  TORCH_CHECK(contiguous_int64(positions_b), "rope_kv_decode: positions must be ", b,
              " contiguous int64 on the device");
  TORCH_CHECK(!paged || contiguous_int64(rows_b), "rope_kv_decode: rows must be ", b,
              " contiguous int64 on the device");
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  const c10::cuda::CUDAGuard guard(qkv_bne.device());
  kernels::element el = kernels::element::fp32;
  element_of(qkv_bne.scalar_type(), el);
  auto q_bhe = torch::empty({b, h, e}, qkv_bne.options());
  check_launch(kernels::rope_kv_decode(el, qkv_bne.data_ptr(), positions_b.data_ptr<int64_t>(),
                                       paged ? rows_b.data_ptr<int64_t>() : nullptr, table.cos_pe.data_ptr(),
                                       table.sin_pe.data_ptr(), q_bhe.data_ptr(), k_cache_nkce.data_ptr(),
                                       v_cache_nkce.data_ptr(), b, h, k, e, c,
                                       k_cache_nkce.scalar_type() == torch::kFloat8_e4m3fn, current_stream(qkv_bne)),
               "rope_kv_decode");
  return q_bhe;
#else
  TORCH_CHECK(false, "fused_ops: unreachable without kernels");
#endif
}

torch::Tensor merge_shares(const torch::Tensor& out_xge, const torch::Tensor& lse_gx, const torch::Tensor& used_x,
                           int64_t shares, bool fused, bool share_major) {
  TORCH_CHECK(shares >= 1 && out_xge.dim() == 3 && out_xge.size(0) % shares == 0 && lse_gx.dim() == 2 &&
                  lse_gx.size(0) == out_xge.size(1) && lse_gx.size(1) == out_xge.size(0) && used_x.dim() == 1 &&
                  used_x.size(0) == out_xge.size(0) && lse_gx.scalar_type() == torch::kFloat32,
              "merge_shares: out ", out_xge.sizes(), " (x = y * ", shares, " shares, g, e), fp32 lse ", lse_gx.sizes(),
              " (g, x) and used ", used_x.sizes(), " (x) disagree");
  const int64_t x = out_xge.size(0), g = out_xge.size(1), e = out_xge.size(2), y = x / shares;
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  kernels::element el = kernels::element::fp32;
  if (fused && applies({&out_xge}) && out_xge.device() == lse_gx.device() && lse_gx.is_contiguous() &&
      used_x.device() == out_xge.device() && used_x.scalar_type() == torch::kInt32 && used_x.is_contiguous() &&
      element_of(out_xge.scalar_type(), el)) {
    const c10::cuda::CUDAGuard guard(out_xge.device());
    auto merged = torch::empty({y, g, e}, out_xge.options());
    check_launch(kernels::merge_shares(el, out_xge.data_ptr(), lse_gx.data_ptr<float>(), used_x.data_ptr<int32_t>(),
                                       merged.data_ptr(), y, shares, g, e, share_major, current_stream(out_xge)),
                 "merge_shares");
    return merged;
  }
#else
  (void)fused;
#endif
  // [x, ...] as [y, S, ...]: share-major x is [S, y, ...], transposed.
  const auto rows_shares = [&](const torch::Tensor& t_x) {
    auto sizes = t_x.sizes().vec();
    sizes.erase(sizes.begin());
    std::vector<int64_t> split{share_major ? shares : y, share_major ? y : shares};
    split.insert(split.end(), sizes.begin(), sizes.end());
    auto t = t_x.reshape(split);
    return share_major ? t.transpose(0, 1) : t;
  };
  // A share of no keys is left out: its weight 0 and its output (whatever flash left there) 0.
  auto empty_ys11 = (rows_shares(used_x).reshape({y, shares, 1, 1}) <= 0);
  auto lse_ysg = rows_shares(lse_gx.t()).masked_fill(empty_ys11.squeeze(-1), -std::numeric_limits<float>::infinity());
  auto w_ysg1 = torch::softmax(lse_ysg, 1).unsqueeze(-1);
  auto out_ysge = rows_shares(out_xge).to(torch::kFloat32).masked_fill(empty_ys11, 0.0);
  return (w_ysg1 * out_ysge).sum(1).to(out_xge.scalar_type());
}

void set_programmatic_launch(bool on) {
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  kernels::set_programmatic_launch(on);
#else
  (void)on;
#endif
}

int64_t cuda_multiprocessors() {
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  return kernels::multiprocessor_count();
#else
  return 0;
#endif
}

boundary_timing time_boundary_chain(const std::string& mode, int64_t bytes_per_phase, int64_t phases, int64_t blocks,
                                    int64_t calls, const torch::Device& device) {
  // Bad arguments as one line naming the argument (std::invalid_argument, not TORCH_CHECK's trace).
  const auto require = [](bool ok, const std::string& message) {
    if (!ok) throw std::invalid_argument("boundary-chain: " + message);
  };
  require(mode == "kernels" || mode == "flags", "--mode must be kernels or flags, not '" + mode + "'");
  require(device.is_cuda(), "--device must be cuda, not " + device.str());
  require(phases >= 1 && phases <= 4096, "--phases must be 1..4096, not " + std::to_string(phases));
  require(calls >= 1, "--time must be >= 1, not " + std::to_string(calls));
  require(bytes_per_phase >= 16 && bytes_per_phase % 16 == 0,
          "--bytes must be a positive multiple of 16, not " + std::to_string(bytes_per_phase));
  require(blocks >= 0 && blocks <= std::numeric_limits<int>::max(),
          "--blocks must be >= 0, not " + std::to_string(blocks));
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  c10::cuda::CUDAGuard guard(device);
  const auto m = mode == "flags" ? kernels::boundary_mode::flags : kernels::boundary_mode::kernels;
  const int64_t resident = kernels::boundary_resident_blocks(m);
  require(resident > 0, "the device's occupancy for the chain's kernel cannot be read");
  if (blocks == 0) blocks = resident;
  require(m != kernels::boundary_mode::flags || blocks <= resident,
          "--mode flags takes at most " + std::to_string(resident) + " blocks (all resident at once), not " +
              std::to_string(blocks));
  require(bytes_per_phase >= 16 * blocks, "--bytes must give each of the " + std::to_string(blocks) +
                                              " blocks 16 bytes at least, not " + std::to_string(bytes_per_phase));
  const auto opts = torch::TensorOptions().device(device);
  torch::manual_seed(0);  // the same bytes for every call: both modes' sums comparable
  auto data = torch::randint(0, 256, {phases * bytes_per_phase}, opts.dtype(torch::kUInt8));
  auto sums = torch::zeros({phases * blocks}, opts.dtype(torch::kFloat32));
  auto counters = torch::zeros({phases}, opts.dtype(torch::kInt32));
  c10::cuda::getCurrentCUDAStream(device.index()).synchronize();  // the inputs made before the chain's stream runs
  double us = 0;
  check_launch(kernels::time_boundary_chain(m, data.data_ptr(), bytes_per_phase, static_cast<int>(phases),
                                            static_cast<int>(blocks), sums.data_ptr<float>(),
                                            reinterpret_cast<unsigned*>(counters.data_ptr<int32_t>()),
                                            static_cast<int>(calls), &us),
               "the boundary chain");
  const double last = sums.narrow(0, (phases - 1) * blocks, blocks).to(torch::kFloat64).sum().item<double>();
  return {us, blocks, resident, last};
#else
  throw std::invalid_argument(
      "boundary-chain: this build has no CUDA kernels (policy/model's fused kernels are not built)");
#endif
}

bool fp8_decode_attention_fuses(const torch::Tensor& k_cache, torch::ScalarType q_dtype, int64_t h, bool paged) {
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  if (!k_cache.defined() || !k_cache.is_cuda() || k_cache.dim() != 4 ||
      k_cache.scalar_type() != torch::kFloat8_e4m3fn || !k_cache.is_contiguous() ||
      (q_dtype != torch::kBFloat16 && q_dtype != torch::kHalf))
    return false;
  const int64_t k = k_cache.size(paged ? 0 : 1), c = k_cache.size(2), e = k_cache.size(3);
  return h > 0 && h % k == 0 && kernels::fp8_attention_supports(h / k, e) && (!paged || c % 16 == 0);
#else
  (void)k_cache, (void)q_dtype, (void)h, (void)paged;
  return false;
#endif
}

torch::Tensor fp8_decode_attention(const torch::Tensor& q_bhe, const torch::Tensor& k_cache,
                                   const torch::Tensor& v_cache, const torch::Tensor& positions_b, int64_t keys,
                                   const torch::Tensor& tables_bm) {
  const bool paged = tables_bm.defined();
  TORCH_CHECK(q_bhe.dim() == 3 && fp8_decode_attention_fuses(k_cache, q_bhe.scalar_type(), q_bhe.size(1), paged),
              "fp8_decode_attention: the kernel does not take q ", q_bhe.sizes(), " (", q_bhe.scalar_type(),
              ") over a cache ", k_cache.sizes(), " (", k_cache.scalar_type(),
              ") here (needs the CUDA kernels, an e4m3 cache, bf16 or fp16 q, g <= 8, head size 64 or 128, "
              "paged blocks of a multiple of 16)");
  const int64_t b = q_bhe.size(0), h = q_bhe.size(1), e = q_bhe.size(2);
  const int64_t k = k_cache.size(paged ? 0 : 1), c = k_cache.size(2), g = h / k;
  const int64_t blocks = paged ? k_cache.size(1) : 0, m = paged ? tables_bm.size(1) : 0;
  const auto on_device = [&](const torch::Tensor& t) { return t.device() == q_bhe.device(); };
  TORCH_CHECK(e == k_cache.size(3) && v_cache.sizes() == k_cache.sizes() &&
                  v_cache.scalar_type() == k_cache.scalar_type() && v_cache.is_contiguous() && on_device(k_cache) &&
                  on_device(v_cache) && positions_b.dim() == 1 && positions_b.size(0) == b &&
                  positions_b.scalar_type() == torch::kInt64 && on_device(positions_b) && keys >= 1 &&
                  (paged ? keys <= m * c : b <= k_cache.size(0) && keys <= c),
              "fp8_decode_attention: q ", q_bhe.sizes(), ", caches ", k_cache.sizes(), " / ", v_cache.sizes(),
              ", positions ", positions_b.sizes(), " (int64) and ", keys, " keys disagree");
  TORCH_CHECK(!paged || (tables_bm.dim() == 2 && tables_bm.size(0) == b && tables_bm.scalar_type() == torch::kInt64 &&
                         on_device(tables_bm)),
              "fp8_decode_attention: block tables ", tables_bm.sizes(), " must be int64 [", b, ", m] on the device");
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  kernels::element el = kernels::element::fp32;
  element_of(q_bhe.scalar_type(), el);
  const c10::cuda::CUDAGuard guard(q_bhe.device());
  const auto q = q_bhe.contiguous();
  const auto positions = positions_b.contiguous();
  const auto tables = paged ? tables_bm.contiguous() : tables_bm;
  const int64_t splits = kernels::fp8_attention_splits(b * k, paged ? m * c : c, e, current_stream(q));
  auto out = torch::empty({b, h, e}, q.options());
  auto part_o = torch::empty({b * k * splits * g * e}, q.options().dtype(torch::kFloat32));
  auto part_lse = torch::empty({b * k * splits * g}, q.options().dtype(torch::kFloat32));
  check_launch(kernels::fp8_decode_attention(
                   el, q.data_ptr(), static_cast<const uint8_t*>(k_cache.data_ptr()),
                   static_cast<const uint8_t*>(v_cache.data_ptr()), positions.data_ptr<int64_t>(),
                   paged ? tables.data_ptr<int64_t>() : nullptr, out.data_ptr(), part_o.data_ptr<float>(),
                   part_lse.data_ptr<float>(), b, k, g, e, c, blocks, m, splits, current_stream(q)),
               "fp8_decode_attention");
  return out;
#else
  (void)c, (void)g, (void)blocks, (void)m;
  TORCH_CHECK(false, "fused_ops: unreachable without kernels");
#endif
}

#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
namespace {

/// The rows' count of x [.., d] for a kernel of linear_rows: x, w [n, d] and bias [n] (if defined)
/// on which the kernels apply, x and w 16-byte aligned, d a whole number of 16-byte vectors; -1
/// where they do not.
int64_t linear_kernel_rows(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias) {
  if (!x.defined() || !w.defined() || x.dim() < 1 || w.dim() != 2) return -1;
  const int64_t d = x.size(-1);
  if (w.size(1) != d || d < 1) return -1;
  if (!(bias.defined() ? applies({&x, &w, &bias}) : applies({&x, &w}))) return -1;
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != w.size(0))) return -1;
  const int64_t per_vec = 16 / static_cast<int64_t>(x.element_size());
  const auto aligned = [](const torch::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; };
  return d % per_vec == 0 && aligned(x) && aligned(w) ? x.numel() / d : -1;
}

}  // namespace
#endif

bool linear_rows_fuses(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias, int64_t max_rows) {
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  if (max_rows < 1) return false;
  const int64_t b = linear_kernel_rows(x, w, bias);
  return b >= 0 && b <= std::min(max_rows, kernels::gemv_max_rows);
#else
  (void)x, (void)w, (void)bias, (void)max_rows;
  return false;
#endif
}

bool linear_mma_fuses(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias, int64_t max_rows,
                      int64_t mma_rows) {
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  if (mma_rows < 1 || linear_rows_fuses(x, w, bias, max_rows)) return false;
  const int64_t b = linear_kernel_rows(x, w, bias);
  if (b < 0 || b > std::min(mma_rows, kernels::mma_max_rows)) return false;
  kernels::element el = kernels::element::fp32;
  element_of(x.scalar_type(), el);
  return kernels::mma_rows_fits(el, b, w.size(0), x.size(-1), false);
#else
  (void)x, (void)w, (void)bias, (void)max_rows, (void)mma_rows;
  return false;
#endif
}

void prepare_linear_mma() {
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  if (c10::cuda::device_count() < 1) return;
  check_launch(kernels::mma_rows_prepare(), "mma_rows_prepare");
#endif
}

void set_linear_mma_max_shares(int shares) {
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  kernels::set_mma_max_shares(shares);
#else
  (void)shares;
#endif
}

bool set_linear_mma_launch(int feature_warps, int shares) {
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  return kernels::set_mma_launch(feature_warps, shares) == 0;
#else
  (void)feature_warps, (void)shares;
  return false;
#endif
}

std::optional<kernels::mma_plan> linear_mma_plan(const torch::Tensor& x, const torch::Tensor& w, bool silu_mul) {
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  if (!x.is_cuda() || x.dim() < 1 || w.dim() != 2) return std::nullopt;
  kernels::element el = kernels::element::fp32;
  if (!element_of(x.scalar_type(), el)) return std::nullopt;
  const int64_t d = x.size(-1), b = d > 0 ? x.numel() / d : 0;
  if (!kernels::mma_rows_fits(el, b, w.size(0), d, silu_mul)) return std::nullopt;
  const c10::cuda::CUDAGuard guard(x.device());
  const auto plan = kernels::mma_rows_plan(el, b, w.size(0), d, silu_mul);
  check_launch(plan.err, "mma_rows_plan");
  return plan;
#else
  (void)x, (void)w, (void)silu_mul;
  return std::nullopt;
#endif
}

#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
namespace {

/// kernels::gemv_rows (or, with `mma`, kernels::mma_rows) on tensors linear_rows_fuses (or
/// linear_mma_fuses) takes: [.., n], or with `silu_mul` [.., n / 2].
torch::Tensor gemv(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias, bool silu_mul,
                   bool mma = false) {
  const int64_t d = x.size(-1), n = w.size(0), b = x.numel() / d;
  kernels::element el = kernels::element::fp32;
  element_of(x.scalar_type(), el);
  const c10::cuda::CUDAGuard guard(x.device());
  auto sizes = x.sizes().vec();
  sizes.back() = silu_mul ? n / 2 : n;
  auto y = torch::empty(sizes, x.options());
  const void* bias_n = bias.defined() ? bias.data_ptr() : nullptr;
  if (mma)
    check_launch(
        kernels::mma_rows(el, x.data_ptr(), w.data_ptr(), bias_n, y.data_ptr(), b, n, d, silu_mul, current_stream(x)),
        "mma_rows");
  else
    check_launch(
        kernels::gemv_rows(el, x.data_ptr(), w.data_ptr(), bias_n, y.data_ptr(), b, n, d, silu_mul, current_stream(x)),
        "gemv_rows");
  return y;
}

}  // namespace
#endif

torch::Tensor linear_rows(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias, int64_t max_rows,
                          int64_t mma_rows) {
  const bool gemv_runs = linear_rows_fuses(x, w, bias, max_rows);
  const bool mma_runs = !gemv_runs && linear_mma_fuses(x, w, bias, max_rows, mma_rows);
  if (!gemv_runs && !mma_runs) return torch::linear(x, w, bias);
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  return gemv(x, w, bias, /*silu_mul=*/false, mma_runs);
#else
  TORCH_CHECK(false, "fused_ops: unreachable without kernels");
#endif
}

torch::Tensor linear_silu_mul(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias,
                              int64_t max_rows, bool fused, int64_t mma_rows) {
  const bool gemv_runs = linear_rows_fuses(x, w, bias, max_rows);
  const bool mma_runs = !gemv_runs && linear_mma_fuses(x, w, bias, max_rows, mma_rows);
  if (!fused || (!gemv_runs && !mma_runs) || w.size(0) % 2 != 0)
    return silu_mul(linear_rows(x, w, bias, max_rows, mma_rows), fused);
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  return gemv(x, w, bias, /*silu_mul=*/true, mma_runs);
#else
  TORCH_CHECK(false, "fused_ops: unreachable without kernels");
#endif
}

bool add_rms_norm_linear_fuses(const torch::Tensor& residual_xd, const torch::Tensor& delta_xd,
                               const torch::Tensor& norm_d, const torch::Tensor& w, const torch::Tensor& bias,
                               int64_t max_rows) {
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  const bool has_delta = delta_xd.defined();
  // linear_rows_fuses(residual, ..) holds exactly when it would for the normed rows (same shape,
  // dtype and device, fresh and so aligned).
  if (!linear_rows_fuses(residual_xd, w, bias, max_rows) ||
      !(has_delta ? applies({&residual_xd, &delta_xd, &norm_d}) && delta_xd.sizes() == residual_xd.sizes()
                  : applies({&residual_xd, &norm_d})) ||
      norm_d.dim() != 1 || norm_d.size(0) != residual_xd.size(-1))
    return false;
  const auto aligned = [](const torch::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; };
  kernels::element el = kernels::element::fp32;
  element_of(residual_xd.scalar_type(), el);
  const int64_t d = residual_xd.size(-1);
  return aligned(norm_d) && (!has_delta || aligned(delta_xd)) && kernels::gemv_stages(el, residual_xd.numel() / d, d);
#else
  (void)residual_xd, (void)delta_xd, (void)norm_d, (void)w, (void)bias, (void)max_rows;
  return false;
#endif
}

std::pair<torch::Tensor, torch::Tensor> add_rms_norm_linear(const torch::Tensor& residual_xd,
                                                            const torch::Tensor& delta_xd, const torch::Tensor& norm_d,
                                                            double eps, const torch::Tensor& w,
                                                            const torch::Tensor& bias, int64_t max_rows, bool fused,
                                                            bool silu_mul_after, int64_t mma_rows) {
  if (!fused || !add_rms_norm_linear_fuses(residual_xd, delta_xd, norm_d, w, bias, max_rows) ||
      (silu_mul_after && w.size(0) % 2 != 0)) {
    auto [sum_xd, normed_xd] = add_rms_norm(residual_xd, delta_xd, norm_d, eps, fused);
    return {sum_xd, silu_mul_after ? linear_silu_mul(normed_xd, w, bias, max_rows, fused, mma_rows)
                                   : linear_rows(normed_xd, w, bias, max_rows, mma_rows)};
  }
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  const bool has_delta = delta_xd.defined();
  const int64_t d = residual_xd.size(-1), b = residual_xd.numel() / d, n = w.size(0);
  kernels::element el = kernels::element::fp32;
  element_of(residual_xd.scalar_type(), el);
  const c10::cuda::CUDAGuard guard(residual_xd.device());
  auto sum_xd = has_delta ? torch::empty_like(residual_xd) : residual_xd;
  auto sizes = residual_xd.sizes().vec();
  sizes.back() = silu_mul_after ? n / 2 : n;
  auto y = torch::empty(sizes, residual_xd.options());
  check_launch(kernels::add_rms_norm_gemv_rows(el, residual_xd.data_ptr(), has_delta ? delta_xd.data_ptr() : nullptr,
                                               norm_d.data_ptr(), static_cast<float>(eps),
                                               has_delta ? sum_xd.data_ptr() : nullptr, w.data_ptr(),
                                               bias.defined() ? bias.data_ptr() : nullptr, y.data_ptr(), b, n, d,
                                               silu_mul_after, current_stream(residual_xd)),
               "add_rms_norm_gemv_rows");
  return {sum_xd, y};
#else
  TORCH_CHECK(false, "fused_ops: unreachable without kernels");
#endif
}

bool add_rms_norm_qkv_rope_kv_fuses(const torch::Tensor& residual_xd, const torch::Tensor& delta_xd,
                                    const torch::Tensor& norm_d, const torch::Tensor& qkv_w, const torch::Tensor& qkv_b,
                                    int64_t max_rows, const torch::Tensor& k_cache_nkce,
                                    const torch::Tensor& v_cache_nkce, const rope_table& table, int64_t h, bool paged) {
  if (!add_rms_norm_linear_fuses(residual_xd, delta_xd, norm_d, qkv_w, qkv_b, max_rows) || !k_cache_nkce.defined() ||
      k_cache_nkce.dim() != 4 || h < 1)
    return false;
  const int64_t b = residual_xd.numel() / residual_xd.size(-1), e = k_cache_nkce.size(3);
  const int64_t k = k_cache_nkce.size(paged ? 0 : 1);
  return qkv_w.size(0) == (h + 2 * k) * e && rope_kv_fits(residual_xd, b, e, k_cache_nkce, v_cache_nkce, table, paged);
}

std::pair<torch::Tensor, torch::Tensor> add_rms_norm_qkv_rope_kv(
    const torch::Tensor& residual_xd, const torch::Tensor& delta_xd, const torch::Tensor& norm_d, double eps,
    const torch::Tensor& qkv_w, const torch::Tensor& qkv_b, int64_t max_rows, const torch::Tensor& positions_b,
    const rope_table& table, torch::Tensor& k_cache_nkce, torch::Tensor& v_cache_nkce, int64_t h,
    const torch::Tensor& rows_b) {
  const bool paged = rows_b.defined();
  TORCH_CHECK(add_rms_norm_qkv_rope_kv_fuses(residual_xd, delta_xd, norm_d, qkv_w, qkv_b, max_rows, k_cache_nkce,
                                             v_cache_nkce, table, h, paged),
              "add_rms_norm_qkv_rope_kv: needs the CUDA kernels, at most ", max_rows,
              " rows and contiguous CUDA tensors of one dtype");
  const int64_t d = residual_xd.size(-1), b = residual_xd.numel() / d, e = k_cache_nkce.size(3);
  const int64_t k = k_cache_nkce.size(paged ? 0 : 1);
  const int64_t c = paged ? k_cache_nkce.size(1) * k_cache_nkce.size(2) : k_cache_nkce.size(2);
  const auto contiguous_int64 = [&](const torch::Tensor& t) {
    return t.scalar_type() == torch::kInt64 && t.is_contiguous() && t.numel() == b &&
           t.device() == residual_xd.device();
  };
  TORCH_CHECK(contiguous_int64(positions_b), "add_rms_norm_qkv_rope_kv: positions must be ", b,
              " contiguous int64 on the device");
  TORCH_CHECK(!paged || contiguous_int64(rows_b), "add_rms_norm_qkv_rope_kv: rows must be ", b,
              " contiguous int64 on the device");
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  const bool has_delta = delta_xd.defined();
  kernels::element el = kernels::element::fp32;
  element_of(residual_xd.scalar_type(), el);
  const c10::cuda::CUDAGuard guard(residual_xd.device());
  auto sum_xd = has_delta ? torch::empty_like(residual_xd) : residual_xd;
  auto q_bhe = torch::empty({b, h, e}, residual_xd.options());
  check_launch(kernels::add_rms_norm_gemv_rope_kv(
                   el, residual_xd.data_ptr(), has_delta ? delta_xd.data_ptr() : nullptr, norm_d.data_ptr(),
                   static_cast<float>(eps), has_delta ? sum_xd.data_ptr() : nullptr, qkv_w.data_ptr(),
                   qkv_b.defined() ? qkv_b.data_ptr() : nullptr, q_bhe.data_ptr(), b, d,
                   positions_b.data_ptr<int64_t>(), paged ? rows_b.data_ptr<int64_t>() : nullptr,
                   table.cos_pe.data_ptr(), table.sin_pe.data_ptr(), k_cache_nkce.data_ptr(), v_cache_nkce.data_ptr(),
                   h, k, e, c, k_cache_nkce.scalar_type() == torch::kFloat8_e4m3fn, current_stream(residual_xd)),
               "add_rms_norm_gemv_rope_kv");
  return {sum_xd, q_bhe};
#else
  TORCH_CHECK(false, "fused_ops: unreachable without kernels");
#endif
}

bool sample_rows_fuses(const torch::Tensor& logits_bv) {
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  const auto dtype = logits_bv.defined() ? logits_bv.scalar_type() : torch::kFloat32;
  return logits_bv.defined() && logits_bv.is_cuda() &&
         (dtype == torch::kFloat32 || dtype == torch::kBFloat16 || dtype == torch::kHalf) && logits_bv.dim() == 2 &&
         logits_bv.size(0) <= 65535 && logits_bv.size(1) > 0 && logits_bv.stride(1) == 1 &&
         (logits_bv.size(0) <= 1 || logits_bv.stride(0) == logits_bv.size(1)) && !logits_bv.requires_grad();
#else
  (void)logits_bv;
  return false;
#endif
}

std::pair<torch::Tensor, torch::Tensor> sample_rows(const torch::Tensor& logits_bv,
                                                    const std::vector<float>& params_4b) {
  TORCH_CHECK(sample_rows_fuses(logits_bv),
              "sample_rows: needs the CUDA kernels and fp32, bf16 or fp16 CUDA logits [b, v]");
  const int64_t b = logits_bv.size(0), v = logits_bv.size(1);
  TORCH_CHECK(static_cast<int64_t>(params_4b.size()) == 4 * b, "sample_rows: ", params_4b.size(), " parameters for ", b,
              " rows (4 per row)");
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  const c10::cuda::CUDAGuard guard(logits_bv.device());
  auto params = to_device(params_4b, torch::kFloat32, logits_bv.device());
  auto tokens_b = torch::empty({b}, logits_bv.options().dtype(torch::kInt64));
  auto logprobs_b = torch::empty({b}, logits_bv.options().dtype(torch::kFloat32));
  auto work = torch::empty({(kernels::sample_rows_work_bytes(b, v) + 7) / 8}, logits_bv.options().dtype(torch::kInt64));
  kernels::element e = kernels::element::fp32;
  element_of(logits_bv.scalar_type(), e);
  check_launch(kernels::sample_rows(e, logits_bv.data_ptr(), params.data_ptr<float>(), tokens_b.data_ptr<int64_t>(),
                                    logprobs_b.data_ptr<float>(), work.data_ptr(), b, v, current_stream(logits_bv)),
               "sample_rows");
  return {tokens_b, logprobs_b};
#else
  TORCH_CHECK(false, "fused_ops: unreachable without kernels");
#endif
}

}  // namespace caf_agent::policy
