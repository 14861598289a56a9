#pragma once
// Test helpers for serving/: a scripted chat_service, a raw-socket fake HTTP server that
// answers with whatever bytes a test scripts (malformed JSON, 503s, silence), and a raw
// HTTP exchange for sending our server bytes no well-behaved client would send.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "serving/chat_service.hpp"

namespace caf_agent::serving::testing {

/// Answers every request with `reply` (or `failure`) from its own thread, as the engine does,
/// and records what it received.
class scripted_chat_service : public chat_service {
 public:
  chat_response reply;
  std::optional<serving_error> failure;

  ~scripted_chat_service() override {
    std::lock_guard lock(mtx_);
    for (auto& t : threads_) t.join();
  }

  void complete(chat_request request, chat_handler done) override {
    std::lock_guard lock(mtx_);
    received_.push_back(std::move(request));
    result<chat_response> answer = failure ? result<chat_response>(*failure) : result<chat_response>(reply);
    threads_.emplace_back([done = std::move(done), answer] { done(answer); });
  }

  status reload(const std::string& model_path, uint64_t version) override {
    std::lock_guard lock(mtx_);
    if (model_path == "/no/such/checkpoint")
      return make_serving_error(errc::bad_request, "reload: " + model_path + ": no config.json");
    reloads_.emplace_back(model_path, version);
    return {};
  }

  std::string model_name() const override { return "scripted-model"; }

  std::vector<chat_request> received() const {
    std::lock_guard lock(mtx_);
    return received_;
  }
  std::vector<std::pair<std::string, uint64_t>> reloads() const {
    std::lock_guard lock(mtx_);
    return reloads_;
  }

 private:
  mutable std::mutex mtx_;
  std::vector<chat_request> received_;
  std::vector<std::pair<std::string, uint64_t>> reloads_;
  std::vector<std::thread> threads_;
};

/// A listening socket on 127.0.0.1 with an ephemeral port.
inline int listen_loopback(uint16_t& port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 16) != 0)
    throw std::runtime_error("cannot listen on 127.0.0.1");
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  port = ntohs(addr.sin_port);
  return fd;
}

/// A port on which nothing listens (bound once, then closed).
inline uint16_t closed_port() {
  uint16_t port = 0;
  ::close(listen_loopback(port));
  return port;
}

/// Appends what arrives on fd before `deadline`; false once the deadline passes or the peer
/// closes.
inline bool receive_some(int fd, std::string& data, std::chrono::steady_clock::time_point deadline) {
  char buf[4096];
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  pollfd p{fd, POLLIN, 0};
  if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
  const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  if (n <= 0) return false;
  data.append(buf, static_cast<size_t>(n));
  return true;
}

/// Reads one HTTP request (headers and Content-Length body) within timeout_ms.
inline std::string read_request(int fd, int timeout_ms) {
  std::string data;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const size_t head = data.find("\r\n\r\n");
    if (head != std::string::npos) {
      size_t length = 0;
      for (const char* key : {"Content-Length: ", "content-length: "})
        if (auto p = data.find(key); p != std::string::npos && p < head)
          length = std::stoul(data.substr(p + std::strlen(key)));
      if (data.size() >= head + 4 + length) return data;
    }
    if (!receive_some(fd, data, deadline)) return data;
  }
}

/// An HTTP/1.1 response with a body and Connection: close.
inline std::string http_response(int status, const std::string& body, const std::string& extra_headers = "") {
  return "HTTP/1.1 " + std::to_string(status) +
         " Scripted\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n" + extra_headers + "\r\n" + body;
}

/// Answers connection i with steps[i] (the last step repeats): after delay_ms, the scripted
/// bytes, then close.
class fake_http_server {
 public:
  struct step {
    std::string response;  ///< Raw bytes to send.
    int delay_ms = 0;      ///< Wait before answering (a slow server).
  };

  explicit fake_http_server(std::vector<step> steps) : steps_(std::move(steps)) {
    fd_ = listen_loopback(port_);
    thread_ = std::thread([this] { run(); });
  }
  ~fake_http_server() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }

  uint16_t port() const { return port_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  int connections() const { return connections_.load(); }
  std::vector<std::string> requests() const {
    std::lock_guard lock(mtx_);
    return requests_;
  }

 private:
  void run() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int conn = ::accept(fd_, nullptr, nullptr);
      if (conn < 0) continue;
      const int index = connections_++;
      const step& s = steps_[std::min<size_t>(static_cast<size_t>(index), steps_.size() - 1)];
      std::string request = read_request(conn, 2000);
      {
        std::lock_guard lock(mtx_);
        requests_.push_back(std::move(request));
      }
      for (int waited = 0; waited < s.delay_ms && !stop_; waited += 10)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (!stop_) (void)!::send(conn, s.response.data(), s.response.size(), MSG_NOSIGNAL);
      ::shutdown(conn, SHUT_WR);
      ::close(conn);
    }
  }

  std::vector<step> steps_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  mutable std::mutex mtx_;
  std::vector<std::string> requests_;
  std::thread thread_;
};

/// A connected socket to 127.0.0.1:port.
inline int connect_loopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    throw std::runtime_error("cannot connect to port " + std::to_string(port));
  return fd;
}

/// Sends all bytes (ignoring errors: the peer may have closed on purpose).
inline void send_all(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

/// Reads until the peer closes or timeout_ms passes.
inline std::string read_until_close(int fd, int timeout_ms) {
  std::string data;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (receive_some(fd, data, deadline)) {
  }
  return data;
}

/// Sends raw bytes to port and returns everything received until the server closes.
inline std::string raw_exchange(uint16_t port, const std::string& bytes, int timeout_ms = 3000) {
  const int fd = connect_loopback(port);
  send_all(fd, bytes);
  std::string out = read_until_close(fd, timeout_ms);
  ::close(fd);
  return out;
}

/// A request with Content-Length and Connection: close.
inline std::string raw_request(const std::string& method, const std::string& target, const std::string& body,
                               const std::string& extra_headers = "") {
  return method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n" + extra_headers + "\r\n" + body;
}

/// Status code and body of the first HTTP response in raw bytes (status 0 when none).
struct raw_reply {
  int status = 0;
  std::string body;
  std::string headers;
};

inline raw_reply parse_reply(const std::string& raw) {
  raw_reply r;
  if (raw.rfind("HTTP/1.", 0) != 0 || raw.size() < 12) return r;
  r.status = std::stoi(raw.substr(9, 3));
  const size_t head = raw.find("\r\n\r\n");
  if (head == std::string::npos) return r;
  r.headers = raw.substr(0, head);
  size_t length = raw.size() - head - 4;
  if (auto p = r.headers.find("Content-Length: "); p != std::string::npos)
    length = std::stoul(r.headers.substr(p + 16));
  r.body = raw.substr(head + 4, length);
  return r;
}

}  // namespace caf_agent::serving::testing
