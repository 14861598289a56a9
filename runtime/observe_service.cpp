// runtime/observe_service.cpp: see observe_service.hpp.
#include "runtime/observe_service.hpp"

#include <chrono>
#include <fstream>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <caf/all.hpp>

#include "base/log.hpp"
#include "messages/type_ids.hpp"

namespace caf_agent::runtime {

namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// Rationale: a view is computed in the coordinator in microseconds; 5 s covers a busy
// coordinator without letting a scrape hang forever.
constexpr auto view_timeout = std::chrono::seconds(5);

/// The coordinator's view `what`, or an empty string (and `error`) when it does not answer.
std::string ask_view(caf::actor_system& sys, const caf::actor& coord, messages::view_kind what, std::string& error) {
  std::string out;
  caf::scoped_actor self{sys};
  self->request(coord, view_timeout, messages::get_view{what, ""})
      .receive([&](std::string& text) { out = std::move(text); }, [&](caf::error& err) { error = sys.render(err); });
  return out;
}

/// One HTTP server thread; stops when the coordinator exits.
class endpoint : public std::enable_shared_from_this<endpoint> {
 public:
  endpoint(caf::actor_system& sys, caf::actor coord) : sys_(sys), coord_(std::move(coord)) {}

  std::string start(const std::string& host, uint16_t port) {
    boost::system::error_code ec;
    auto addr = net::ip::make_address(host, ec);
    if (ec) return "observe.prometheus_host '" + host + "' is not an IP address";
    acceptor_.open(addr.is_v6() ? tcp::v6() : tcp::v4(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind({addr, port}, ec);
    if (!ec) acceptor_.listen(16, ec);
    if (ec) return "cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message();
    port_ = acceptor_.local_endpoint().port();
    accept();
    thread_ = std::thread{[self = shared_from_this()] { self->ioc_.run(); }};
    return {};
  }

  uint16_t port() const { return port_; }

  void stop() {
    net::post(ioc_, [this] {
      boost::system::error_code ec;
      acceptor_.close(ec);
      ioc_.stop();
    });
    if (thread_.joinable()) {
      if (thread_.get_id() == std::this_thread::get_id())
        thread_.detach();
      else
        thread_.join();
    }
  }

 private:
  void accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (ec) return;  // closed
      serve(std::move(socket));
      accept();
    });
  }

  /// One request per connection (Prometheus scrapes are seconds apart).
  void serve(tcp::socket socket) {
    beast::flat_buffer buffer;
    http::request<http::string_body> req;
    boost::system::error_code ec;
    socket.set_option(net::socket_base::linger(true, 1), ec);
    http::read(socket, buffer, req, ec);
    if (ec) return;
    http::response<http::string_body> res;
    res.version(req.version());
    res.keep_alive(false);
    if (req.method() != http::verb::get || (req.target() != "/metrics" && req.target() != "/metrics/")) {
      res.result(http::status::not_found);
      res.set(http::field::content_type, "text/plain");
      res.body() = "caf-agent serves GET /metrics only\n";
    } else {
      std::string error;
      auto text = ask_view(sys_, coord_, messages::view_kind::prometheus, error);
      if (!error.empty()) {
        res.result(http::status::service_unavailable);
        res.set(http::field::content_type, "text/plain");
        res.body() = "the coordinator did not answer: " + error + "\n";
      } else {
        res.result(http::status::ok);
        res.set(http::field::content_type, "text/plain; version=0.0.4");
        res.body() = std::move(text);
      }
    }
    res.prepare_payload();
    http::write(socket, res, ec);
    socket.shutdown(tcp::socket::shutdown_both, ec);
  }

  caf::actor_system& sys_;
  caf::actor coord_;
  net::io_context ioc_;
  tcp::acceptor acceptor_{ioc_};
  uint16_t port_ = 0;
  std::thread thread_;
};

}  // namespace

observe::stuck_options stuck_options_of(const observe_config& cfg) {
  observe::stuck_options o;
  o.no_progress_ms = cfg.stuck_no_progress_s * 1000;
  o.repeat_calls = cfg.stuck_repeat_calls;
  o.turn_factor = cfg.stuck_turn_factor;
  o.min_turn_ms = cfg.stuck_min_turn_s * 1000;
  return o;
}

void start_metrics_endpoint(caf::actor_system& sys, caf::actor coordinator, const observe_config& cfg) {
  if (cfg.prometheus_port < 0 || !coordinator) return;
  auto ep = std::make_shared<endpoint>(sys, coordinator);
  if (auto err = ep->start(cfg.prometheus_host, static_cast<uint16_t>(cfg.prometheus_port)); !err.empty()) {
    log_error("coordinator", "no Prometheus endpoint: " + err);
    return;
  }
  log_info("coordinator",
           "Prometheus metrics at http://" + cfg.prometheus_host + ":" + std::to_string(ep->port()) + "/metrics");
  coordinator->attach_functor([ep] { ep->stop(); });
}

metrics_log::metrics_log(caf::actor_system& sys, caf::actor coordinator, std::string dir, int64_t interval_ms)
    : sys_(sys), coordinator_(std::move(coordinator)), path_(dir + "/" + metrics_file), interval_ms_(interval_ms) {
  if (interval_ms_ <= 0 || !coordinator_ || dir.empty()) return;
  thread_ = std::thread{[this] {
    std::unique_lock lock{mutex_};
    while (!stop_) {
      if (wake_.wait_for(lock, std::chrono::milliseconds(interval_ms_), [this] { return stop_; })) break;
      lock.unlock();
      write_line();
      lock.lock();
    }
  }};
}

metrics_log::~metrics_log() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock{mutex_};
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  write_line();  // the run's final state
}

void metrics_log::write_line() {
  std::string error;
  auto line = ask_view(sys_, coordinator_, messages::view_kind::metrics, error);
  if (line.empty()) return;  // the coordinator is gone or busy: the next line catches up
  std::ofstream out{path_, std::ios::app};
  out << line << "\n";
}

}  // namespace caf_agent::runtime
