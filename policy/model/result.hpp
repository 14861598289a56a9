#pragma once
// policy/model reports expected failures (missing or corrupt checkpoints, bad requests) with the
// value-or-error type policy/ already has (policy/text/result.hpp): result<T> and status. One
// type for the whole policy/ folder, so the two never clash in one namespace.

#include <string>

#include "policy/text/result.hpp"

namespace caf_agent::policy {

/// Shorthand for a failure of the model side; retrying never helps (bad file or request).
inline text_error fail(std::string message) {
  return text_error{std::move(message)};
}

}  // namespace caf_agent::policy
