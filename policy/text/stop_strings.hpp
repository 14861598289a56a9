#pragma once
// Stop strings over generated tokens: the check a generation engine asks after every appended
// token (policy::stop_predicate in policy/model/generation_types.hpp has this signature).

#include <functional>
#include <string>
#include <vector>

#include "policy/text/tokenizer.hpp"

namespace caf_agent::policy {

/// True once the bytes of `generated` contain one of `stops` (empty strings are ignored). A
/// match may end inside a token's bytes or span several tokens: the check decodes only the
/// tokens it has not seen and searches only where a new match can end, so each call costs the
/// new tokens, not the whole reply. The returned function keeps that state: one per sequence,
/// called with its growing token list (a shorter list than last time starts the scan over).
/// Returns an empty function when no stop string is given.
std::function<bool(const std::vector<token_id>& generated)> watch_stop_strings(tokenizer tok,
                                                                               std::vector<std::string> stops);

}  // namespace caf_agent::policy
