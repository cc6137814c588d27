#include "storage/fault_env.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <utility>

#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <rocksdb/io_status.h>
#include <rocksdb/slice.h>

namespace spool::storage {

using rocksdb::FileOptions;
using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;
using rocksdb::Slice;

FileKind FileKindOf(std::string_view fname) {
  size_t slash = fname.rfind('/');
  std::string_view base =
      slash == std::string_view::npos ? fname : fname.substr(slash + 1);
  auto ends_with = [base](std::string_view suffix) {
    return base.size() > suffix.size() &&
           base.substr(base.size() - suffix.size()) == suffix;
  };
  if (ends_with(".log")) return FileKind::kWal;
  if (ends_with(".sst")) return FileKind::kSst;
  if (base.rfind("MANIFEST-", 0) == 0) return FileKind::kManifest;
  return FileKind::kOther;
}

const char* FileKindName(FileKind kind) {
  switch (kind) {
    case FileKind::kWal:
      return "wal";
    case FileKind::kSst:
      return "sst";
    case FileKind::kManifest:
      return "manifest";
    case FileKind::kOther:
      return "other";
  }
  return "?";
}

const char* FaultOpName(FaultOp op) {
  switch (op) {
    case FaultOp::kWrite:
      return "write";
    case FaultOp::kSync:
      return "sync";
    case FaultOp::kRead:
      return "read";
  }
  return "?";
}

FaultSpec FaultSpec::NextN(uint64_t n, FileKindSet files) {
  FaultSpec spec;
  spec.trigger = n == 0 ? Trigger::kNever : Trigger::kNextN;
  spec.count = n;
  spec.files = files;
  return spec;
}

FaultSpec FaultSpec::Always(FileKindSet files) {
  FaultSpec spec;
  spec.trigger = Trigger::kAlways;
  spec.files = files;
  return spec;
}

FaultSpec FaultSpec::Random(double probability, FileKindSet files) {
  FaultSpec spec;
  spec.trigger = Trigger::kRandom;
  spec.probability = probability;
  spec.files = files;
  return spec;
}

uint64_t FaultCounters::Seen(FaultOp op, FileKindSet files) const {
  uint64_t sum = 0;
  for (size_t k = 0; k < kFileKindCount; ++k) {
    if (files & KindBit(static_cast<FileKind>(k))) {
      sum += seen[static_cast<size_t>(op)][k];
    }
  }
  return sum;
}

uint64_t FaultCounters::Injected(FaultOp op, FileKindSet files) const {
  uint64_t sum = 0;
  for (size_t k = 0; k < kFileKindCount; ++k) {
    if (files & KindBit(static_cast<FileKind>(k))) {
      sum += injected[static_cast<size_t>(op)][k];
    }
  }
  return sum;
}

uint64_t FaultCounters::TotalInjected() const {
  uint64_t sum = 0;
  for (size_t op = 0; op < kFaultOpCount; ++op) {
    sum += Injected(static_cast<FaultOp>(op));
  }
  return sum;
}

std::string FaultCounters::ToString() const {
  std::string out;
  auto by_kind = [](const std::array<uint64_t, kFileKindCount>& row) {
    std::string s;
    for (size_t k = 0; k < kFileKindCount; ++k) {
      if (k > 0) s += ", ";
      s += FileKindName(static_cast<FileKind>(k));
      s += " " + std::to_string(row[k]);
    }
    return s;
  };
  for (size_t op = 0; op < kFaultOpCount; ++op) {
    FaultOp fop = static_cast<FaultOp>(op);
    out += FaultOpName(fop);
    out += ": seen " + std::to_string(Seen(fop)) + " (" + by_kind(seen[op]) +
           "), injected " + std::to_string(Injected(fop)) + " (" +
           by_kind(injected[op]) + ")\n";
  }
  return out;
}

namespace fault_env_internal {

// What the env knows of one file written through it. Guarded by State::mu_.
struct TrackedFile {
  // Bytes in the file, as far as writes through the env tell.
  uint64_t size = 0;
  // Bytes a successful sync made durable.
  uint64_t synced = 0;
};

// The armed faults, the counters, the generator and the written files: what
// the env, its file system and every open file share.
class State {
 public:
  explicit State(uint64_t seed) : rng_(seed) {}

  // The outcome of the check made before one operation.
  struct Decision {
    IOStatus status;  // OK: run the operation
    bool sync_persists = false;
  };

