// The generation engine's overlapped decoding (engine_options::overlap): a decode step launched
// from the tokens the last step drew, still on the device, and those tokens landed on the host
// (stop checks, results, kept prefixes) while the new step runs. step() in engine.cpp chooses
// between it and a plain step. Shape legend: b decode rows (slots 0..b-1), r sampled rows.
#include <ATen/ATen.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <unordered_map>
#include <utility>

#include "policy/model/engine_impl.hpp"
#include "policy/model/host_copy.hpp"
#include "policy/model/sampling.hpp"

namespace caf_agent::policy {

using engine_detail::flight;
using engine_detail::seconds_since;
using engine_detail::sequence;

bool generation_engine::impl::can_overlap() {
  if (!options.overlap) return false;
  {
    std::lock_guard lock(pending_mutex);
    if (pending) return false;
  }
  // Paged: a preemption would requeue a sequence whose token is in flight, so a step that may
  // need one lands the tokens first and runs plainly.
  return !pool || paged_overlap_fits();
}

bool generation_engine::impl::ends_before_decoding(const sequence& seq) const {
  // A pending token that ends its sequence whatever it is: the last one allowed, or one that
  // fills the context (see finished()).
  if (seq.unlanded == 0) return false;
  const auto& r = seq.request;
  const auto drawn = static_cast<int64_t>(seq.out.tokens.size()) + seq.unlanded;
  return drawn >= r.max_new_tokens ||
         (!r.forced_tokens.empty() && drawn >= static_cast<int64_t>(r.forced_tokens.size())) ||
         seq.cached + 1 >= context;
}

torch::Tensor generation_engine::impl::flight_inputs(const std::vector<const sequence*>& rows) {
  const torch::Device device = model.device();
  const int64_t prior = in_flight ? in_flight->tokens_b.size(0) : 0;
  std::unordered_map<uint64_t, int64_t> drawn;  // the flight's row of each sequence it drew for
  if (in_flight)
    for (size_t r = 0; r < in_flight->rows.size(); ++r) drawn[in_flight->rows[r].second] = static_cast<int64_t>(r);
  std::vector<int64_t> host_tokens(rows.size(), 0), pick(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    pick[i] = prior + static_cast<int64_t>(i);
    const sequence* seq = rows[i];
    if (!seq) continue;
    if (seq->unlanded == 0) {
      host_tokens[i] = seq->out.tokens.back();
      continue;
    }
    // Its pending token: its row in the flight (slot and id, as the flight recorded them).
    auto at = drawn.find(seq->id);
    TORCH_CHECK(at != drawn.end() && in_flight->rows[static_cast<size_t>(at->second)].first == seq->slot,
                "engine: sequence ", seq->id, " has a token in flight that no flight holds");
    pick[i] = at->second;
  }
  auto tokens_b = to_device(host_tokens, device);
  if (prior == 0) return tokens_b;
  return torch::cat({in_flight->tokens_b, tokens_b}).index_select(0, to_device(pick, device));
}

torch::Tensor generation_engine::impl::decode_from_flight(std::vector<sequence*>& rows) {
  if (pool) return decode_paged(rows, /*from_flight=*/true);
  const torch::Device device = model.device();
  // Every running sequence that is not prefilling decodes, in slot order, but one whose pending
  // token surely ends it.
  int64_t span = 0;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (!slots[i] || slots[i]->prefilling || ends_before_decoding(*slots[i])) continue;
    rows.push_back(&*slots[i]);
    span = static_cast<int64_t>(i) + 1;
  }
  if (rows.empty()) return {};
  // Each slot's input (flight_inputs); 0 at the scratch position for a slot that decodes nothing
  // (see decode_running).
  std::vector<const sequence*> inputs(static_cast<size_t>(span), nullptr);
  std::vector<int64_t> positions(static_cast<size_t>(span), context - 1), live;
  int64_t keys = 1;
  for (sequence* seq : rows) {
    const auto i = static_cast<size_t>(seq->slot);
    inputs[i] = seq;
    positions[i] = seq->cached;
    keys = std::max(keys, seq->cached + 1);
    stats.attended_keys += static_cast<uint64_t>(seq->cached + 1);
    live.push_back(seq->slot);
  }
  auto tokens_b = flight_inputs(inputs);
  torch::Tensor logits_bv;
  if (graphs) {
    logits_bv = graphs->decode(tokens_b, positions, keys);
    ++stats.graph_replays;
  } else {
    if (model.cache_attention_mode() == cache_attention::flash) keys = decode_key_bucket(keys, cache.capacity());
    logits_bv = model.decode(tokens_b, to_device(positions, device), keys, cache);
  }
  for (sequence* seq : rows) seq->cached += 1;
  stats.decoded_tokens += live.size();
  ++stats.decode_steps;
  ++stats.overlapped_steps;
  if (static_cast<int64_t>(live.size()) == span) return logits_bv;
  return logits_bv.index_select(0, to_device(live, device));
}

