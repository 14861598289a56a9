// What the host process lends the sandbox, and what bounds an episode as a whole: inherited
// descriptors, host-side reads through the agent's links, regex and edit blow-ups, RAM-backed
// mounts, and the per-episode cgroup and workspace cap. Each case is an attack the review
// found working; each must be refused or contained.
#include "sandbox/episode_cgroup.hpp"
#include "sandbox/submission.hpp"
#include "sandbox_test_util.hpp"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <set>
#include <sstream>

namespace caf_agent::sandbox::test {
namespace {

/// The numbers in `text` (one per line).
std::set<std::string> lines_of(const std::string& text) {
  std::set<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line.find_first_not_of("0123456789") == std::string::npos) out.insert(line);
  return out;
}

class containment_test : public sandbox_fixture {
 protected:
  void customize(sandbox_config& c) override {
    c.shm_bytes = 4ULL << 20;
    c.tmpfs_bytes = 4ULL << 20;
  }
};

TEST_F(containment_test, the_shell_inherits_no_host_descriptor) {
  // A descriptor the host opened without O_CLOEXEC (as the trajectory store's segment was)
  // and a directory descriptor of the host's `/`.
  const int leaked_file = ::open((root_ / "store.seg").c_str(), O_RDWR | O_CREAT | O_APPEND, 0600);
  const int leaked_dir = ::open("/", O_RDONLY | O_DIRECTORY);
  ASSERT_GE(leaked_file, 3);
  ASSERT_GE(leaked_dir, 3);
  // bash's own table, read by a child (the `; true` keeps bash from exec'ing ls itself, so
  // $$ is the shell and the reader's descriptors do not show).
  auto r = bash("ls /proc/$$/fd; true");
  ::close(leaked_file);
  ::close(leaked_dir);
  const auto fds = lines_of(r.output);
  for (const auto& fd : fds)
    EXPECT_TRUE(fd == "0" || fd == "1" || fd == "2" || fd == "255") << "inherited fd " << fd << " in: " << r.output;
  EXPECT_TRUE(fds.count("1")) << r.output;
  EXPECT_EQ(slurp(root_ / "store.seg"), "");
}

TEST_F(containment_test, background_shells_inherit_no_host_descriptor) {
  const int leaked = ::open((root_ / "store.seg").c_str(), O_RDWR | O_CREAT | O_APPEND, 0600);
  ASSERT_GE(leaked, 3);
  auto start = run("Bash", {{"command", "ls /proc/$$/fd; echo END"}, {"run_in_background", true}});
  ::close(leaked);
  ASSERT_EQ(start.status, tool_status::ok) << start.output;
  std::string out;
  for (int i = 0; i < 100 && out.find("END") == std::string::npos; ++i) {
    out += run("BashOutput", {{"bash_id", "bash_1"}}).output;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(out.find("\n" + std::to_string(leaked) + "\n"), std::string::npos) << out;
}

TEST_F(containment_test, ram_backed_mounts_are_read_only_or_capped) {
  auto r = bash(
      "for d in / /etc /dev; do touch $d/x 2>&1 | grep -c 'Read-only' ; done; "
      "head -c 8000000 /dev/zero > /dev/shm/big; echo shm=$(stat -c %s /dev/shm/big); "
      "head -c 8000000 /dev/zero > /tmp/big; echo tmp=$(stat -c %s /tmp/big); "
      "echo ok > /dev/null && echo devnull-ok");
  EXPECT_EQ(r.output.find("1\n1\n1\n"), 0U) << "/, /etc and /dev must be read-only: " << r.output;
  EXPECT_NE(r.output.find("No space left on device"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("shm=4194304"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tmp=4194304"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("devnull-ok"), std::string::npos) << r.output;
}

TEST_F(containment_test, grep_with_a_backtracking_pattern_answers_at_once) {
  put_file(ws_ / "data.txt", std::string(200, 'a') + "\n");
  // Backreferences drive glibc's matcher into exponential time on this line (it did not
  // finish in 20 s); RE2 refuses them with an error naming the pattern.
  const std::string pattern = "(.*)(.*)(.*)(.*)(.*)\\5\\4\\3\\2\\1x";
  auto fut = std::async(std::launch::async, [&] {
    return run("Grep", {{"pattern", pattern}, {"output_mode", "content"}});
  });
  ASSERT_EQ(fut.wait_for(std::chrono::seconds(5)), std::future_status::ready) << "Grep hung";
  const auto r = fut.get();
  EXPECT_EQ(r.status, tool_status::error) << r.output;
  EXPECT_NE(r.output.find("invalid regex"), std::string::npos) << r.output;
  // A thousand Unicode letter classes compile to a program far over the budget: refused by size.
  const auto big = run("Grep", {{"pattern", "\\pL{1000}"}});
  EXPECT_EQ(big.status, tool_status::error) << big.output;
  EXPECT_NE(big.output.find("too large"), std::string::npos) << big.output;
  // Ordinary patterns keep working: Perl classes, POSIX classes, alternation.
  put_file(ws_ / "k.cu", "int n = 42;\n__global__ void k() {}\n");
  const auto ok = run("Grep", {{"pattern", "\\d+|[[:space:]]k\\("}, {"output_mode", "count"}});
  EXPECT_NE(ok.output.find("k.cu:2"), std::string::npos) << ok.output;
}

TEST_F(containment_test, bash_output_filter_is_linear_time) {
  auto start = run("Bash", {{"command", "printf 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\\nb1\\n'"},
                            {"run_in_background", true}});
  ASSERT_EQ(start.status, tool_status::ok) << start.output;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto fut = std::async(std::launch::async, [&] {
    return run("BashOutput", {{"bash_id", "bash_1"}, {"filter", "(.*)(.*)(.*)(.*)(.*)\\5\\4\\3\\2\\1x"}});
  });
  ASSERT_EQ(fut.wait_for(std::chrono::seconds(5)), std::future_status::ready) << "BashOutput hung";
  EXPECT_EQ(fut.get().status, tool_status::error);
  const auto ok = run("BashOutput", {{"bash_id", "bash_1"}, {"filter", "^b\\d$"}});
  EXPECT_EQ(ok.status, tool_status::ok) << ok.output;
}

/// Peak resident memory of this process, bytes.
long peak_rss_bytes() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss * 1024L;
}

class edit_blowup_test : public sandbox_fixture {
 protected:
  void customize(sandbox_config& c) override { c.limits.file_size_bytes = 16ULL << 20; }
};

TEST_F(edit_blowup_test, replace_all_is_refused_before_the_result_is_built) {
  put_file(ws_ / "f.txt", std::string(1000, 'a'));
  ASSERT_EQ(run("Read", {{"file_path", "f.txt"}}).status, tool_status::ok);
  const long before = peak_rss_bytes();
  // 1000 replacements of 1 MiB: a 1 GiB result against a 16 MiB file limit.
  const auto r = run(
      "Edit",
      {{"file_path", "f.txt"}, {"old_string", "a"}, {"new_string", std::string(1 << 20, 'b')}, {"replace_all", true}});
  EXPECT_EQ(r.status, tool_status::error) << r.output.substr(0, 300);
  EXPECT_NE(r.output.find("file size limit"), std::string::npos) << r.output.substr(0, 300);
  // Rationale: the 1 MiB argument itself and the JSON copies cost a few MiB; 64 MiB of slack
  // is far below the gigabyte that building the result would take.
  EXPECT_LT(peak_rss_bytes() - before, 64L << 20);
  EXPECT_EQ(slurp(ws_ / "f.txt"), std::string(1000, 'a'));
}

TEST_F(edit_blowup_test, multi_edit_growth_is_refused_before_it_is_built) {
  put_file(ws_ / "f.txt", std::string(1000, 'a'));
  ASSERT_EQ(run("Read", {{"file_path", "f.txt"}}).status, tool_status::ok);
  const long before = peak_rss_bytes();
  nlohmann::json edits = nlohmann::json::array();
  edits.push_back({{"old_string", "a"}, {"new_string", std::string(8 << 10, 'b')}, {"replace_all", true}});
  edits.push_back({{"old_string", "b"}, {"new_string", "cccccccccccccccccccccccccccccccccccc"}, {"replace_all", true}});
  const auto r = run("MultiEdit", {{"file_path", "f.txt"}, {"edits", edits}});
  EXPECT_EQ(r.status, tool_status::error) << r.output.substr(0, 300);
  EXPECT_LT(peak_rss_bytes() - before, 64L << 20);
  EXPECT_EQ(slurp(ws_ / "f.txt"), std::string(1000, 'a'));
}

// -- host-side reads of the submission ---------------------------------------

class submission_test : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = make_temp_root();
    ws_ = root_ / "ws";
    std::filesystem::create_directories(ws_ / "kernels");
    secret_ = root_ / "secret";
    put_file(secret_ / "shadow", "root:SECRET-HASH:19000::::::\n");
    ::chmod((secret_ / "shadow").c_str(), 0600);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  /// Asserts the submission is refused naming `what`, and that no secret was read.
  void expect_refused(const std::string& what) {
    const auto sub = collect_submission(ws_.string());
    EXPECT_NE(sub.error.find(what), std::string::npos) << sub.error;
    EXPECT_TRUE(sub.files.empty());
    for (const auto& [name, data] : sub.files) EXPECT_EQ(data.find("SECRET"), std::string::npos) << name;
  }
  std::filesystem::path root_, ws_, secret_;
};

TEST_F(submission_test, honest_files_are_collected) {
  put_file(ws_ / "model_new.py", "import torch\n");
  put_file(ws_ / "kernels/a.cu", "__global__ void k() {}\n");
  put_file(ws_ / "kernels/sub/b.cpp", "int b;\n");
  const auto sub = collect_submission(ws_.string());
  ASSERT_EQ(sub.error, "");
  EXPECT_EQ(sub.files.size(), 3U);
  EXPECT_EQ(sub.files.at("kernels/sub/b.cpp"), "int b;\n");
  EXPECT_EQ(sub.files.at("model_new.py"), "import torch\n");
}

TEST_F(submission_test, model_new_symlinked_to_a_host_file_is_refused_by_name) {
  std::filesystem::create_symlink(secret_ / "shadow", ws_ / "model_new.py");
  expect_refused("model_new.py is a symbolic link");
}

TEST_F(submission_test, relative_symlink_inside_the_workspace_is_refused_too) {
  put_file(ws_ / "real.py", "import torch\n");
  std::filesystem::create_symlink("real.py", ws_ / "model_new.py");
  expect_refused("model_new.py is a symbolic link");
}

TEST_F(submission_test, symlinked_kernels_directory_is_refused) {
  std::filesystem::remove(ws_ / "kernels");
  std::filesystem::create_directory_symlink(secret_, ws_ / "kernels");
  expect_refused("kernels is a symbolic link");
}

TEST_F(submission_test, symlinks_inside_kernels_are_refused) {
  put_file(ws_ / "kernels/ok.cu", "int x;\n");
  std::filesystem::create_symlink(secret_ / "shadow", ws_ / "kernels/leak.cu");
  expect_refused("kernels/leak.cu is a symbolic link");
}

TEST_F(submission_test, symlinked_subdirectory_is_refused) {
  std::filesystem::create_directory_symlink(secret_, ws_ / "kernels/sub");
  expect_refused("kernels/sub is a symbolic link");
}

TEST_F(submission_test, hard_link_to_a_host_file_is_refused) {
  std::error_code ec;
  std::filesystem::create_hard_link(secret_ / "shadow", ws_ / "kernels/h.cu", ec);
  ASSERT_FALSE(ec) << ec.message();
  expect_refused("hard links");
}

TEST_F(submission_test, fifo_does_not_block_the_host) {
  ASSERT_EQ(::mkfifo((ws_ / "kernels/pipe.cu").c_str(), 0666), 0);
  auto fut = std::async(std::launch::async, [&] { return collect_submission(ws_.string()); });
  ASSERT_EQ(fut.wait_for(std::chrono::seconds(5)), std::future_status::ready) << "collect blocked on a FIFO";
  EXPECT_NE(fut.get().error.find("kernels/pipe.cu is not a regular file"), std::string::npos);
}

TEST_F(submission_test, size_limits_name_the_file) {
  put_file(ws_ / "kernels/big.cu", std::string(2 << 20, 'x'));
  expect_refused("kernels/big.cu is larger than");
}

// -- the episode as a whole ----------------------------------------------------

/// Skips (saying why) where this host lets us make no cgroup.
#define REQUIRE_CGROUPS()                                                                                        \
  do {                                                                                                           \
    if (probe_cgroups().mode == cgroup_mode::none) GTEST_SKIP() << "no cgroup here: " << probe_cgroups().detail; \
  } while (0)

class episode_limits_test : public sandbox_fixture {
 protected:
  void customize(sandbox_config& c) override {
    c.cgroup = probe_cgroups().mode == cgroup_mode::none ? cgroup_policy::off : cgroup_policy::required;
    c.episode_limits.memory_bytes = 256ULL << 20;
    c.episode_limits.max_pids = 40;
    c.limits.max_processes = 256;  // the cgroup, not RLIMIT_NPROC, must be what stops it
    c.limits.address_space_bytes = 2ULL << 30;
    c.workspace_bytes = 16ULL << 20;
  }
};

TEST_F(episode_limits_test, memory_is_bounded_for_all_processes_together) {
  REQUIRE_CGROUPS();
  // Four processes of 120 MB each: under every per-process limit, over the episode's 256 MiB.
  auto r = bash(
      "for i in 1 2 3 4; do (v=$(head -c 120000000 /dev/zero | tr '\\0' a); sleep 2; echo held $i) & done; wait; echo "
      "done",
      30000);
  const auto c = sb_->containment();
  EXPECT_EQ(c["cgroup"], to_string(probe_cgroups().mode)) << c.dump();
  EXPECT_GT(c["memory_limit_hits"].get<std::uint64_t>(), 0U) << c.dump() << "\n" << r.output;
  EXPECT_LE(c["memory_peak_bytes"].get<std::uint64_t>(), (256ULL << 20) + (1ULL << 20)) << c.dump();
  std::size_t held = 0;
  for (std::size_t p = r.output.find("\nheld "); p != std::string::npos; p = r.output.find("\nheld ", p + 1)) ++held;
  if (r.output.rfind("held ", 0) == 0) ++held;
  EXPECT_LT(held, 4U) << r.output;
}

TEST_F(episode_limits_test, tmpfs_pages_count_toward_the_episode) {
  REQUIRE_CGROUPS();
  // /tmp is capped at 1 GiB, but the episode's budget is 256 MiB: the cgroup stops it first.
  auto r = bash("head -c 400000000 /dev/zero > /tmp/fill; stat -c %s /tmp/fill", 30000);
  const auto size = std::strtoull(r.output.substr(r.output.rfind('\n', r.output.size() - 2) + 1).c_str(), nullptr, 10);
  EXPECT_LT(size, 300000000ULL) << r.output;
}

TEST_F(episode_limits_test, processes_are_bounded_for_the_episode) {
  REQUIRE_CGROUPS();
  // Python's fork, not bash's `&` (bash retries a failed fork for seconds).
  auto r = bash(
      "python3 -c \"import os, signal\n"
      "n = 0\n"
      "for i in range(100):\n"
      "    try:\n"
      "        pid = os.fork()\n"
      "    except OSError as e:\n"
      "        print('refused:', e.strerror); break\n"
      "    if pid == 0:\n"
      "        signal.pause(); os._exit(0)\n"
      "    n += 1\n"
      "print('forked', n, flush=True)\n"
      "os.killpg(0, signal.SIGKILL)\"",
      30000);
  const auto p = r.output.find("forked ");
  ASSERT_NE(p, std::string::npos) << r.output;
  EXPECT_LT(std::stoi(r.output.substr(p + 7)), 40) << r.output;
  EXPECT_NE(r.output.find("refused: Resource temporarily unavailable"), std::string::npos) << r.output;
}

TEST_F(episode_limits_test, the_workspace_is_capped) {
  if (::geteuid() != 0) GTEST_SKIP() << "the workspace cap needs root (a tmpfs mount)";
  auto r = bash("for i in 1 2 3; do head -c 10000000 /dev/zero > f$i; done; du -sb . | cut -f1", 30000);
  EXPECT_NE(r.output.find("No space left on device"), std::string::npos) << r.output;
  std::uint64_t total = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(ws_))
    if (e.is_regular_file()) total += e.file_size();
  EXPECT_LE(total, 16ULL << 20);
  EXPECT_EQ(sb_->containment()["workspace_cap"], 16ULL << 20);
  // Files written before the cap are still there (the template was copied onto the tmpfs).
  EXPECT_EQ(slurp(ws_ / "model.py"), "class Model:\n    pass\n");
}

TEST_F(episode_limits_test, close_leaves_no_group_and_no_mount) {
  REQUIRE_CGROUPS();
  const auto dirs_before = sb_->containment();
  bash("sleep 30 &", 5000);
  sb_->close();
  std::ifstream mounts("/proc/self/mounts");
  std::string all((std::istreambuf_iterator<char>(mounts)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all.find(ws_.string()), std::string::npos) << "workspace tmpfs still mounted";
  EXPECT_FALSE(std::filesystem::exists(ws_));
}

TEST(cgroup_probe, says_what_it_found) {
  const auto& s = probe_cgroups();
  const auto name = to_string(s.mode);  // reported by name: none, v1 or v2
  EXPECT_TRUE(name == "v1" || name == "v2" || name == "none") << name;
  EXPECT_EQ(base::parse_name<cgroup_mode>(name), s.mode);
  EXPECT_FALSE(s.detail.empty());
}

}  // namespace
}  // namespace caf_agent::sandbox::test