  // Counts one `op` on `fname` and decides whether it fails.
  Decision Decide(FaultOp op, FileKind kind, const std::string& fname) {
    const size_t o = static_cast<size_t>(op);
    const size_t k = static_cast<size_t>(kind);
    std::lock_guard<std::mutex> lock(mu_);
    counters_.seen[o][k]++;
    FaultSpec& spec = specs_[o];
    if (spec.trigger == FaultSpec::Trigger::kNever ||
        (spec.files & KindBit(kind)) == 0) {
      return {};
    }
    bool fire = false;
    switch (spec.trigger) {
      case FaultSpec::Trigger::kNever:
        break;
      case FaultSpec::Trigger::kNextN:
        fire = spec.count > 0;
        if (fire && --spec.count == 0) {
          spec.trigger = FaultSpec::Trigger::kNever;
        }
        break;
      case FaultSpec::Trigger::kAlways:
        fire = true;
        break;
      case FaultSpec::Trigger::kRandom:
        fire = NextUniform() < spec.probability;
        break;
    }
    if (!fire) return {};
    counters_.injected[o][k]++;
    std::string msg = std::string("injected ") + FaultOpName(op) +
                      " fault on " + FileKindName(kind) + " file";
    Decision d;
    d.status = spec.error == FaultError::kNoSpace
                   ? IOStatus::NoSpace(msg, fname)
                   : IOStatus::IOError(msg, fname);
    if (spec.retryable) d.status.SetRetryable(true);
    d.sync_persists = spec.sync_persists;
    return d;
  }

  void SetFault(FaultOp op, const FaultSpec& spec) {
    std::lock_guard<std::mutex> lock(mu_);
    FaultSpec& armed = specs_[static_cast<size_t>(op)];
    armed = spec;
    if (armed.trigger == FaultSpec::Trigger::kNextN && armed.count == 0) {
      armed.trigger = FaultSpec::Trigger::kNever;
    }
  }

  void ClearAll() {
    std::lock_guard<std::mutex> lock(mu_);
    specs_.fill(FaultSpec());
  }

  bool Armed(FaultOp op) const {
    std::lock_guard<std::mutex> lock(mu_);
    return specs_[static_cast<size_t>(op)].trigger !=
           FaultSpec::Trigger::kNever;
  }

  void Reseed(uint64_t seed) {
    std::lock_guard<std::mutex> lock(mu_);
    rng_ = seed;
  }

  FaultCounters Counters() const {
    std::lock_guard<std::mutex> lock(mu_);
    return counters_;
  }

  void ResetCounters() {
    std::lock_guard<std::mutex> lock(mu_);
    counters_ = FaultCounters();
  }

  // ---- Written files ----

  // Starts tracking `fname` as a file of `size` bytes, all durable: a new
  // (empty) file, or an existing one reopened for appending.
  std::shared_ptr<TrackedFile> Track(const std::string& fname, uint64_t size) {
    auto file = std::make_shared<TrackedFile>();
    file->size = size;
    file->synced = size;
    std::lock_guard<std::mutex> lock(mu_);
    files_[fname] = file;
    return file;
  }

  void NoteWrite(TrackedFile* file, uint64_t end, bool append) {
    std::lock_guard<std::mutex> lock(mu_);
    file->size = append ? file->size + end : std::max(file->size, end);
  }

  void NoteTruncate(TrackedFile* file, uint64_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    file->size = size;
    file->synced = std::min(file->synced, size);
  }

  uint64_t SizeOf(const TrackedFile* file) const {
    std::lock_guard<std::mutex> lock(mu_);
    return file->size;
  }

  // A sync that started when the file had `size` bytes succeeded.
  void NoteSynced(TrackedFile* file, uint64_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    file->synced = std::max(file->synced, std::min(size, file->size));
  }

  void NoteDeleted(const std::string& fname) {
    std::lock_guard<std::mutex> lock(mu_);
    files_.erase(fname);
  }

  void NoteRenamed(const std::string& from, const std::string& to) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(from);
    if (it == files_.end()) {
      // An untracked (durable) file replaces whatever `to` was.
      files_.erase(to);
      return;
    }
    std::shared_ptr<TrackedFile> file = std::move(it->second);
    files_.erase(it);
    files_[to] = std::move(file);
  }

  void NoteTruncated(const std::string& fname, uint64_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(fname);
    if (it == files_.end()) return;
    it->second->size = size;
    it->second->synced = std::min(it->second->synced, size);
  }

