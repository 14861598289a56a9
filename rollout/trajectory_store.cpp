// rollout/trajectory_store.cpp: see trajectory_store.hpp.
#include "rollout/trajectory_store.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace caf_agent::rollout {

namespace {

constexpr char magic[4] = {'C', 'A', 'F', 'T'};
constexpr size_t header_size = 12;
// Rationale: no single record is anywhere near 1 GiB (131072 tokens x ~9 bytes);
// a larger length field can only be corruption.
constexpr uint32_t max_record_bytes = 1u << 30;

void put_u32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

std::filesystem::path segment_path(const std::filesystem::path& dir, uint32_t n) {
  char name[32];
  std::snprintf(name, sizeof name, "segment-%06u.msgpack", n);
  return dir / name;
}

/// The segment number of `name` when it is exactly "segment-NNNNNN.msgpack", else 0.
uint32_t segment_number(const std::string& name) {
  constexpr std::string_view prefix = "segment-", suffix = ".msgpack";
  constexpr size_t digits = 6;
  if (name.size() != prefix.size() + digits + suffix.size() || !name.starts_with(prefix) || !name.ends_with(suffix))
    return 0;
  uint32_t n = 0;
  for (size_t i = prefix.size(); i < prefix.size() + digits; ++i) {
    if (name[i] < '0' || name[i] > '9') return 0;
    n = n * 10 + static_cast<uint32_t>(name[i] - '0');
  }
  return n;
}

std::vector<uint32_t> list_segments(const std::filesystem::path& dir) {
  std::vector<uint32_t> out;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (!e.is_regular_file(ec)) continue;
    if (auto n = segment_number(e.path().filename().string())) out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// Scans one segment, calling f(offset, record) for every intact frame.
template <class F>
void scan_segment(const std::filesystem::path& path, scan_report& report, F&& f) {
  std::ifstream in{path, std::ios::binary};
  std::string data{std::istreambuf_iterator<char>(in), {}};
  size_t pos = 0;
  while (pos < data.size()) {
    auto bad = [&](const std::string& why) {
      ++report.corrupt_frames;
      report.problems.push_back(path.filename().string() + " offset " + std::to_string(pos) + ": " + why);
      // Resynchronise on the next magic.
      auto next = data.find(std::string_view{magic, 4}, pos + 1);
      pos = next == std::string::npos ? data.size() : next;
    };
    if (data.size() - pos < header_size || std::memcmp(data.data() + pos, magic, 4) != 0) {
      bad(data.size() - pos < header_size ? "torn frame header" : "bad frame magic");
      continue;
    }
    uint32_t len = get_u32(data.data() + pos + 4);
    uint32_t crc = get_u32(data.data() + pos + 8);
    if (len > max_record_bytes || data.size() - pos - header_size < len) {
      bad("torn frame (length " + std::to_string(len) + ")");
      continue;
    }
    const char* body = data.data() + pos + header_size;
    if (crc32(body, len) != crc) {
      bad("checksum mismatch");
      continue;
    }
    messages::trajectory_record rec;
    try {
      auto handle = msgpack::unpack(body, len);
      handle.get().convert(rec);
    } catch (const std::exception& e) {
      bad(std::string{"undecodable record: "} + e.what());
      continue;
    }
    ++report.records;
    f(pos, std::move(rec));
    pos += header_size + len;
  }
}

}  // namespace

uint32_t crc32(const void* data, size_t size) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

std::optional<std::string> trajectory_store::open(const std::filesystem::path& dir,
                                                  std::unique_ptr<trajectory_store>& out, uint64_t segment_bytes) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return "cannot create trajectory store '" + dir.string() + "': " + ec.message();
  std::unique_ptr<trajectory_store> store{new trajectory_store()};
  store->dir_ = dir;
  store->segment_bytes_ = segment_bytes;
  for (auto n : list_segments(dir)) {
    scan_segment(segment_path(dir, n), store->open_report_, [&](uint64_t off, auto&& rec) {
      store->index_.emplace(rec.episode_id, record_location{n, off});
    });
    store->segment_ = n;
  }
  // Rationale: always start a fresh segment (with the first append), so a torn tail of
  // the last one is never appended to (its garbage stays isolated and skippable).
  if (auto err = store->roll_segment(); !err.empty()) return err;
  if (::access(dir.c_str(), W_OK) != 0)
    return "trajectory store '" + dir.string() + "' is not writable: " + std::strerror(errno);
  out = std::move(store);
  return std::nullopt;
}

trajectory_store::~trajectory_store() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<uint64_t> trajectory_store::episode_ids() const {
  std::vector<uint64_t> out;
  out.reserve(index_.size());
  for (auto& [id, loc] : index_) out.push_back(id);
  return out;
}

