/// gpu_pool/worker_process.cpp: Boost.Process spawn, framed I/O over pipes with poll()
/// deadlines, and the kill/restart policy.
#include "gpu_pool/worker_process.hpp"

#include <boost/process.hpp>
#include <boost/process/extend.hpp>

#include <nlohmann/json.hpp>
#include "sandbox/fd_hygiene.hpp"
#include "sandbox/node_reaper.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace caf_agent::gpu_pool {
namespace bp = boost::process;
using namespace std::chrono;

std::optional<std::string> worker_config::validate() const {
  if (python.empty()) return "worker_config.python is empty";
  if (package_dir.empty()) return "worker_config.package_dir is empty";
  if (device != "cpu" && device.rfind("cuda", 0) != 0)
    return "worker_config.device must be \"cpu\" or \"cuda[:N]\", got \"" + device + "\"";
  if (threads < 0) return "worker_config.threads must be >= 0";
  if (start_timeout <= milliseconds::zero()) return "worker_config.start_timeout must be positive";
  return std::nullopt;
}

struct worker_process::impl {
  /// Own group, parent-death signal, a cgroup for its compilers and fork server: the worker
  /// and everything it starts die with the node, even a SIGKILLed one.
  std::unique_ptr<sandbox::node_child_guard> guard;
  bp::child child;
  int to_fd = -1;    // our end of the worker's stdin
  int from_fd = -1;  // our end of the worker's stdout
  frame_reader reader;

  ~impl() {
    if (to_fd >= 0) ::close(to_fd);
    if (from_fd >= 0) ::close(from_fd);
  }
};

namespace {

// Writes all bytes; SIGPIPE is blocked for this thread so a dead reader gives EPIPE.
bool write_all(int fd, const std::string& data) {
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  std::size_t off = 0;
  bool ok = true;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = false;
      break;
    }
    off += static_cast<std::size_t>(n);
  }
  if (!ok) {  // consume the pending SIGPIPE before unblocking
    timespec zero{0, 0};
    sigtimedwait(&block, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return ok;
}

enum class read_status { ok, timeout, eof, bad_frame };

read_status read_frame(int fd, frame_reader& reader, steady_clock::time_point deadline, std::string& payload,
                       std::string& error) {
  char buf[65536];
  for (;;) {
    if (auto p = reader.next(&error)) {
      payload = std::move(*p);
      return read_status::ok;
    }
    if (!error.empty()) return read_status::bad_frame;
    auto left = duration_cast<milliseconds>(deadline - steady_clock::now()).count();
    if (left <= 0) return read_status::timeout;
    pollfd pfd{fd, POLLIN, 0};
    int r = ::poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return read_status::timeout;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return read_status::eof;
    reader.feed(std::string_view(buf, static_cast<std::size_t>(n)));
  }
}

std::string describe_exit(int native_status) {
  if (WIFSIGNALED(native_status))
    return std::string("killed by signal ") + std::to_string(WTERMSIG(native_status)) + " (" +
           ::strsignal(WTERMSIG(native_status)) + ")";
  if (WIFEXITED(native_status)) return "exited with status " + std::to_string(WEXITSTATUS(native_status));
  return "ended";
}

std::string ping_payload() {
  auto b = nlohmann::json::to_msgpack(nlohmann::json{{"op", "ping"}});
  return {b.begin(), b.end()};
}

}  // namespace

worker_process::worker_process(worker_config cfg) : cfg_(std::move(cfg)) {}

worker_process::~worker_process() {
  stop();
}

bool worker_process::running() const {
  return impl_ && impl_->child.valid() && impl_->child.running();
}

int worker_process::pid() const {
  return impl_ && impl_->child.valid() ? impl_->child.id() : 0;
}

void worker_process::abort() {
  aborted_ = true;
  if (int p = pid_.load(); p > 0) ::kill(p, SIGKILL);
}