  uint64_t UnsyncedBytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t sum = 0;
    for (const auto& [name, file] : files_) {
      if (file->size > file->synced) sum += file->size - file->synced;
    }
    return sum;
  }

  // Takes the tracked files out: name -> durable length.
  std::map<std::string, uint64_t> TakeFiles() {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<std::string, uint64_t> out;
    for (const auto& [name, file] : files_) out.emplace(name, file->synced);
    files_.clear();
    return out;
  }

  // ---- Stalls ----

  void Stall(FileKindSet files, std::chrono::milliseconds at_most) {
    std::lock_guard<std::mutex> lock(stall_mu_);
    stall_files_ = files;
    stall_until_ = std::chrono::steady_clock::now() + at_most;
    stall_cv_.notify_all();  // a waiter re-reads its deadline
  }

  void ReleaseStall() {
    std::lock_guard<std::mutex> lock(stall_mu_);
    stall_files_ = 0;
    stall_cv_.notify_all();
  }

  uint64_t Stalled() const {
    std::lock_guard<std::mutex> lock(stall_mu_);
    return stalled_;
  }

  // Holds a sync of a file of `kind` while a stall covers it.
  void WaitWhileStalled(FileKind kind) {
    std::unique_lock<std::mutex> lock(stall_mu_);
    auto held = [&] {
      return (stall_files_ & KindBit(kind)) != 0 &&
             std::chrono::steady_clock::now() < stall_until_;
    };
    if (!held()) return;
    ++stalled_;
    while (held()) stall_cv_.wait_until(lock, stall_until_);
    --stalled_;
  }

 private:
  // A uniform double in [0, 1) from splitmix64: the same on every platform.
  double NextUniform() {
    uint64_t z = (rng_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53;
  }

  mutable std::mutex mu_;
  std::array<FaultSpec, kFaultOpCount> specs_;
  uint64_t rng_;
  FaultCounters counters_;
  std::map<std::string, std::shared_ptr<TrackedFile>> files_;

  // Apart from mu_, which a stalled sync must not hold.
  mutable std::mutex stall_mu_;
  std::condition_variable stall_cv_;
  FileKindSet stall_files_ = 0;
  std::chrono::steady_clock::time_point stall_until_;
  uint64_t stalled_ = 0;
};

namespace {

class FaultWritableFile final : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  FaultWritableFile(std::unique_ptr<rocksdb::FSWritableFile> target,
                    const std::string& fname, std::shared_ptr<State> state,
                    std::shared_ptr<TrackedFile> tracked)
      : FSWritableFileOwnerWrapper(std::move(target)),
        fname_(fname),
        kind_(FileKindOf(fname)),
        state_(std::move(state)),
        tracked_(std::move(tracked)) {}

  IOStatus Append(const Slice& data, const IOOptions& options,
                  IODebugContext* dbg) override {
    IOStatus s = state_->Decide(FaultOp::kWrite, kind_, fname_).status;
    if (s.ok()) s = target()->Append(data, options, dbg);
    if (s.ok()) state_->NoteWrite(tracked_.get(), data.size(), true);
    return s;
  }
  IOStatus Append(const Slice& data, const IOOptions& options,
                  const rocksdb::DataVerificationInfo& info,
                  IODebugContext* dbg) override {
    IOStatus s = state_->Decide(FaultOp::kWrite, kind_, fname_).status;
    if (s.ok()) s = target()->Append(data, options, info, dbg);
    if (s.ok()) state_->NoteWrite(tracked_.get(), data.size(), true);
    return s;
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset,
                            const IOOptions& options,
                            IODebugContext* dbg) override {
    IOStatus s = state_->Decide(FaultOp::kWrite, kind_, fname_).status;
    if (s.ok()) s = target()->PositionedAppend(data, offset, options, dbg);
    if (s.ok()) state_->NoteWrite(tracked_.get(), offset + data.size(), false);
    return s;
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset,
                            const IOOptions& options,
                            const rocksdb::DataVerificationInfo& info,
                            IODebugContext* dbg) override {
    IOStatus s = state_->Decide(FaultOp::kWrite, kind_, fname_).status;
    if (s.ok()) {
      s = target()->PositionedAppend(data, offset, options, info, dbg);
    }
    if (s.ok()) state_->NoteWrite(tracked_.get(), offset + data.size(), false);
    return s;
  }
  IOStatus Truncate(uint64_t size, const IOOptions& options,
                    IODebugContext* dbg) override {
    IOStatus s = target()->Truncate(size, options, dbg);
    if (s.ok()) state_->NoteTruncate(tracked_.get(), size);
    return s;
  }

