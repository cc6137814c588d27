#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spool/secret_file.h>

namespace spool {

namespace {

// An open file descriptor, closed on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

Status ErrnoStatus(const std::string& name, int error) {
  std::string reason = std::strerror(error);
  if (error == ENOENT) return Status::NotFound(name + ": " + reason);
  return Status::IOError(name + ": " + reason);
}

// Opens `path` and checks what was opened: a regular file with no group or
// other permission bits. O_NONBLOCK so that a FIFO put in the key's place
// cannot hang the open; the fstat then refuses it.
Status OpenPrivate(const std::string& what, const std::string& path,
                   int* fd_out, off_t* size) {
  const std::string name = what + " " + path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return ErrnoStatus(name, errno);
  Fd owned(fd);
  struct stat info {};
  if (::fstat(fd, &info) != 0) return ErrnoStatus(name, errno);
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
  *size = info.st_size;
  *fd_out = ::dup(fd);
  if (*fd_out < 0) return ErrnoStatus(name, errno);
  return Status::OK();
}

// Reads at most `limit` bytes of the opened file into *out; InvalidArgument
// when it holds more.
Status ReadAll(const std::string& name, int fd, size_t limit,
               std::string* out) {
  out->clear();
  char buffer[4096];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(name, errno);
    }
    if (n == 0) return Status::OK();
    if (out->size() + static_cast<size_t>(n) > limit) {
      return Status::InvalidArgument(name + ": larger than " +
                                     std::to_string(limit) + " bytes");
    }
    out->append(buffer, static_cast<size_t>(n));
  }
}

}  // namespace

Status ReadPrivateFile(const std::string& what, const std::string& path,
                       std::string* contents) {
  int fd = -1;
  off_t size = 0;
  if (Status s = OpenPrivate(what, path, &fd, &size); !s.ok()) return s;
  Fd owned(fd);
  return ReadAll(what + " " + path, fd, kMaxPrivateFileBytes, contents);
}

Status CheckPrivateFile(const std::string& what, const std::string& path) {
  int fd = -1;
  off_t size = 0;
  Status s = OpenPrivate(what, path, &fd, &size);
  if (fd >= 0) ::close(fd);
  return s;
}

Status LoadSecretFile(const std::string& what, const std::string& path,
                      std::string* secret) {
  const std::string name = what + " " + path;
  std::string text;
  if (Status s = ReadPrivateFile(what, path, &text); !s.ok()) return s;
  std::string line = text.substr(0, text.find('\n'));
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
