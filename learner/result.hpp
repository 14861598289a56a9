#pragma once
// learner/ reports expected failures (empty or all-masked batches, shape mismatches, a peer that
// died mid all-reduce) with the value-or-error type policy/ already has (policy/text/result.hpp).

#include <string>

#include "policy/text/result.hpp"

namespace caf_agent::learner {

/// A value of type T or an error naming what was wrong.
template <class T>
using result = policy::result<T>;

/// Success or an error naming what was wrong.
using status = policy::status;

/// An expected failure of the learner: a message naming the input or peer at fault.
using error = policy::text_error;

/// Shorthand for building an error value.
inline error fail(std::string message) {
  return error{std::move(message)};
}

}  // namespace caf_agent::learner
