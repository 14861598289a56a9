// policy/text/stop_strings.cpp: see stop_strings.hpp.
#include "policy/text/stop_strings.hpp"

#include <algorithm>
#include <memory>
#include <span>
#include <utility>

namespace caf_agent::policy {

std::function<bool(const std::vector<token_id>&)> watch_stop_strings(tokenizer tok, std::vector<std::string> stops) {
  std::erase_if(stops, [](const std::string& s) { return s.empty(); });
  if (stops.empty()) return {};
  size_t longest = 0;
  for (const auto& s : stops) longest = std::max(longest, s.size());
  struct scan {
    std::string tail;     // the last bytes decoded: at most longest - 1 kept between calls
    size_t consumed = 0;  // tokens decoded so far
  };
  auto state = std::make_shared<scan>();
  return [tok = std::move(tok), stops = std::move(stops), longest, state](const std::vector<token_id>& generated) {
    if (generated.size() < state->consumed) *state = scan{};  // a new list: start over
    if (generated.size() == state->consumed) return false;
    // Byte-level decoding is per token, so the new tokens' bytes follow the kept tail exactly.
    state->tail += tok.decode_bytes(std::span(generated).subspan(state->consumed));
    state->consumed = generated.size();
    const bool hit = std::any_of(stops.begin(), stops.end(),
                                 [&](const std::string& s) { return state->tail.find(s) != std::string::npos; });
    // Rationale: a match not found by now must end in bytes yet to come, so it starts in the
    // last longest - 1 bytes at the earliest; the rest is never searched again.
    if (state->tail.size() >= longest) state->tail.erase(0, state->tail.size() - (longest - 1));
    return hit;
  };
}

}  // namespace caf_agent::policy
