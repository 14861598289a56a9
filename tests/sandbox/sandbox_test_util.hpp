#pragma once
// Shared fixtures of the sandbox tests: a temporary workspace root and a sandbox on it.

#include "sandbox/episode_sandbox.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace caf_agent::sandbox::test {

/// A fresh directory under the system temp dir (mode 0711 so per-episode uids can traverse).
inline std::filesystem::path make_temp_root() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "caf_sbx_test_XXXXXX").string();
  const char* dir = ::mkdtemp(tmpl.data());
  EXPECT_NE(dir, nullptr);
  ::chmod(tmpl.c_str(), 0711);
  return tmpl;
}

/// Writes `text` to `path`, creating parents.
inline void put_file(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

/// Reads a whole host file.
inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// A workspace with model.py (protected) and a sandbox over it.
class sandbox_fixture : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = make_temp_root();
    ws_ = root_ / "ws";
    std::filesystem::create_directories(ws_);
    put_file(ws_ / "model.py", "class Model:\n    pass\n");
    put_file(ws_ / "harness/check.py", "print('harness')\n");
    cfg_.workspace = ws_;
    cfg_.protected_paths = {"model.py", "harness"};
    cfg_.default_timeout_s = 10;
    customize(cfg_);
    auto r = episode_sandbox::create(cfg_);
    ASSERT_TRUE(r.sandbox) << r.error;
    sb_ = std::move(r.sandbox);
  }
  void TearDown() override {
    sb_.reset();
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  /// Hook for tests that need another config.
  virtual void customize(sandbox_config&) {}
  /// Runs one tool call.
  tool_result run(const std::string& name, nlohmann::json args) {
    return sb_->execute({"call-1", name, std::move(args)});
  }
  /// Runs a Bash command.
  tool_result bash(const std::string& cmd, double timeout_ms = 10000) {
    return run("Bash", {{"command", cmd}, {"timeout", timeout_ms}});
  }

  std::filesystem::path root_, ws_;
  sandbox_config cfg_;
  std::unique_ptr<episode_sandbox> sb_;
};

}  // namespace caf_agent::sandbox::test
