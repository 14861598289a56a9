#pragma once
// Host-side scans of /proc used to prove that nothing of an episode survives.

#include <dirent.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace caf_agent::sandbox::test {

/// Pids of live (non-zombie) processes whose real uid is `uid`.
inline std::vector<int> pids_of_uid(int uid) {
  std::vector<int> out;
  if (uid < 0) return out;
  DIR* d = ::opendir("/proc");
  while (d != nullptr) {
    const dirent* e = ::readdir(d);
    if (e == nullptr) break;
    const int pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/status");
    std::string line;
    bool zombie = false, match = false;
    while (std::getline(in, line)) {
      if (line.rfind("State:", 0) == 0) zombie = line.find('Z') != std::string::npos;
      if (line.rfind("Uid:", 0) == 0) {
        std::istringstream ss(line.substr(4));
        int real = -1;
        ss >> real;
        match = real == uid;
      }
    }
    if (match && !zombie) out.push_back(pid);
  }
  if (d != nullptr) ::closedir(d);
  return out;
}

/// Pids of processes whose command line contains `needle`.
inline std::vector<int> pids_with_cmdline(const std::string& needle) {
  std::vector<int> out;
  DIR* d = ::opendir("/proc");
  while (d != nullptr) {
    const dirent* e = ::readdir(d);
    if (e == nullptr) break;
    const int pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/cmdline", std::ios::binary);
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (auto& c : cmd) c = c == '\0' ? ' ' : c;
    if (cmd.find(needle) != std::string::npos && cmd.find("pids_with_cmdline") == std::string::npos) out.push_back(pid);
  }
  if (d != nullptr) ::closedir(d);
  return out;
}

}  // namespace caf_agent::sandbox::test