  IOStatus Sync(const IOOptions& options, IODebugContext* dbg) override {
    return DoSync([&] { return target()->Sync(options, dbg); });
  }
  IOStatus Fsync(const IOOptions& options, IODebugContext* dbg) override {
    return DoSync([&] { return target()->Fsync(options, dbg); });
  }
  IOStatus RangeSync(uint64_t offset, uint64_t nbytes, const IOOptions& options,
                     IODebugContext* dbg) override {
    // Makes nothing durable in this model, so it never moves `synced`.
    state_->WaitWhileStalled(kind_);
    State::Decision d = state_->Decide(FaultOp::kSync, kind_, fname_);
    if (!d.status.ok()) {
      if (d.sync_persists) {
        target()
            ->RangeSync(offset, nbytes, options, dbg)
            .PermitUncheckedError();
      }
      return d.status;
    }
    return target()->RangeSync(offset, nbytes, options, dbg);
  }

 private:
  template <class SyncFn>
  IOStatus DoSync(SyncFn&& sync) {
    state_->WaitWhileStalled(kind_);
    State::Decision d = state_->Decide(FaultOp::kSync, kind_, fname_);
    if (!d.status.ok() && !d.sync_persists) return d.status;
    // Only what was written before the sync started is durable after it.
    uint64_t size = state_->SizeOf(tracked_.get());
    IOStatus s = sync();
    if (s.ok()) state_->NoteSynced(tracked_.get(), size);
    return d.status.ok() ? s : d.status;
  }

  const std::string fname_;
  const FileKind kind_;
  const std::shared_ptr<State> state_;
  const std::shared_ptr<TrackedFile> tracked_;
};

class FaultSequentialFile final : public rocksdb::FSSequentialFileOwnerWrapper {
 public:
  FaultSequentialFile(std::unique_ptr<rocksdb::FSSequentialFile> target,
                      const std::string& fname, std::shared_ptr<State> state)
      : FSSequentialFileOwnerWrapper(std::move(target)),
        fname_(fname),
        kind_(FileKindOf(fname)),
        state_(std::move(state)) {}

  IOStatus Read(size_t n, const IOOptions& options, Slice* result,
                char* scratch, IODebugContext* dbg) override {
    IOStatus s = state_->Decide(FaultOp::kRead, kind_, fname_).status;
    if (!s.ok()) {
      *result = Slice();
      return s;
    }
    return target()->Read(n, options, result, scratch, dbg);
  }
  IOStatus PositionedRead(uint64_t offset, size_t n, const IOOptions& options,
                          Slice* result, char* scratch,
                          IODebugContext* dbg) override {
    IOStatus s = state_->Decide(FaultOp::kRead, kind_, fname_).status;
    if (!s.ok()) {
      *result = Slice();
      return s;
    }
    return target()->PositionedRead(offset, n, options, result, scratch, dbg);
  }

 private:
  const std::string fname_;
  const FileKind kind_;
  const std::shared_ptr<State> state_;
};

class FaultRandomAccessFile final
    : public rocksdb::FSRandomAccessFileOwnerWrapper {
 public:
  FaultRandomAccessFile(std::unique_ptr<rocksdb::FSRandomAccessFile> target,
                        const std::string& fname, std::shared_ptr<State> state)
      : FSRandomAccessFileOwnerWrapper(std::move(target)),
        fname_(fname),
        kind_(FileKindOf(fname)),
        state_(std::move(state)) {}

  IOStatus Read(uint64_t offset, size_t n, const IOOptions& options,
                Slice* result, char* scratch,
                IODebugContext* dbg) const override {
    IOStatus s = state_->Decide(FaultOp::kRead, kind_, fname_).status;
    if (!s.ok()) {
      *result = Slice();
      return s;
    }
    return target()->Read(offset, n, options, result, scratch, dbg);
  }
  // Request by request through Read above, so that each is decided.
  IOStatus MultiRead(rocksdb::FSReadRequest* reqs, size_t num_reqs,
                     const IOOptions& options, IODebugContext* dbg) override {
    return FSRandomAccessFile::MultiRead(reqs, num_reqs, options, dbg);
  }
  // Synchronously through Read above (RocksDB's fallback for file systems
  // without asynchronous reads); the file system's Poll has nothing to wait
  // for.
  IOStatus ReadAsync(
      rocksdb::FSReadRequest& req, const IOOptions& opts,
      std::function<void(const rocksdb::FSReadRequest&, void*)> cb,
      void* cb_arg, void** io_handle, rocksdb::IOHandleDeleter* del_fn,
      IODebugContext* dbg) override {
    return FSRandomAccessFile::ReadAsync(req, opts, std::move(cb), cb_arg,
                                         io_handle, del_fn, dbg);
  }

 private:
  const std::string fname_;
  const FileKind kind_;
  const std::shared_ptr<State> state_;
};

class FaultFileSystem final : public rocksdb::FileSystemWrapper {
 public:
  FaultFileSystem(const std::shared_ptr<rocksdb::FileSystem>& base,
                  std::shared_ptr<State> state)
      : FileSystemWrapper(base), state_(std::move(state)) {}

