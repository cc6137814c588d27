// Path relations that options and storage both check, lexically (no
// symbolic link is followed: the directories may not exist yet).

#ifndef SPOOL_UTIL_PATHS_H_
#define SPOOL_UTIL_PATHS_H_

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>

namespace spool {

// Whether `path` is `dir` or lies inside it, both made absolute against the
// working directory and normalised ("a/./b/" is "a/b").
inline bool IsSameOrWithin(const std::string& path, const std::string& dir) {
  std::error_code error;
  auto normal = [&error](const std::string& p) {
    std::filesystem::path n =
        std::filesystem::absolute(p, error).lexically_normal();
    // "a/b/" normalises to "a/b/", whose last element is empty.
    if (!n.has_filename() && n.has_parent_path() && n != n.root_path()) {
      n = n.parent_path();
    }
    return n;
  };
  std::filesystem::path inner = normal(path);
  std::filesystem::path outer = normal(dir);
  auto [outer_end, inner_at] =
      std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end());
  static_cast<void>(inner_at);
  return outer_end == outer.end();
}

}  // namespace spool

#endif  // SPOOL_UTIL_PATHS_H_
