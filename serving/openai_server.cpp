// serving/openai_server.cpp: the sockets of openai_server (Boost.Beast); the endpoints are in
// openai_routes.cpp. Every connection is a session on its own strand: read a request, hand it
// to the routes, write the reply (posted back to the strand from whatever thread the service
// answered on), repeat while the client keeps the connection alive.
#include "serving/openai_server.hpp"

#include <array>
#include <chrono>
#include <iostream>
#include <mutex>
#include <optional>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "serving/openai_json.hpp"
#include "serving/openai_routes.hpp"

namespace caf_agent::serving {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

class session;

// Rationale: 64 KiB holds any real header set (OpenAI clients send < 2 KiB) and bounds what
// a hostile client can make the server buffer before the body limit applies.
constexpr uint32_t max_header_bytes = 64 * 1024;
// Rationale: after an error reply the server reads and discards what the client still sends
// for at most this long before closing, so the client sees the reply and not a reset.
constexpr auto linger_time = std::chrono::milliseconds(500);
// Rationale: retry accepting soon after a transient failure (out of file descriptors).
constexpr auto accept_retry_delay = std::chrono::milliseconds(100);

}  // namespace

struct openai_server::core {
  net::io_context ioc;  // first member: destroyed last, after every socket that uses it
  net::executor_work_guard<net::io_context::executor_type> work{ioc.get_executor()};
  net::strand<net::io_context::executor_type> accept_strand{net::make_strand(ioc)};
  tcp::acceptor acceptor{accept_strand};
  net::steady_timer accept_retry{accept_strand};
  server_options options;
  openai_routes routes;
  uint16_t port = 0;
  std::atomic<int32_t> connections{0};

  std::mutex mtx;
  bool stopped = false;                          // guarded by mtx
  std::vector<std::weak_ptr<session>> sessions;  // guarded by mtx

  core(chat_service& service, const server_options& opts) : options(opts), routes(service, opts.api_key) {}

  // Runs fn on executor unless the server has stopped (its threads may be gone).
  template <class Executor, class Fn>
  void post(const Executor& executor, Fn&& fn) {
    std::lock_guard lock(mtx);
    if (!stopped) net::post(executor, std::forward<Fn>(fn));
  }
};

namespace {

using server_core = openai_server::core;

class session : public std::enable_shared_from_this<session> {
 public:
  session(std::shared_ptr<server_core> core, tcp::socket socket) : core_(std::move(core)), stream_(std::move(socket)) {
    ++core_->connections;
  }
  ~session() { --core_->connections; }

  void start(bool over_limit) {
    if (over_limit) {
      send(openai_routes::error_reply(
               make_serving_error(errc::busy, "too many connections (max_connections " +
                                                  std::to_string(core_->options.max_connections) + "); retry later")),
           false);
      return;
    }
    read_header();
  }

  // Closes the socket from any thread; pending operations end with an error.
  void close_now() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      beast::error_code ec;
      self->stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
      self->stream_.close();
    });
  }

 private:
  std::chrono::milliseconds read_timeout() const { return std::chrono::milliseconds(core_->options.read_timeout_ms); }

  void read_header() {
    parser_.emplace();
    parser_->header_limit(max_header_bytes);
    parser_->body_limit(core_->options.max_body_bytes);
    stream_.expires_after(read_timeout());
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    if (ec) return on_read_error(ec);
    const auto length = parser_->content_length();
    if (length && *length > core_->options.max_body_bytes) return too_large();
    if (parser_->is_done()) return dispatch();
    const auto& req = parser_->get();
    if (beast::iequals(req[http::field::expect], "100-continue")) {
      // curl and others wait for this before sending a body over 1 KiB.
      static constexpr std::string_view go_on = "HTTP/1.1 100 Continue\r\n\r\n";
      net::async_write(stream_, net::buffer(go_on.data(), go_on.size()),
                       [self = shared_from_this()](beast::error_code ec, size_t) {
                         if (ec) return self->stream_.close();
                         self->read_body();
                       });
      return;
    }
    read_body();
  }

  void read_body() {
    stream_.expires_after(read_timeout());
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->on_read_error(ec);
      self->dispatch();
    });
  }

  void on_read_error(beast::error_code ec) {
    if (ec == http::error::body_limit) return too_large();
    // A client that closed, went silent or was cut off gets no reply.
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::operation_aborted ||
        ec == net::error::connection_reset || ec == http::error::partial_message || ec == net::error::eof ||
        ec == net::error::bad_descriptor)
      return stream_.close();
    send(openai_routes::error_reply(make_serving_error(errc::bad_request, "malformed HTTP request: " + ec.message())),
         false);
  }

  void too_large() {
    send(openai_routes::error_reply(make_serving_error(
             errc::too_large, "the request body is larger than the server's limit of " +
                                  std::to_string(core_->options.max_body_bytes) + " bytes (max_body_bytes)")),
         false);
  }

  void dispatch() {
    auto& req = parser_->get();
    const bool keep_alive = req.keep_alive();
    version_ = req.version();
    http_request request{std::string(req.method_string()), std::string(req.target()),
                         std::string(req[http::field::authorization]), std::move(req.body())};
    auto self = shared_from_this();
    auto on_io = [self](std::function<void()> task) {
      self->core_->post(self->stream_.get_executor(), std::move(task));
    };
    core_->routes.handle(
        request,
        [self, keep_alive](http_reply reply) {
          self->core_->post(self->stream_.get_executor(), [self, keep_alive, reply = std::move(reply)]() mutable {
            self->send(std::move(reply), keep_alive);
          });
        },
        on_io);
  }

  void send(http_reply reply, bool keep_alive) {
    response_ = {};
    response_.version(version_);
    response_.result(static_cast<unsigned>(reply.status));
    response_.set(http::field::server, "caf-agent");
    response_.set(http::field::content_type, "application/json");
    if (!reply.allow.empty()) response_.set(http::field::allow, reply.allow);
    response_.body() = std::move(reply.body);
    response_.keep_alive(keep_alive);
    response_.prepare_payload();
    stream_.expires_after(read_timeout());
    http::async_write(stream_, response_, [self = shared_from_this(), keep_alive](beast::error_code ec, size_t) {
      if (ec) return self->stream_.close();
      if (keep_alive) return self->read_header();
      self->linger();
    });
  }

  // Half-closes and discards input until the client closes, so that unread request bytes do
  // not turn the close into a reset that could destroy the reply in the client's buffer.
  void linger() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(linger_time);
    drain();
  }

  void drain() {
    stream_.async_read_some(net::buffer(scratch_), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->stream_.close();
      self->drain();
    });
  }

  std::shared_ptr<server_core> core_;  // first member: outlives the socket
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> response_;
  unsigned version_ = 11;
  std::array<char, 4096> scratch_{};
};

