// tests/policy/model/link_test.cpp: in a binary that links LibTorch, our std::filesystem calls bind
// to the system libstdc++, not to the copy the PyPI wheel's libtorch_cpu.so exports (its
// remove_all jumped to address 0 on the H200 image). The top-level CMakeLists.txt links libstdc++
// first for that; without it these bind to libtorch_cpu.so.
#include <dlfcn.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>

#include <gtest/gtest.h>

namespace {

std::string library_of(const void* function) {
  Dl_info info{};
  if (dladdr(function, &info) == 0 || info.dli_fname == nullptr) return "(not found)";
  return info.dli_fname;
}

}  // namespace

TEST(link, filesystem_calls_bind_to_the_system_libstdcxx) {
  namespace fs = std::filesystem;
  using remove_all_fn = std::uintmax_t (*)(const fs::path&);
  using remove_all_ec_fn = std::uintmax_t (*)(const fs::path&, std::error_code&);
  using create_fn = bool (*)(const fs::path&);
  const remove_all_fn remove_all = &fs::remove_all;
  const remove_all_ec_fn remove_all_ec = &fs::remove_all;
  const create_fn create_directories = &fs::create_directories;
  for (const void* f : {reinterpret_cast<const void*>(remove_all), reinterpret_cast<const void*>(remove_all_ec),
                        reinterpret_cast<const void*>(create_directories)}) {
    const auto lib = library_of(f);
    EXPECT_NE(lib.find("libstdc++"), std::string::npos) << "bound to " << lib;
  }
}