std::vector<generation_result> generation_engine::impl::overlapped_step() {
  const torch::Device device = model.device();
  // Launch: decode from the tokens in flight, admit and prefill as in a plain step (slots that
  // sequences ending in flight hold are taken from the next step on), sample. Then land the
  // last flight while this one runs.
  std::vector<sequence*> rows;
  auto decoded_bv = decode_from_flight(rows);
  auto admitted_bv = admit(rows);
  std::optional<flight> launched;
  if (!rows.empty()) {
    torch::Tensor logits_rv = !decoded_bv.defined()    ? admitted_bv
                              : !admitted_bv.defined() ? decoded_bv
                                                       : torch::cat({decoded_bv, admitted_bv});
    // Sampling as in sample_and_advance; a forced token is counted past the pending ones.
    std::vector<sampling_params> params;
    std::vector<double> uniforms;
    std::vector<int64_t> forced;
    flight next;
    for (sequence* seq : rows) {
      params.push_back(seq->request.sampling);
      uniforms.push_back(std::uniform_real_distribution<double>(0.0, 1.0)(seq->rng));
      const auto& f = seq->request.forced_tokens;
      const auto at = seq->out.tokens.size() + static_cast<size_t>(seq->unlanded);
      forced.push_back(at < f.size() ? f[at] : -1);
      seq->unlanded += 1;
      next.rows.emplace_back(seq->slot, seq->id);
    }
    auto drawn = sample_tokens(logits_rv, params, uniforms, forced, options.fused_kernels);
    next.tokens_b = drawn.tokens_b;
    auto drawn_nr = host_rows(logits_rv, drawn.tokens_b, drawn.logprobs_b);
    if (device.is_cuda()) {
      // Queued behind this step; land() waits for it while the next step runs.
      next.host_nr = torch::empty(drawn_nr.sizes(), torch::TensorOptions().dtype(torch::kFloat32).pinned_memory(true));
      next.host_nr.copy_(drawn_nr, /*non_blocking=*/true);
      next.copied.emplace(device.type());
      next.copied->record(c10::impl::VirtualGuardImpl(device.type()).getStream(device));
    } else {
      next.host_nr = drawn_nr.contiguous();
    }
    launched = std::move(next);
  }
  auto previous = std::exchange(in_flight, std::move(launched));
  return previous ? land(std::move(*previous)) : std::vector<generation_result>{};
}

std::vector<generation_result> generation_engine::impl::land(flight f) {
  if (f.copied) {
    const auto waiting_since = std::chrono::steady_clock::now();
    f.copied->synchronize();
    stats.wait_seconds += seconds_since(waiting_since);
  }
  auto host = f.host_nr.accessor<float, 2>();
  std::vector<generation_result> done;
  for (size_t i = 0; i < f.rows.size(); ++i) {
    auto& held = slots[static_cast<size_t>(f.rows[i].first)];
    if (!held || held->id != f.rows[i].second) {  // ended (or was cancelled) after this step was launched
      ++stats.overlap_dropped_rows;
      continue;
    }
    sequence& seq = *held;
    seq.unlanded -= 1;
    append_drawn(seq, host, static_cast<int64_t>(i));
    // Judged as of its own step: a step launched since has counted a key more per pending token.
    const int64_t now = seq.cached;
    seq.cached -= seq.unlanded;
    if (!finished(seq)) {
      seq.cached = now;
      continue;
    }
    keep_prefix(seq);
    done.push_back(std::move(seq.out));
    held.reset();
  }
  return done;
}

}  // namespace caf_agent::policy