  static const char* kClassName() { return "SpoolFaultInjectionFileSystem"; }
  const char* Name() const override { return kClassName(); }

  IOStatus NewSequentialFile(const std::string& fname,
                             const FileOptions& options,
                             std::unique_ptr<rocksdb::FSSequentialFile>* result,
                             IODebugContext* dbg) override {
    std::unique_ptr<rocksdb::FSSequentialFile> file;
    IOStatus s = target()->NewSequentialFile(fname, options, &file, dbg);
    if (s.ok()) {
      result->reset(new FaultSequentialFile(std::move(file), fname, state_));
    }
    return s;
  }

  IOStatus NewRandomAccessFile(
      const std::string& fname, const FileOptions& options,
      std::unique_ptr<rocksdb::FSRandomAccessFile>* result,
      IODebugContext* dbg) override {
    std::unique_ptr<rocksdb::FSRandomAccessFile> file;
    IOStatus s = target()->NewRandomAccessFile(fname, options, &file, dbg);
    if (s.ok()) {
      result->reset(new FaultRandomAccessFile(std::move(file), fname, state_));
    }
    return s;
  }

  IOStatus NewWritableFile(const std::string& fname, const FileOptions& options,
                           std::unique_ptr<rocksdb::FSWritableFile>* result,
                           IODebugContext* dbg) override {
    std::unique_ptr<rocksdb::FSWritableFile> file;
    IOStatus s = target()->NewWritableFile(fname, options, &file, dbg);
    if (s.ok()) Wrap(fname, 0, std::move(file), result);
    return s;
  }

  IOStatus ReopenWritableFile(const std::string& fname,
                              const FileOptions& options,
                              std::unique_ptr<rocksdb::FSWritableFile>* result,
                              IODebugContext* dbg) override {
    std::unique_ptr<rocksdb::FSWritableFile> file;
    IOStatus s = target()->ReopenWritableFile(fname, options, &file, dbg);
    if (s.ok()) {
      uint64_t size = 0;
      if (!target()->GetFileSize(fname, options.io_options, &size, dbg).ok()) {
        size = 0;
      }
      Wrap(fname, size, std::move(file), result);
    }
    return s;
  }

  // A recycled log: the old file, renamed, is overwritten from its start.
  // Its old bytes are stale (RocksDB's recyclable log records carry the log
  // number), so the file is tracked as a new, empty one.
  IOStatus ReuseWritableFile(const std::string& fname,
                             const std::string& old_fname,
                             const FileOptions& options,
                             std::unique_ptr<rocksdb::FSWritableFile>* result,
                             IODebugContext* dbg) override {
    std::unique_ptr<rocksdb::FSWritableFile> file;
    IOStatus s =
        target()->ReuseWritableFile(fname, old_fname, options, &file, dbg);
    if (s.ok()) {
      state_->NoteDeleted(old_fname);
      Wrap(fname, 0, std::move(file), result);
    }
    return s;
  }

  IOStatus DeleteFile(const std::string& fname, const IOOptions& options,
                      IODebugContext* dbg) override {
    IOStatus s = target()->DeleteFile(fname, options, dbg);
    if (s.ok()) state_->NoteDeleted(fname);
    return s;
  }

  IOStatus RenameFile(const std::string& from, const std::string& to,
                      const IOOptions& options, IODebugContext* dbg) override {
    IOStatus s = target()->RenameFile(from, to, options, dbg);
    if (s.ok()) state_->NoteRenamed(from, to);
    return s;
  }