std::string trajectory_store::roll_segment() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ++segment_;
  segment_size_ = 0;
  segment_open_ = false;
  return {};
}

std::string trajectory_store::open_segment() {
  auto path = segment_path(dir_, segment_);
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) return "cannot create trajectory segment '" + path.string() + "': " + std::strerror(errno);
  // The new name must survive a crash too: sync the directory entry.
  if (int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  segment_open_ = true;
  return {};
}

std::string trajectory_store::append(const messages::trajectory_record& rec) {
  if (index_.contains(rec.episode_id))
    return "duplicate record for episode " + std::to_string(rec.episode_id) + " (kept the first)";
  msgpack::sbuffer body;
  msgpack::pack(body, rec);
  if (segment_size_ > 0 && segment_size_ + body.size() > segment_bytes_)
    if (auto err = roll_segment(); !err.empty()) return err;
  std::string frame(header_size, '\0');
  std::memcpy(frame.data(), magic, 4);
  put_u32(frame.data() + 4, static_cast<uint32_t>(body.size()));
  put_u32(frame.data() + 8, crc32(body.data(), body.size()));
  frame.append(body.data(), body.size());
  bool created = !segment_open_;
  if (created)
    if (auto err = open_segment(); !err.empty()) return err;
  uint64_t offset = segment_size_;
  size_t written = 0;
  int err = 0;
  while (written < frame.size()) {
    auto n = ::write(fd_, frame.data() + written, frame.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : ENOSPC;
      break;
    }
    written += static_cast<size_t>(n);
  }
  if (err == 0 && ::fdatasync(fd_) != 0 && errno != EINVAL) err = errno;
  if (err != 0) {
    // Take the partial frame back out, so what was written before stays intact and
    // the segment has no torn frame; a segment this record created goes away.
    bool clean = ::ftruncate(fd_, static_cast<off_t>(offset)) == 0;
    if (clean && created) {
      ::close(fd_);
      fd_ = -1;
      segment_open_ = false;
      std::error_code ec;
      std::filesystem::remove(segment_path(dir_, segment_), ec);
    } else if (!clean) {
      roll_segment();  // the torn frame stays; it is skipped on reading
    }
    return "writing trajectory segment '" + segment_path(dir_, segment_).string() + "' failed: " + std::strerror(err);
  }
  segment_size_ += frame.size();
  index_.emplace(rec.episode_id, record_location{segment_, offset});
  return {};
}

std::vector<messages::trajectory_record> trajectory_store::read_all(const std::filesystem::path& dir,
                                                                    scan_report* report) {
  std::vector<messages::trajectory_record> out;
  scan_report local;
  for (auto n : list_segments(dir))
    scan_segment(segment_path(dir, n), report ? *report : local,
                 [&](uint64_t, auto&& rec) { out.push_back(std::move(rec)); });
  return out;
}

std::optional<std::string> trajectory_store::export_jsonl(const std::filesystem::path& dir,
                                                          const std::filesystem::path& out) {
  std::ofstream os{out};
  if (!os) return "cannot write '" + out.string() + "'";
  for (auto& r : read_all(dir)) {
    nlohmann::json tools = nlohmann::json::object();
    for (auto& [name, t] : r.tools)
      tools[name] = {{"calls", t.calls}, {"errors", t.errors}, {"timeouts", t.timeouts}, {"total_ms", t.total_ms}};
    nlohmann::json j = {{"format_version", r.format_version},
                        {"episode_id", r.episode_id},
                        {"attempt", r.attempt},
                        {"task_id", r.task_id},
                        {"mode", r.mode},
                        {"node_id", r.node_id},
                        {"tokens", r.tokens},
                        {"logprobs", r.logprobs},
                        {"loss_mask", r.loss_mask},
                        {"turn_starts", r.turn_starts},
                        {"turn_texts", r.turn_texts},
                        {"observations", r.observations},
                        {"tools", tools},
                        {"malformed_tool_calls", r.malformed_tool_calls},
                        {"reward", r.reward},
                        {"correct", r.correct},
                        {"speedup_eager", r.speedup_eager},
                        {"speedup_compile", r.speedup_compile},
                        {"verdict", r.verdict},
                        {"termination", r.termination},
                        {"abort_reason", r.abort_reason},
                        {"policy_versions", r.policy_versions},
                        {"timings_ms", r.timings_ms},
                        {"turns", r.turns},
                        {"started_at_ms", r.started_at_ms},
                        {"ended_at_ms", r.ended_at_ms}};
    os << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  return std::nullopt;
}

}  // namespace caf_agent::rollout
