// runtime/tls.cpp: see tls.hpp.
#include "runtime/tls.hpp"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <cstdio>
#include <filesystem>
#include <memory>

namespace caf_agent::runtime {
namespace {

std::string ssl_error() {
  std::string out;
  while (auto e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += (out.empty() ? "" : "; ") + std::string{buf};
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

struct file_closer {
  void operator()(FILE* f) const { std::fclose(f); }
};
using file_ptr = std::unique_ptr<FILE, file_closer>;

std::string readable(const std::string& key, const std::string& path, file_ptr& out) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return "cluster." + key + ": '" + path + "' is not a file";
  out.reset(std::fopen(path.c_str(), "r"));
  if (!out) return "cluster." + key + ": cannot open '" + path + "'";
  return {};
}

}  // namespace

bool tls_enabled(const cluster_config& c) {
  return !c.tls_cert.empty() && !c.tls_key.empty() && !c.tls_ca.empty();
}

std::string check_tls_files(const cluster_config& c) {
  ERR_clear_error();
  file_ptr ca_file, cert_file, key_file;
  for (auto [key, path, file] :
       {std::tuple{"tls_ca", &c.tls_ca, &ca_file}, std::tuple{"tls_cert", &c.tls_cert, &cert_file},
        std::tuple{"tls_key", &c.tls_key, &key_file}})
    if (auto err = readable(key, *path, *file); !err.empty()) return err;
  std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)> store{X509_STORE_new(), X509_STORE_free};
  int cas = 0;
  while (X509* ca = PEM_read_X509(ca_file.get(), nullptr, nullptr, nullptr)) {
    X509_STORE_add_cert(store.get(), ca);
    X509_free(ca);
    ++cas;
  }
  ERR_clear_error();  // the loop ends on "no start line"
  if (cas == 0) return "cluster.tls_ca: '" + c.tls_ca + "' holds no PEM certificate";
  std::unique_ptr<X509, decltype(&X509_free)> cert{PEM_read_X509(cert_file.get(), nullptr, nullptr, nullptr),
                                                   X509_free};
  if (!cert) return "cluster.tls_cert: '" + c.tls_cert + "' holds no PEM certificate (" + ssl_error() + ")";
  std::unique_ptr<STACK_OF(X509), void (*)(STACK_OF(X509)*)> chain{
      sk_X509_new_null(), [](STACK_OF(X509) * s) { sk_X509_pop_free(s, X509_free); }};
  while (X509* extra = PEM_read_X509(cert_file.get(), nullptr, nullptr, nullptr)) sk_X509_push(chain.get(), extra);
  ERR_clear_error();
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> pkey{
      PEM_read_PrivateKey(key_file.get(), nullptr, nullptr, nullptr), EVP_PKEY_free};
  if (!pkey) return "cluster.tls_key: '" + c.tls_key + "' holds no unencrypted PEM private key (" + ssl_error() + ")";
  if (X509_check_private_key(cert.get(), pkey.get()) != 1)
    return "cluster.tls_key: '" + c.tls_key + "' is not the key of cluster.tls_cert '" + c.tls_cert + "'";
  std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> ctx{X509_STORE_CTX_new(), X509_STORE_CTX_free};
  if (!ctx || X509_STORE_CTX_init(ctx.get(), store.get(), cert.get(), chain.get()) != 1)
    return "cluster.tls_cert: cannot set up verification (" + ssl_error() + ")";
  if (X509_verify_cert(ctx.get()) != 1) {
    const int code = X509_STORE_CTX_get_error(ctx.get());
    return "cluster.tls_cert: '" + c.tls_cert + "' does not verify against cluster.tls_ca '" + c.tls_ca +
           "': " + X509_verify_cert_error_string(code) +
           " (every node's certificate must be signed by the cluster CA; see deploy/README.md)";
  }
  return {};
}

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr a{};
  return ::inet_pton(AF_INET, host.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

std::string plaintext_refusal(const cluster_config& c, const std::string& host, const std::string& what) {
  if (tls_enabled(c) || is_loopback_host(host)) return {};
  return what +
         " is not a loopback address and TLS is off: between machines nodes must authenticate "
         "each other (set [cluster] tls_cert, tls_key and tls_ca; deploy/make-certs.sh makes them)";
}

}  // namespace caf_agent::runtime
