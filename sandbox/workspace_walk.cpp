#include "sandbox/workspace_walk.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

namespace caf_agent::sandbox {

bool walk_files(const workspace_paths& ws, const std::string& start_rel, std::size_t max_entries,
                const std::function<void(const walk_entry&)>& visit) {
  std::vector<std::string> stack{start_rel};
  std::size_t seen = 0;
  while (!stack.empty()) {
    const std::string dir_rel = std::move(stack.back());
    stack.pop_back();
    const int fd = ws.open_beneath(dir_rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    if (fd < 0) continue;
    DIR* dir = ::fdopendir(fd);
    if (dir == nullptr) {
      ::close(fd);
      continue;
    }
    while (const dirent* d = ::readdir(dir)) {
      const std::string name = d->d_name;
      if (name.empty() || name[0] == '.') continue;
      if (++seen > max_entries) {
        ::closedir(dir);
        return false;
      }
      struct stat st {};
      if (::fstatat(::dirfd(dir), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      const std::string rel = dir_rel == "." ? name : dir_rel + "/" + name;
      if (S_ISDIR(st.st_mode)) {
        stack.push_back(rel);
      } else if (S_ISREG(st.st_mode)) {
        visit({rel, static_cast<std::uint64_t>(st.st_size),
               static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec});
      }
    }
    ::closedir(dir);
  }
  return true;
}

}  // namespace caf_agent::sandbox
