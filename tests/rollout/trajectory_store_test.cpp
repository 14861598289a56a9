// tests/rollout/trajectory_store_test.cpp: crash-safe append-only storage.
#include <filesystem>
#include <fstream>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <csignal>

#include <gtest/gtest.h>

#include "rollout/trajectory_store.hpp"

using namespace caf_agent;
using namespace caf_agent::rollout;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("caf_agent_store_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

messages::trajectory_record rec(uint64_t id) {
  messages::trajectory_record r;
  r.episode_id = id;
  r.task_id = "task" + std::to_string(id);
  r.tokens = {1, 2, 3, static_cast<int32_t>(id)};
  r.logprobs = {-0.5f, -0.25f, -1.f, -2.f};
  r.loss_mask = {0, 1, 1, 1};
  r.termination = caf_agent::messages::episode_end::finished;
  r.reward = 2;
  return r;
}

fs::path only_segment(const fs::path& dir) {
  fs::path last;
  for (auto& e : fs::directory_iterator(dir))
    if (fs::file_size(e.path()) > 0) last = e.path();
  return last;
}

}  // namespace

TEST(trajectory_store, append_and_read_back) {
  auto dir = fresh_dir("basic");
  std::unique_ptr<trajectory_store> store;
  ASSERT_FALSE(trajectory_store::open(dir, store));
  for (uint64_t i = 1; i <= 5; ++i) ASSERT_EQ(store->append(rec(i)), "");
  EXPECT_EQ(store->size(), 5u);
  auto all = trajectory_store::read_all(dir);
  ASSERT_EQ(all.size(), 5u);
  EXPECT_TRUE(all[2] == rec(3));
  fs::remove_all(dir);
}

TEST(trajectory_store, duplicate_episode_is_refused) {
  auto dir = fresh_dir("dup");
  std::unique_ptr<trajectory_store> store;
  ASSERT_FALSE(trajectory_store::open(dir, store));
  ASSERT_EQ(store->append(rec(7)), "");
  auto second = rec(7);
  second.reward = -1;
  EXPECT_NE(store->append(second).find("duplicate"), std::string::npos);
  auto all = trajectory_store::read_all(dir);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].reward, 2);  // the first one is kept
  fs::remove_all(dir);
}

TEST(trajectory_store, torn_tail_is_skipped_and_store_reopens) {
  auto dir = fresh_dir("torn");
  {
    std::unique_ptr<trajectory_store> store;
    ASSERT_FALSE(trajectory_store::open(dir, store));
    for (uint64_t i = 1; i <= 3; ++i) ASSERT_EQ(store->append(rec(i)), "");
  }
  auto seg = only_segment(dir);
  fs::resize_file(seg, fs::file_size(seg) - 7);  // a crash mid-write of record 3
  std::unique_ptr<trajectory_store> store;
  ASSERT_FALSE(trajectory_store::open(dir, store));
  EXPECT_EQ(store->opened_with().records, 2u);
  EXPECT_EQ(store->opened_with().corrupt_frames, 1u);
  EXPECT_FALSE(store->contains(3));
  ASSERT_EQ(store->append(rec(3)), "");  // the lost episode can be recorded again
  scan_report report;
  auto all = trajectory_store::read_all(dir, &report);
  EXPECT_EQ(all.size(), 3u);
  EXPECT_EQ(report.corrupt_frames, 1u);
  fs::remove_all(dir);
}

TEST(trajectory_store, flipped_byte_fails_checksum_but_neighbours_survive) {
  auto dir = fresh_dir("crc");
  {
    std::unique_ptr<trajectory_store> store;
    ASSERT_FALSE(trajectory_store::open(dir, store));
    for (uint64_t i = 1; i <= 3; ++i) ASSERT_EQ(store->append(rec(i)), "");
  }
  auto seg = only_segment(dir);
  auto size = fs::file_size(seg);
  {
    std::fstream f{seg, std::ios::in | std::ios::out | std::ios::binary};
    f.seekp(static_cast<std::streamoff>(size / 2));
    char c = 0;
    f.read(&c, 1);
    f.seekp(static_cast<std::streamoff>(size / 2));
    c = static_cast<char>(c ^ 0x5a);
    f.write(&c, 1);
  }
  scan_report report;
  auto all = trajectory_store::read_all(dir, &report);
  EXPECT_EQ(all.size(), 2u);
  EXPECT_EQ(report.corrupt_frames, 1u);
  EXPECT_FALSE(report.problems.empty());
  fs::remove_all(dir);
}

