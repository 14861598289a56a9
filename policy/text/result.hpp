#pragma once
// A small value-or-error type for the text side of the policy. Bad input from
// files, users or the agent is an expected failure and travels as a value.

#include <string>
#include <utility>
#include <variant>

namespace caf_agent::policy {

/// An expected failure: a human-readable message naming what was wrong.
/// Retrying never helps; the input has to change.
struct text_error {
  /// What went wrong, e.g. "tokenizer.json: model.type: unsupported 'WordPiece'".
  std::string message;
};

/// Holds either a value of type T or an error of type E (E must differ from T).
/// policy:: uses E = text_error; serving/ uses its own error with a code.
template <class T, class E>
class basic_result {
 public:
  /// Wraps a value.
  basic_result(T value) : data_(std::move(value)) {}
  /// Wraps an error.
  basic_result(E err) : data_(std::move(err)) {}

  /// True when a value is held.
  bool ok() const noexcept { return data_.index() == 0; }
  /// True when a value is held.
  explicit operator bool() const noexcept { return ok(); }

  /// The value; only valid when ok().
  T& value() & { return std::get<0>(data_); }
  /// The value; only valid when ok().
  const T& value() const& { return std::get<0>(data_); }
  /// The value, moved out; only valid when ok().
  T&& value() && { return std::get<0>(std::move(data_)); }
  /// The value; only valid when ok().
  T& operator*() & { return value(); }
  /// The value; only valid when ok().
  const T& operator*() const& { return value(); }
  /// Member access to the value; only valid when ok().
  T* operator->() { return &value(); }
  /// Member access to the value; only valid when ok().
  const T* operator->() const { return &value(); }

  /// The error; only valid when !ok().
  const E& error() const { return std::get<1>(data_); }

 private:
  std::variant<T, E> data_;
};

/// A result without a value: success or an error of type E.
template <class E>
class basic_status {
 public:
  /// Success.
  basic_status() = default;
  /// Failure.
  basic_status(E err) : err_(std::move(err)), ok_(false) {}
  /// True on success.
  bool ok() const noexcept { return ok_; }
  /// True on success.
  explicit operator bool() const noexcept { return ok_; }
  /// The error; only meaningful when !ok().
  const E& error() const { return err_; }

 private:
  E err_;
  bool ok_ = true;
};

/// Holds either a value of type T or a text_error.
template <class T>
using result = basic_result<T, text_error>;

/// A result without a value: success or a text_error.
using status = basic_status<text_error>;

/// Shorthand for building an error value.
inline text_error make_error(std::string message) {
  return text_error{std::move(message)};
}

}  // namespace caf_agent::policy