void accept_next(const std::shared_ptr<server_core>& core);

void on_accept(const std::shared_ptr<server_core>& core, beast::error_code ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || !core->acceptor.is_open()) return;
  if (ec) {
    core->accept_retry.expires_after(accept_retry_delay);
    core->accept_retry.async_wait([core](beast::error_code e) {
      if (!e) accept_next(core);
    });
    return;
  }
  const bool over_limit = core->connections.load() >= core->options.max_connections;
  auto s = std::make_shared<session>(core, std::move(socket));
  {
    std::lock_guard lock(core->mtx);
    if (core->stopped) return;  // s closes its socket as it goes
    if (core->sessions.size() > 64 && core->sessions.size() > 2 * static_cast<size_t>(core->connections.load()))
      std::erase_if(core->sessions, [](const auto& w) { return w.expired(); });
    core->sessions.push_back(s);
  }
  s->start(over_limit);
  accept_next(core);
}

void accept_next(const std::shared_ptr<server_core>& core) {
  core->acceptor.async_accept(net::make_strand(core->ioc), [core](beast::error_code ec, tcp::socket socket) {
    on_accept(core, ec, std::move(socket));
  });
}

void run_io(net::io_context& ioc) {
  for (;;) {
    try {
      ioc.run();
      return;
    } catch (const std::exception& e) {
      // Rationale: a throwing handler is a bug, but one connection must not take the
      // server down; the thread logs and goes on serving.
      std::cerr << "openai_server: exception in an io thread: " << e.what() << "\n";
    }
  }
}

}  // namespace

status server_options::validate() const {
  auto bad = [](const std::string& field, const std::string& what) {
    return make_serving_error(errc::bad_request, "server_options." + field + ": " + what, field);
  };
  if (host.empty()) return bad("host", "must not be empty");
  if (io_threads < 1 || io_threads > 256) return bad("io_threads", "must be in [1, 256]");
  if (max_body_bytes < 1024) return bad("max_body_bytes", "must be at least 1024");
  if (read_timeout_ms < 1) return bad("read_timeout_ms", "must be positive");
  if (max_connections < 1) return bad("max_connections", "must be positive");
  return {};
}

result<std::unique_ptr<openai_server>> openai_server::start(chat_service& service, const server_options& options) {
  if (auto valid = options.validate(); !valid) return valid.error();
  auto c = std::make_shared<core>(service, options);
  beast::error_code ec;
  const auto address = net::ip::make_address(options.host, ec);
  if (ec)
    return make_serving_error(errc::bad_request, "server_options.host: '" + options.host + "' is not an IP address",
                              "host");
  const tcp::endpoint endpoint(address, options.port);
  const std::string where = options.host + ":" + std::to_string(options.port);
  c->acceptor.open(endpoint.protocol(), ec);
  if (!ec) c->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) c->acceptor.bind(endpoint, ec);
  if (!ec) c->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return make_serving_error(errc::unavailable, "cannot listen on " + where + ": " + ec.message());
  c->port = c->acceptor.local_endpoint().port();
  accept_next(c);
  std::unique_ptr<openai_server> server(new openai_server(c));
  for (int i = 0; i < options.io_threads; ++i) server->threads_.emplace_back([c] { run_io(c->ioc); });
  return server;
}

openai_server::openai_server(std::shared_ptr<core> core) : core_(std::move(core)) {}

openai_server::~openai_server() {
  stop();
}

void openai_server::stop() {
  if (threads_.empty()) return;
  std::vector<std::shared_ptr<session>> live;
  {
    std::lock_guard lock(core_->mtx);
    core_->stopped = true;
    for (auto& w : core_->sessions)
      if (auto s = w.lock()) live.push_back(std::move(s));
    core_->sessions.clear();
  }
  net::post(core_->accept_strand, [c = core_] {
    beast::error_code ec;
    c->acceptor.close(ec);
    c->accept_retry.cancel();
  });
  for (auto& s : live) s->close_now();
  live.clear();
  // Without the guard, run() returns once the closed connections' handlers have finished.
  core_->work.reset();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

uint16_t openai_server::port() const {
  return core_->port;
}

std::string openai_server::base_url() const {
  const std::string& host = core_->options.host;
  // Rationale: a client cannot connect to the wildcard address; loopback reaches it locally.
  const std::string reachable = host == "0.0.0.0" ? "127.0.0.1" : host == "::" ? "[::1]" : host;
  const bool v6 = reachable.find(':') != std::string::npos && reachable.front() != '[';
  return "http://" + (v6 ? "[" + reachable + "]" : reachable) + ":" + std::to_string(core_->port) + "/v1";
}

}  // namespace caf_agent::serving
