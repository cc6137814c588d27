#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sys/stat.h>

#include <spool/secret_file.h>

namespace spool {

Status LoadSecretFile(const std::string& what, const std::string& path,
                      std::string* secret) {
  const std::string name = what + " " + path;
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    std::string reason = std::strerror(errno);
    if (errno == ENOENT) return Status::NotFound(name + ": " + reason);
    return Status::IOError(name + ": " + reason);
  }
  if (!S_ISREG(info.st_mode)) {
    return Status::InvalidArgument(name + ": not a regular file");
  }
  if ((info.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o",
                  static_cast<unsigned>(info.st_mode & 07777));
    return Status::InvalidArgument(name + " has mode " + mode +
                                   ": group or others may access it; run "
                                   "chmod 600 " +
                                   path);
  }
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) {
    if (in.bad()) return Status::IOError(name + ": cannot be read");
  }
  const char* space = " \t\r\n";
  size_t begin = line.find_first_not_of(space);
  size_t end = line.find_last_not_of(space);
  std::string value =
      begin == std::string::npos ? "" : line.substr(begin, end - begin + 1);
  if (value.size() < 16) {
    return Status::InvalidArgument(
        name +
        ": the secret (its first line) must be at least 16 bytes, "
        "e.g. from `openssl rand -hex 32`");
  }
  *secret = std::move(value);
  return Status::OK();
}

}  // namespace spool