  IOStatus Truncate(const std::string& fname, size_t size,
                    const IOOptions& options, IODebugContext* dbg) override {
    IOStatus s = target()->Truncate(fname, size, options, dbg);
    if (s.ok()) state_->NoteTruncated(fname, size);
    return s;
  }

  // Every asynchronous read through this file system completes in ReadAsync.
  IOStatus Poll(std::vector<void*>& /*io_handles*/,
                size_t /*min_completions*/) override {
    return IOStatus::OK();
  }
  IOStatus AbortIO(std::vector<void*>& /*io_handles*/) override {
    return IOStatus::OK();
  }

 private:
  void Wrap(const std::string& fname, uint64_t size,
            std::unique_ptr<rocksdb::FSWritableFile> file,
            std::unique_ptr<rocksdb::FSWritableFile>* result) {
    std::shared_ptr<TrackedFile> tracked = state_->Track(fname, size);
    result->reset(
        new FaultWritableFile(std::move(file), fname, state_, tracked));
  }

  const std::shared_ptr<State> state_;
};

// Cuts `fname` to `size` bytes. RocksDB 7.8's POSIX file system does not
// implement FileSystem::Truncate, so that falls back to truncating through a
// reopened writable file.
IOStatus TruncateFile(rocksdb::FileSystem* fs, const std::string& fname,
                      uint64_t size) {
  IOOptions io;
  IOStatus s = fs->Truncate(fname, static_cast<size_t>(size), io, nullptr);
  if (!s.IsNotSupported()) return s;
  std::unique_ptr<rocksdb::FSWritableFile> file;
  s = fs->ReopenWritableFile(fname, FileOptions(), &file, nullptr);
  if (!s.ok()) return s;
  s = file->Truncate(size, io, nullptr);
  if (s.ok()) s = file->Fsync(io, nullptr);
  IOStatus closed = file->Close(io, nullptr);
  return s.ok() ? closed : s;
}

}  // namespace
}  // namespace fault_env_internal

FaultInjectionEnv::FaultInjectionEnv(rocksdb::Env* base, uint64_t seed)
    : state_(std::make_shared<fault_env_internal::State>(seed)) {
  if (base == nullptr) base = rocksdb::Env::Default();
  fs_ = std::make_shared<fault_env_internal::FaultFileSystem>(
      base->GetFileSystem(), state_);
  env_ = rocksdb::NewCompositeEnv(fs_);
}

FaultInjectionEnv::~FaultInjectionEnv() = default;

void FaultInjectionEnv::SetFault(FaultOp op, const FaultSpec& spec) {
  state_->SetFault(op, spec);
}

void FaultInjectionEnv::ClearFault(FaultOp op) {
  state_->SetFault(op, FaultSpec());
}

void FaultInjectionEnv::ClearAllFaults() { state_->ClearAll(); }

bool FaultInjectionEnv::FaultArmed(FaultOp op) const {
  return state_->Armed(op);
}

void FaultInjectionEnv::Reseed(uint64_t seed) { state_->Reseed(seed); }

void FaultInjectionEnv::StallSyncs(FileKindSet files,
                                   std::chrono::milliseconds at_most) {
  state_->Stall(files, at_most);
}

void FaultInjectionEnv::ReleaseStall() { state_->ReleaseStall(); }

uint64_t FaultInjectionEnv::StalledSyncs() const { return state_->Stalled(); }

FaultCounters FaultInjectionEnv::counters() const { return state_->Counters(); }

void FaultInjectionEnv::ResetCounters() { state_->ResetCounters(); }

uint64_t FaultInjectionEnv::UnsyncedBytes() const {
  return state_->UnsyncedBytes();
}

Status FaultInjectionEnv::DropUnsyncedData() {
  auto* fs = static_cast<fault_env_internal::FaultFileSystem*>(fs_.get());
  Status first;
  for (const auto& [name, synced] : state_->TakeFiles()) {
    rocksdb::IOOptions io;
    uint64_t size = 0;
    IOStatus s = fs->target()->GetFileSize(name, io, &size, nullptr);
    if (s.IsNotFound() || s.IsPathNotFound()) continue;
    if (s.ok() && size > synced) {
      s = fault_env_internal::TruncateFile(fs->target(), name, synced);
    }
    if (!s.ok() && first.ok()) {
      first = Status::IOError("dropping unsynced data of " + name + ": " +
                              s.ToString());
    }
  }
  return first;
}

}  // namespace spool::storage
