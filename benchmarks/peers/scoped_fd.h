// ScopedFd: a file descriptor closed when its owner goes away.

#ifndef SPOOL_BENCHMARKS_PEERS_SCOPED_FD_H_
#define SPOOL_BENCHMARKS_PEERS_SCOPED_FD_H_

#include <unistd.h>
#include <utility>

namespace spool::bench {

// Owns one file descriptor (or none, -1). Movable, not copyable.
// Thread safety: a value; one object needs external synchronization.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() { reset(); }

  ScopedFd(ScopedFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  ScopedFd& operator=(ScopedFd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

  // Closes the descriptor, if any. A close error is ignored: every caller
  // that needs durability has already called fsync/fdatasync.
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

}  // namespace spool::bench

#endif  // SPOOL_BENCHMARKS_PEERS_SCOPED_FD_H_