TEST(trajectory_store, segments_roll_over_and_export_jsonl) {
  auto dir = fresh_dir("roll");
  std::unique_ptr<trajectory_store> store;
  ASSERT_FALSE(trajectory_store::open(dir, store, 200));
  for (uint64_t i = 1; i <= 6; ++i) ASSERT_EQ(store->append(rec(i)), "");
  size_t segments = 0;
  for (auto& e : fs::directory_iterator(dir)) segments += fs::file_size(e.path()) > 0;
  EXPECT_GT(segments, 1u);
  auto out = dir / "export.jsonl";
  ASSERT_FALSE(trajectory_store::export_jsonl(dir, out));
  std::ifstream in{out};
  std::string line;
  size_t lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    EXPECT_NE(line.find("\"episode_id\""), std::string::npos);
  }
  EXPECT_EQ(lines, 6u);
  fs::remove_all(dir);
}

TEST(trajectory_store, unusable_directory_is_an_error) {
  std::unique_ptr<trajectory_store> store;
  auto err = trajectory_store::open("/proc/caf_agent_cannot_be_here", store);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("/proc/caf_agent_cannot_be_here"), std::string::npos);
}

TEST(crc32, known_vector) {
  EXPECT_EQ(crc32("123456789", 9), 0xCBF43926u);
}

TEST(trajectory_store, stray_files_in_the_directory_are_not_read) {
  auto dir = fresh_dir("stray");
  {
    std::unique_ptr<trajectory_store> store;
    ASSERT_FALSE(trajectory_store::open(dir, store));
    for (uint64_t i = 1; i <= 3; ++i) ASSERT_EQ(store->append(rec(i)), "");
  }
  auto seg = only_segment(dir);
  // A backup copy and look-alike names: none of them is a segment of the store.
  fs::copy_file(seg, fs::path{seg.string() + ".bak"});
  fs::copy_file(seg, dir / "segment-000009.msgpack~");
  fs::copy_file(seg, dir / "segment-1.msgpack");
  fs::copy_file(seg, dir / "old-segment-000001.msgpack");
  EXPECT_EQ(trajectory_store::read_all(dir).size(), 3u);
  std::unique_ptr<trajectory_store> store;
  ASSERT_FALSE(trajectory_store::open(dir, store));
  EXPECT_EQ(store->size(), 3u);
  EXPECT_EQ(store->opened_with().corrupt_frames, 0u);
  fs::remove_all(dir);
}

TEST(trajectory_store, opening_creates_no_empty_segment) {
  auto dir = fresh_dir("lazy");
  {
    std::unique_ptr<trajectory_store> store;
    ASSERT_FALSE(trajectory_store::open(dir, store));
  }
  {
    std::unique_ptr<trajectory_store> store;
    ASSERT_FALSE(trajectory_store::open(dir, store));
    ASSERT_EQ(store->append(rec(1)), "");
  }
  size_t files = 0;
  for (auto& e : fs::directory_iterator(dir)) {
    ++files;
    EXPECT_GT(fs::file_size(e.path()), 0u) << e.path();
  }
  EXPECT_EQ(files, 1u);
  fs::remove_all(dir);
}

// A full disk, made by a file size limit in a child process (EFBIG at the limit, as
// ENOSPC would be): the failing append reports it, leaves no torn frame and no empty
// segment behind, and every record written before it reads back intact.
TEST(trajectory_store, write_failure_keeps_what_was_written_before) {
  auto dir = fresh_dir("full");
  std::unique_ptr<trajectory_store> probe;
  ASSERT_FALSE(trajectory_store::open(dir, probe));
  probe.reset();
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  auto pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{20000, 20000};  // bytes: a few records of ~4 KB
    ::setrlimit(RLIMIT_FSIZE, &lim);
    std::unique_ptr<trajectory_store> store;
    if (trajectory_store::open(dir, store)) ::_exit(3);
    std::string msg;
    uint64_t n = 0;
    for (uint64_t i = 1; i <= 50 && msg.empty(); ++i) {
      auto r = rec(i);
      r.tokens.assign(1000, 7);
      msg = store->append(r);
      if (msg.empty())
        ++n;
      else
        msg = std::to_string(n) + " " + msg;
    }
    if (::write(fds[1], msg.data(), msg.size()) < 0) ::_exit(4);
    ::_exit(msg.empty() ? 2 : 0);
  }
  ::close(fds[1]);
  std::string got;
  char buf[512];
  for (ssize_t k; (k = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(k));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status << ": " << got;
  auto written = std::stoul(got.substr(0, got.find(' ')));
  EXPECT_GE(written, 1u);
  EXPECT_NE(got.find("too large"), std::string::npos) << got;
  scan_report scan;
  auto all = trajectory_store::read_all(dir, &scan);
  EXPECT_EQ(all.size(), written);
  EXPECT_EQ(scan.corrupt_frames, 0u) << (scan.problems.empty() ? "" : scan.problems[0]);
  for (auto& e : fs::directory_iterator(dir)) EXPECT_GT(fs::file_size(e.path()), 0u) << e.path();
  fs::remove_all(dir);
}
