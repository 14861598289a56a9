// serving/serving_result.cpp: see serving_result.hpp.
#include "serving/serving_result.hpp"

namespace caf_agent::serving {

const char* errc_name(errc code) {
  switch (code) {
    case errc::bad_request:
      return "bad_request";
    case errc::unauthorized:
      return "unauthorized";
    case errc::not_found:
      return "not_found";
    case errc::method_not_allowed:
      return "method_not_allowed";
    case errc::too_large:
      return "too_large";
    case errc::busy:
      return "busy";
    case errc::unavailable:
      return "unavailable";
    case errc::timeout:
      return "timeout";
    case errc::protocol:
      return "protocol";
    case errc::internal:
      return "internal";
  }
  return "internal";
}

int http_status_of(errc code) {
  switch (code) {
    case errc::bad_request:
      return 400;
    case errc::unauthorized:
      return 401;
    case errc::not_found:
      return 404;
    case errc::method_not_allowed:
      return 405;
    case errc::too_large:
      return 413;
    case errc::busy:
      return 503;
    case errc::unavailable:
      return 503;
    case errc::timeout:
      return 504;
    case errc::protocol:
      return 502;
    case errc::internal:
      return 500;
  }
  return 500;
}

errc errc_of_http_status(int status) {
  switch (status) {
    case 400:
      return errc::bad_request;
    case 401:
    case 403:
      return errc::unauthorized;
    case 404:
      return errc::not_found;
    case 405:
      return errc::method_not_allowed;
    case 408:
    case 504:
      return errc::timeout;
    case 413:
      return errc::too_large;
    case 429:
    case 503:
      return errc::busy;
    case 502:
      return errc::unavailable;
    default:
      return status >= 500 ? errc::internal : errc::bad_request;
  }
}

bool serving_error::retryable() const {
  return code == errc::busy || code == errc::unavailable || code == errc::timeout || code == errc::internal;
}

}  // namespace caf_agent::serving
