// runtime/process.cpp: see process.hpp.
#include "runtime/process.hpp"

#include <atomic>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <unistd.h>

#include "base/log.hpp"

namespace caf_agent::runtime {

void exit_latch::set(int exit_code, std::string reason, bool finished) {
  {
    std::lock_guard<std::mutex> guard{mutex_};
    if (code_) return;
    code_ = exit_code;
    reason_ = std::move(reason);
    finished_ = finished;
  }
  cv_.notify_all();
}

void exit_latch::trigger(int exit_code, std::string reason) {
  set(exit_code, std::move(reason), false);
}

void exit_latch::finish(int exit_code, std::string reason) {
  set(exit_code, std::move(reason), true);
}

bool exit_latch::finished() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return finished_;
}

bool exit_latch::wait_for(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock{mutex_};
  return cv_.wait_for(lock, timeout, [this] { return code_.has_value(); });
}

void exit_latch::wait() {
  std::unique_lock<std::mutex> lock{mutex_};
  cv_.wait(lock, [this] { return code_.has_value(); });
}

int exit_latch::exit_code() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return code_.value_or(0);
}

std::string exit_latch::reason() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return reason_;
}

bool exit_latch::triggered() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return code_.has_value();
}

exit_deadline::~exit_deadline() {
  std::thread{[grace = grace_, code = code_] {
    std::this_thread::sleep_for(grace);
    log_error("caf-agent", "the actor system did not shut down within " + std::to_string(grace.count()) +
                               " ms after this node's work ended (a detached actor's thread, CAF 0.17); exiting with "
                               "code " +
                               std::to_string(code));
    std::fflush(nullptr);
    std::_Exit(code);
  }}.detach();
}

void install_signal_latch(exit_latch& latch) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread{[set, &latch] {
    bool first = true;
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      if (!first) std::_Exit(130);  // a second Ctrl-C: the user means it
      first = false;
      latch.trigger(0, sig == SIGINT ? "SIGINT" : "SIGTERM");
    }
  }}.detach();
}

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

int count_gpus() {
  int n = 0;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator("/dev", ec)) {
    auto name = e.path().filename().string();
    if (name.size() > 6 && name.rfind("nvidia", 0) == 0 && name.find_first_not_of("0123456789", 6) == std::string::npos)
      ++n;
  }
  return n;
}

std::string gpu_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", ec)) {
    std::ifstream in{e.path() / "information"};
    for (std::string line; std::getline(in, line);)
      if (line.rfind("Model:", 0) == 0) {
        auto v = line.substr(6);
        v.erase(0, v.find_first_not_of(" \t"));
        names.push_back(v);
      }
  }
  std::sort(names.begin(), names.end());
  std::string out;
  for (auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

namespace {
std::atomic<int> node_incarnation{0};
}  // namespace

void set_node_incarnation(int n) {
  node_incarnation = n;
}

std::string make_node_id(messages::node_role role) {
  int n = node_incarnation.load();
  return to_string(role) + "@" + host_name() + ":" + std::to_string(getpid()) + (n > 0 ? "#" + std::to_string(n) : "");
}

}  // namespace caf_agent::runtime
