// tests/base/remove_tree_test.cpp: base::remove_tree removes trees, files and links, and never
// follows a symlink out of the tree (the class: a workspace the agent filled with links).
#include "base/remove_tree.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace fs = std::filesystem;
using caf_agent::base::remove_tree;

namespace {

struct scratch : ::testing::Test {
  fs::path root;
  void SetUp() override {
    char tmpl[] = "/tmp/remove_tree_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root = tmpl;
  }
  void TearDown() override { remove_tree(root.string()); }
  static void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }
};

}  // namespace

TEST_F(scratch, removes_a_nested_tree) {
  fs::create_directories(root / "ws" / "a" / "b" / "c");
  write(root / "ws" / "a" / "b" / "c" / "f.txt", "x");
  write(root / "ws" / "top.txt", "y");
  EXPECT_FALSE(remove_tree((root / "ws").string()));
  EXPECT_FALSE(fs::exists(root / "ws"));
}

TEST_F(scratch, a_missing_path_is_no_error_and_a_file_is_removed) {
  EXPECT_FALSE(remove_tree((root / "absent").string()));
  write(root / "file", "z");
  EXPECT_FALSE(remove_tree((root / "file").string()));
  EXPECT_FALSE(fs::exists(root / "file"));
}

TEST_F(scratch, symlinks_are_removed_never_followed) {
  fs::create_directories(root / "outside");
  write(root / "outside" / "keep.txt", "host data");
  fs::create_directories(root / "ws");
  fs::create_directory_symlink(root / "outside", root / "ws" / "dir_link");
  fs::create_symlink(root / "outside" / "keep.txt", root / "ws" / "file_link");
  fs::create_symlink("/nonexistent/target", root / "ws" / "dangling");
  EXPECT_FALSE(remove_tree((root / "ws").string()));
  EXPECT_FALSE(fs::exists(root / "ws"));
  EXPECT_TRUE(fs::exists(root / "outside" / "keep.txt"));
  // The tree's root itself a link: the link goes, the directory it names stays.
  fs::create_directory_symlink(root / "outside", root / "root_link");
  EXPECT_FALSE(remove_tree((root / "root_link").string()));
  EXPECT_FALSE(fs::is_symlink(root / "root_link"));
  EXPECT_TRUE(fs::exists(root / "outside" / "keep.txt"));
}

TEST_F(scratch, an_unremovable_entry_is_an_error_not_silence) {
  // Nobody, root included, unlinks a file of /proc.
  EXPECT_TRUE(remove_tree("/proc/self/status"));
  EXPECT_TRUE(fs::exists("/proc/self/status"));
  if (::geteuid() == 0) return;  // root removes from a read-only directory
  fs::create_directories(root / "ro" / "sub");
  write(root / "ro" / "sub" / "f", "x");
  fs::permissions(root / "ro" / "sub", fs::perms::owner_read | fs::perms::owner_exec);
  EXPECT_TRUE(remove_tree((root / "ro").string()));
  fs::permissions(root / "ro" / "sub", fs::perms::owner_all);
}
