#pragma once
/// runtime/tls.hpp: mutual TLS between nodes ([cluster] tls_cert, tls_key, tls_ca).
///
/// With the three keys set, every node loads CAF's OpenSSL module: the coordinator accepts
/// and members connect only over TLS, both sides present a certificate and verify the other's
/// against the cluster CA (CAF sets SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT). A peer
/// without a certificate of that CA is dropped in the TLS handshake, before a byte of BASP is
/// read. Without them, traffic is plaintext, which is allowed on loopback only.

#include <string>

#include "runtime/config.hpp"

namespace caf_agent::runtime {

/// True when [cluster] turns on TLS (tls_cert, tls_key and tls_ca are set).
bool tls_enabled(const cluster_config& c);

/// Checks this node's TLS files before CAF sees them (CAF's OpenSSL module throws from its
/// I/O thread on a file it cannot load): the CA file, the certificate chain, the key, that the
/// key belongs to the certificate, and that the certificate verifies against the CA now (not
/// expired, signed by it). Returns "" or one line naming the key and what is wrong.
std::string check_tls_files(const cluster_config& c);

/// True for a loopback host: "localhost", 127.0.0.0/8, "::1".
bool is_loopback_host(const std::string& host);

/// "" when plaintext to/from `host` is allowed (TLS is on, or `host` is loopback); else the
/// error for `what` (e.g. "listen_host '10.0.0.1'").
std::string plaintext_refusal(const cluster_config& c, const std::string& host, const std::string& what);

}  // namespace caf_agent::runtime