std::optional<worker_failure> worker_process::start() {
  if (aborted_) return worker_failure{worker_error_code::start_failed, "shutting down", false};
  if (auto err = cfg_.validate()) return worker_failure{worker_error_code::start_failed, *err, false};
  stop();
  int in_pipe[2], out_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0) return worker_failure{worker_error_code::start_failed, "pipe2 failed", false};
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    ::close(in_pipe[0]);
    ::close(in_pipe[1]);
    return worker_failure{worker_error_code::start_failed, "pipe2 failed", false};
  }
  auto env = boost::this_process::environment();
  bp::environment child_env = env;
  const std::string old_path = env.count("PYTHONPATH") ? env["PYTHONPATH"].to_string() : "";
  child_env["PYTHONPATH"] = cfg_.package_dir + (old_path.empty() ? "" : ":" + old_path);
  for (const auto& [k, v] : cfg_.env) child_env[k] = v;
  std::vector<std::string> args = {"-m",        "caf_agent_eval.worker",     "--device", cfg_.device,
                                   "--threads", std::to_string(cfg_.threads)};
  if (cfg_.build_only) args.push_back("--build-only");
  auto p = std::make_unique<impl>();
  try {
    bp::pipe to_child(in_pipe[0], in_pipe[1]);
    bp::pipe from_child(out_pipe[0], out_pipe[1]);
    const auto exe =
        bp::search_path(cfg_.python).empty() ? boost::filesystem::path(cfg_.python) : bp::search_path(cfg_.python);
    // The worker's children run the agent's native code: none of the node's descriptors
    // (trajectory store, sockets) may reach them, so all but 0-2 close at exec.
    static std::atomic<int> started{0};
    p->guard = std::make_unique<sandbox::node_child_guard>("caf-agent-" + std::to_string(::getpid()) + "-worker-" +
                                                           std::to_string(++started));
    const auto no_inherited_fds = bp::extend::on_exec_setup = [guard = p->guard.get()](auto&) {
      guard->in_child();
      if (!sandbox::mark_fds_cloexec_from(3)) ::_exit(126);
    };
    if (cfg_.stderr_path.empty())
      p->child = bp::child(exe, args, bp::std_in<to_child, bp::std_out> from_child, bp::std_err > bp::null, child_env,
                           no_inherited_fds);
    else
      p->child = bp::child(exe, args, bp::std_in<to_child, bp::std_out> from_child, bp::std_err > cfg_.stderr_path,
                           child_env, no_inherited_fds);
    p->guard->started(p->child.id());
    // Keep our ends; the child's ends close in this process when the pipe objects go.
    p->to_fd = ::dup(to_child.native_sink());
    p->from_fd = ::dup(from_child.native_source());
    ::fcntl(p->to_fd, F_SETFD, FD_CLOEXEC);
    ::fcntl(p->from_fd, F_SETFD, FD_CLOEXEC);
  } catch (const std::exception& e) {
    return worker_failure{worker_error_code::start_failed, std::string("spawn failed: ") + e.what(), false};
  }
  impl_ = std::move(p);
  pid_ = impl_->child.id();
  if (aborted_) ::kill(pid_, SIGKILL);  // abort() raced with this start
  worker_failure f;
  if (!call(ping_payload(), cfg_.start_timeout, &f)) {
    stop();
    return worker_failure{worker_error_code::start_failed, "worker did not answer ping: " + f.message, false};
  }
  return std::nullopt;
}

std::optional<std::string> worker_process::call(const std::string& payload, milliseconds deadline,
                                                worker_failure* failure) {
  auto set = [&](worker_failure f) {
    if (failure) *failure = std::move(f);
    return std::nullopt;
  };
  if (!running()) return set({worker_error_code::start_failed, "worker is not running", false});
  const auto until = steady_clock::now() + deadline;
  if (!write_all(impl_->to_fd, frame(payload)))
    return set(fail_and_restart(worker_error_code::crashed, "worker closed its input"));
  std::string out, error;
  switch (read_frame(impl_->from_fd, impl_->reader, until, out, error)) {
    case read_status::ok:
      return out;
    case read_status::timeout:
      return set(fail_and_restart(worker_error_code::timeout,
                                  "no response within " + std::to_string(deadline.count()) + " ms; worker killed"));
    case read_status::eof: {
      std::error_code ec;
      impl_->child.wait_for(seconds(5), ec);
      std::string how = impl_->child.running() ? "closed its output" : describe_exit(impl_->child.native_exit_code());
      return set(fail_and_restart(worker_error_code::crashed, "worker " + how));
    }
    case read_status::bad_frame:
      return set(fail_and_restart(worker_error_code::protocol_error, error));
  }
  return std::nullopt;
}

std::optional<worker_failure> worker_process::ensure_running(std::string& died_while_idle) {
  if (running()) return std::nullopt;
  if (impl_ && impl_->child.valid()) {  // it was started and has ended since
    died_while_idle = "worker " + describe_exit(impl_->child.native_exit_code()) + " while idle";
    stop();
    ++restarts_;
  }
  return start();
}

template <class Outcome, class Decode>
Outcome worker_process::exchange(const std::string& payload, milliseconds deadline, Decode decode) {
  std::string died_while_idle;
  if (auto f = ensure_running(died_while_idle)) return {std::nullopt, *f, died_while_idle};
  worker_failure f;
  auto reply = call(payload, deadline, &f);
  if (!reply) return {std::nullopt, f, died_while_idle};
  std::string error;
  auto resp = decode(*reply, &error);
  if (!resp) return {std::nullopt, fail_and_restart(worker_error_code::protocol_error, error), died_while_idle};
  return {std::move(resp), std::nullopt, died_while_idle};
}

build_outcome worker_process::build(const build_request& req, milliseconds deadline) {
  return exchange<build_outcome>(encode_build_request(req), deadline, decode_build_response);
}

eval_outcome worker_process::evaluate(const eval_request& req, milliseconds deadline) {
  return exchange<eval_outcome>(encode_request(req), deadline, decode_response);
}

worker_failure worker_process::fail_and_restart(worker_error_code code, std::string message) {
  stop();
  ++restarts_;
  bool restarted = !aborted_ && !start().has_value();
  return {code, std::move(message), restarted};
}

void worker_process::stop() {
  if (!impl_) return;
  if (impl_->child.valid() && impl_->child.running()) {
    std::error_code ec;
    impl_->child.terminate(ec);  // SIGKILL; the worker's children die with it (PDEATHSIG)
  }
  if (impl_->child.valid()) {
    std::error_code ec;
    impl_->child.wait(ec);
  }
  impl_.reset();
}

}  // namespace caf_agent::gpu_pool
