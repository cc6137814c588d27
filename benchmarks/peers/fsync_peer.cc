// The "fsync" peer: the disk's limit. Each client appends its records to a
// file of its own and calls fdatasync after each one, which is the least any
// durable queue must do per acknowledged write.

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "benchmarks/peers/peers_internal.h"
#include "benchmarks/peers/scoped_fd.h"

namespace spool::bench {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

// Appends one record: type, a tab, the payload, a newline.
void AppendRecord(std::string* buffer, std::string_view type,
                  std::string_view payload) {
  buffer->append(type);
  buffer->push_back('\t');
  buffer->append(payload);
  buffer->push_back('\n');
}

class FsyncClient final : public PeerClient {
 public:
  FsyncClient(ScopedFd fd, std::string path)
      : fd_(std::move(fd)), path_(std::move(path)) {}

  Status Enqueue(std::string_view type, std::string_view payload) override {
    record_.clear();
    AppendRecord(&record_, type, payload);
    Status s = WriteAll(record_);
    if (!s.ok()) return s;
    return Sync();
  }

  Status Preload(size_t n, std::string_view type,
                 std::string_view payload) override {
    constexpr size_t kChunkBytes = 1 << 20;
    std::string chunk;
    for (size_t i = 0; i < n; ++i) {
      AppendRecord(&chunk, type, payload);
      if (chunk.size() >= kChunkBytes || i + 1 == n) {
        Status s = WriteAll(chunk);
        if (!s.ok()) return s;
        chunk.clear();
      }
    }
    return Sync();
  }

  Status ClaimAndComplete() override {
    return Status::NotSupported(
        "fsync is a limit peer: it appends records and cannot claim them");
  }

 private:
  Status WriteAll(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = write(fd_.get(), data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status::IOError("fsync peer: write " + path_ + ": " +
                               ErrnoText(errno));
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
    return Status::OK();
  }

  Status Sync() {
    if (fdatasync(fd_.get()) != 0) {
      return Status::IOError("fsync peer: fdatasync " + path_ + ": " +
                             ErrnoText(errno));
    }
    return Status::OK();
  }

  ScopedFd fd_;
  std::string path_;
  std::string record_;  // Reused to avoid an allocation per Enqueue.
};

class FsyncPeer final : public Peer {
 public:
  std::string name() const override { return "fsync"; }

  Status Setup(const std::string& workdir) override {
    if (!workdir_.empty()) {
      return Status::FailedPrecondition("fsync peer: Setup called twice");
    }
    struct stat st;
    if (stat(workdir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return Status::InvalidArgument("fsync peer: workdir " + workdir +
                                     " is not a directory");
    }
    ScopedFd dir(open(workdir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir.valid()) {
      return Status::IOError("fsync peer: open " + workdir + ": " +
                             ErrnoText(errno));
    }
    workdir_ = workdir;
    dir_ = std::move(dir);
    return Status::OK();
  }

  void Teardown() override {
    dir_.reset();
    workdir_.clear();
  }

  Result<std::unique_ptr<PeerClient>> Connect() override {
    if (workdir_.empty()) {
      return Status::FailedPrecondition("fsync peer: Connect before Setup");
    }
    std::string path =
        workdir_ + "/fsync-" + std::to_string(next_file_.fetch_add(1)) + ".log";
    ScopedFd fd(
        open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (!fd.valid()) {
      return Status::IOError("fsync peer: open " + path + ": " +
                             ErrnoText(errno));
    }
    // The new file's directory entry must be durable too, once.
    if (fsync(dir_.get()) != 0) {
      return Status::IOError("fsync peer: fsync " + workdir_ + ": " +
                             ErrnoText(errno));
    }
    return std::unique_ptr<PeerClient>(
        new FsyncClient(std::move(fd), std::move(path)));
  }

  std::string Describe() const override {
    return "fsync: append type+payload to a file per client, fdatasync after "
           "every Enqueue (the disk's limit; no claim)";
  }

 private:
  std::string workdir_;  // Empty unless set up.
  ScopedFd dir_;
  std::atomic<unsigned> next_file_{0};
};

}  // namespace

std::unique_ptr<Peer> MakeFsyncPeer() { return std::make_unique<FsyncPeer>(); }

}  // namespace spool::bench
