#include "sandbox/background_shells.hpp"

#include <fmt/format.h>

#include "sandbox/line_regex.hpp"

#include <mutex>
#include <thread>

namespace caf_agent::sandbox {

/// One running or finished background command.
class background_shell {
 public:
  background_shell(std::unique_ptr<process_tree> tree, std::size_t buffer_bytes)
      : tree_(std::move(tree)), buf_(buffer_bytes), reader_([this, buffer_bytes] { read_loop(buffer_bytes); }) {}
  ~background_shell() { kill(); }

  /// Kills the tree (if still running) and joins the reader.
  void kill() {
    {
      std::lock_guard<std::mutex> lock(m_);
      if (!done_) {
        tree_->signal_group();
        killed_ = true;
      }
    }
    if (reader_.joinable()) reader_.join();
  }

  /// Unread output and a status line.
  std::pair<std::string, std::string> drain() {
    std::lock_guard<std::mutex> lock(m_);
    drained_ = done_;
    std::string status = !done_ ? "running" : killed_ ? "killed" : fmt::format("exited with code {}", exit_);
    return {buf_.take(), status};
  }

  bool done() {
    std::lock_guard<std::mutex> lock(m_);
    return done_;
  }
  bool finished_and_read() {
    std::lock_guard<std::mutex> lock(m_);
    return done_ && drained_;
  }

 private:
  void read_loop(std::size_t buffer_bytes) {
    using clock = std::chrono::steady_clock;
    std::optional<clock::time_point> exited_at;
    for (;;) {
      capped_buffer chunk(buffer_bytes);
      const bool eof = tree_->pump(chunk, clock::now() + std::chrono::milliseconds(100));
      if (!chunk.empty()) {
        std::lock_guard<std::mutex> lock(m_);
        buf_.append(chunk.take());
      }
      if (eof) break;
      // Rationale: same 200 ms grace as foreground commands for leftover grandchildren.
      if (!exited_at && !tree_->running()) exited_at = clock::now();
      if (exited_at && clock::now() - *exited_at > std::chrono::milliseconds(200)) break;
    }
    tree_->wait_zombie();
    std::lock_guard<std::mutex> lock(m_);
    exit_ = tree_->wait_exit();
    done_ = true;
  }

  std::unique_ptr<process_tree> tree_;
  std::mutex m_;
  capped_buffer buf_;
  int exit_ = 0;
  bool done_ = false;
  bool killed_ = false;
  bool drained_ = false;
  std::thread reader_;
};

background_shells::background_shells(std::size_t max_live, std::size_t buffer_bytes, std::size_t output_cap,
                                     std::size_t regex_max_program_bytes)
    : max_live_(max_live),
      buffer_bytes_(buffer_bytes),
      output_cap_(output_cap),
      regex_max_program_bytes_(regex_max_program_bytes) {}

background_shells::~background_shells() {
  kill_all();
}

std::size_t background_shells::live() const {
  std::size_t n = 0;
  for (const auto& [id, s] : shells_) n += s->done() ? 0 : 1;
  return n;
}

tool_outcome background_shells::start(const spawn_spec& spec, const std::string& command) {
  for (auto it = shells_.begin(); it != shells_.end();)
    it = it->second->finished_and_read() ? shells_.erase(it) : std::next(it);
  if (live() >= max_live_)
    return error_outcome(
        fmt::format("too many background shells ({} running, limit {}); stop one with "
                    "KillBash or wait for it to finish",
                    live(), max_live_));
  std::string err;
  auto tree = process_tree::start(spec, err);
  if (!tree) return {tool_status::internal, "Error: cannot start background shell: " + err, -1};
  const std::string id = fmt::format("bash_{}", next_id_++);
  shells_.emplace(id, std::make_unique<background_shell>(std::move(tree), buffer_bytes_));
  return ok_outcome(
      fmt::format("Command running in background with ID: {}\nUse BashOutput with "
                  "bash_id=\"{}\" to read its output and KillBash to stop it.",
                  id, id));
}

tool_outcome background_shells::output(const nlohmann::json& args) {
  tool_args a(args, "BashOutput");
  a.reject_unknown({"bash_id", "filter"});
  const auto id = a.str("bash_id");
  const auto filter = a.opt_str("filter");
  if (!a.error().empty()) return a.error_outcome();
  auto it = shells_.find(id);
  if (it == shells_.end()) return error_outcome(fmt::format("no background shell with id '{}'", id));
  auto [text, status] = it->second->drain();
  if (filter) {
    std::string regex_error;
    const auto re = line_regex::compile(*filter, false, regex_max_program_bytes_, regex_error);
    if (!re) return error_outcome("invalid filter: " + regex_error);
    std::string kept;
    for (std::size_t pos = 0; pos < text.size();) {
      std::size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      const std::string_view line(text.data() + pos, end - pos);
      if (re->search(line)) kept.append(line).push_back('\n');
      pos = end + 1;
    }
    text = std::move(kept);
  }
  std::string body = text.empty() ? "(no new output)" : to_observation(std::move(text), output_cap_);
  return ok_outcome(fmt::format("status: {}\n{}", status, body));
}

tool_outcome background_shells::kill(const nlohmann::json& args) {
  tool_args a(args, "KillBash");
  a.reject_unknown({"bash_id", "shell_id"});
  auto id = a.opt_str("bash_id");
  if (!id) id = a.opt_str("shell_id");
  if (!a.error().empty()) return a.error_outcome();
  if (!id) return error_outcome("invalid arguments for KillBash: missing required argument 'bash_id' (string)");
  auto it = shells_.find(*id);
  if (it == shells_.end()) return error_outcome(fmt::format("no background shell with id '{}'", *id));
  if (it->second->done()) return ok_outcome(fmt::format("Shell {} had already finished.", *id));
  it->second->kill();
  return ok_outcome(fmt::format("Shell {} killed.", *id));
}

void background_shells::kill_all() {
  for (auto& [id, s] : shells_) s->kill();
  shells_.clear();
}

}  // namespace caf_agent::sandbox
