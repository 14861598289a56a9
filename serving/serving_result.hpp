#pragma once
// serving/serving_result.hpp: the value-or-error type of the HTTP server and client. Unlike
// policy::result, an error carries a code, because the server turns it into an HTTP status
// and the client's caller decides from it whether a retry helps.

#include <string>
#include <utility>

#include "policy/text/result.hpp"

namespace caf_agent::serving {

/// What kind of failure; each says whether retrying the same request can help.
enum class errc {
  bad_request,         ///< 400: the request is wrong (names the field); retrying never helps.
  unauthorized,        ///< 401: missing or wrong API key; retrying never helps.
  not_found,           ///< 404: unknown path; retrying never helps.
  method_not_allowed,  ///< 405: the path exists with another method; retrying never helps.
  too_large,           ///< 413: the body is over the server's limit; retrying never helps.
  busy,                ///< 429 / 503: the server is overloaded; retry after a backoff.
  unavailable,         ///< Refused, reset, or the service is stopping; a retry may help.
  timeout,             ///< No answer in time; a retry may help.
  protocol,            ///< Malformed response (bad JSON, missing field); retrying rarely helps.
  internal,            ///< 500: the server failed (e.g. a device error); a retry may help.
};

/// The name of a code ("bad_request", ...).
const char* errc_name(errc code);

/// The HTTP status the server answers a code with (400, 401, 404, 405, 413, 503, 504, 500).
int http_status_of(errc code);

/// The code of an HTTP error status seen by the client (429 and 503 are busy).
errc errc_of_http_status(int status);

/// An expected failure of serving.
struct serving_error {
  /// The kind of failure.
  errc code = errc::internal;
  /// Human-readable text naming what was wrong, e.g. "messages[1].role: expected a string".
  std::string message;
  /// The request field at fault ("messages[1].role"), empty when none; OpenAI's error.param.
  std::string param;
  /// True when retrying the same request may succeed (busy, unavailable, timeout, internal).
  bool retryable() const;
};

/// Shorthand for building an error.
inline serving_error make_serving_error(errc code, std::string message, std::string param = {}) {
  return serving_error{code, std::move(message), std::move(param)};
}

/// Holds either a value of type T or a serving_error.
template <class T>
using result = policy::basic_result<T, serving_error>;

/// A result without a value: success or a serving_error.
using status = policy::basic_status<serving_error>;

}  // namespace caf_agent::serving
