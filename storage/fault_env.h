// FaultInjectionEnv: a RocksDB environment that makes file operations fail on
// demand, for the storage tests and the crash and fault torture tools.
//
// It wraps the FileSystem of a base Env (the default one or an in-memory one)
// in a FileSystem that, before each write, sync or read, asks whether a fault
// is armed for that kind of operation on that kind of file, and if so returns
// an error instead of (or, for syncs, after) doing the operation. RocksDB gets
// an Env built around that FileSystem (env()), e.g. through
// StoreOptions::env.
//
//   FaultInjectionEnv faults;                    // wraps Env::Default()
//   StoreOptions options;
//   options.env = faults.env();
//   ... open the store ...
//   faults.SetFault(FaultOp::kSync, FaultSpec::Always(kWalFiles));
//   ... Commit fails with IOError ...
//   faults.ClearAllFaults();
//
// What a fault does:
//   kWrite  Append / PositionedAppend fails; nothing of it reaches the file.
//   kSync   Sync / Fsync / RangeSync fails. The data appended before it is in
//           the file (the base file system has it, a reopen after a process
//           crash sees it) but is not durable: DropUnsyncedData() discards it,
//           unless the spec says sync_persists ("the sync worked but reported
//           an error").
//   kRead   Read on a sequential or random-access file fails (every request
//           of a MultiRead or ReadAsync is decided on its own).
// The error is IOStatus::IOError, or IOStatus::NoSpace (an IOError whose
// subcode is kNoSpace, which RocksDB's error handler treats on its own).
//
// The file system also records, for every file written through it, how many
// bytes were appended and how many of them a successful Sync/Fsync made
// durable. DropUnsyncedData() truncates each such file to its durable length:
// what a power cut would leave. Files that existed before this env wrote them
// count as durable. Directory entries are not modelled (a created or renamed
// file is assumed to survive), nor are RangeSync's partial guarantees (it
// makes nothing durable here). A crash followed by a power cut: arm kWrite
// and kSync with FaultSpec::Always() so that nothing more reaches the disk,
// close the DB, clear the faults, then call DropUnsyncedData().
//
// A stall (StallSyncs) holds syncs instead of failing them, for tests of what
// a slow or hung disk does to the layers above.
//
// Not covered: creating, renaming and deleting files never fail; directory
// fsyncs, FSRandomRWFile and the info log (LOG) are not wrapped; a failed
// write never writes part of its data.
//
// Thread safety: every method may be called from any thread, concurrently
// with RocksDB using env() from its own threads (the tests arm faults from
// one thread while the writer commits on another). DropUnsyncedData is the
// exception: see there.

#ifndef SPOOL_STORAGE_FAULT_ENV_H_
#define SPOOL_STORAGE_FAULT_ENV_H_

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <spool/status.h>

namespace rocksdb {
class Env;
class FileSystem;
}  // namespace rocksdb

namespace spool::storage {

namespace fault_env_internal {
class State;
}  // namespace fault_env_internal

// The files RocksDB writes, told apart by name.
enum class FileKind : uint8_t {
  kWal = 0,   // NNNNNN.log: the write-ahead log (also when recycled)
  kSst,       // NNNNNN.sst: table files
  kManifest,  // MANIFEST-NNNNNN
  kOther,     // CURRENT, *.dbtmp, OPTIONS-*, IDENTITY, LOCK, anything else
};
inline constexpr size_t kFileKindCount = 4;

// A set of FileKinds, as a bit mask.
using FileKindSet = uint8_t;
inline constexpr FileKindSet kWalFiles = 1 << 0;
inline constexpr FileKindSet kSstFiles = 1 << 1;
inline constexpr FileKindSet kManifestFiles = 1 << 2;
inline constexpr FileKindSet kOtherFiles = 1 << 3;
inline constexpr FileKindSet kAllFiles = 0x0F;

inline constexpr FileKindSet KindBit(FileKind kind) {
  return static_cast<FileKindSet>(1u << static_cast<unsigned>(kind));
}

// The kind of the file `fname` (a path or a bare name).
FileKind FileKindOf(std::string_view fname);

// "wal", "sst", "manifest" or "other".
const char* FileKindName(FileKind kind);

// The operations a fault can hit; see the top of the file.
enum class FaultOp : uint8_t { kWrite = 0, kSync, kRead };
inline constexpr size_t kFaultOpCount = 3;

// "write", "sync" or "read".
const char* FaultOpName(FaultOp op);

enum class FaultError : uint8_t {
  kIOError,  // IOStatus::IOError: an EIO
  // IOStatus::NoSpace: an ENOSPC. Beware: with RocksDB 7.8.3 as Debian builds
  // it (assertions on), NoSpace on a WAL write made while every memtable is
  // empty, then another write once RocksDB has recovered by itself, aborts
  // the process (see fault_env_test.cc).
  kNoSpace,
};

// When and how one kind of operation fails. A value; build it with one of the
// factories and adjust the fields.
struct FaultSpec {
  enum class Trigger : uint8_t {
    kNever,   // no fault: the operation runs
    kNextN,   // the next `count` matching operations fail, then it disarms
    kAlways,  // every matching operation fails until the fault is cleared
    kRandom,  // each matching operation fails with `probability`
  };

  Trigger trigger = Trigger::kNever;
  // kNextN: how many operations still fail.
  uint64_t count = 0;
  // kRandom: in [0, 1]. Decided by the env's seeded generator.
  double probability = 0;
  // The files the fault applies to; operations on other files run.
  FileKindSet files = kAllFiles;
  FaultError error = FaultError::kIOError;
  // Marks the IOStatus retryable (IOStatus::SetRetryable), which RocksDB's
  // error handler treats as recoverable. The POSIX file system never returns
  // retryable errors. Beware: on the WAL, RocksDB 7.8.3 as Debian builds it
  // (assertions on) can then abort the process in an assert once it has
  // recovered (facebook/rocksdb#12448).
  bool retryable = false;
  // kSync only. false: the failed sync made nothing durable; its data stays
  // in the file but DropUnsyncedData() discards it. true: the base sync ran
  // (and if it succeeded the data is durable), yet the caller is told that it
  // failed.
  bool sync_persists = false;

  static FaultSpec NextN(uint64_t n, FileKindSet files = kAllFiles);
  static FaultSpec Always(FileKindSet files = kAllFiles);
  static FaultSpec Random(double probability, FileKindSet files = kAllFiles);
};

// How many operations the env saw and how many it failed, by operation and
// file kind. Operations are counted whether or not a fault was armed.
struct FaultCounters {
  std::array<std::array<uint64_t, kFileKindCount>, kFaultOpCount> seen{};
  std::array<std::array<uint64_t, kFileKindCount>, kFaultOpCount> injected{};

  // Sums over the kinds in `files`.
  uint64_t Seen(FaultOp op, FileKindSet files = kAllFiles) const;
  uint64_t Injected(FaultOp op, FileKindSet files = kAllFiles) const;
  // Faults injected, all operations and kinds.
  uint64_t TotalInjected() const;
  // One line per operation, e.g.
  // "sync: seen 10 (wal 8, sst 1, manifest 1, other 0), injected 2 (...)".
  std::string ToString() const;
};

class FaultInjectionEnv {
 public:
  // Wraps the file system of `base` (null: rocksdb::Env::Default()). Does not
  // own `base`, which must outlive this object. Only the file system is taken
  // from `base`: threads and clock are Env::Default()'s (RocksDB's
  // NewCompositeEnv), as they are for Env::Default() and
  // NewMemEnv(Env::Default()). `seed` seeds the kRandom decisions.
  explicit FaultInjectionEnv(rocksdb::Env* base = nullptr, uint64_t seed = 1);
  // REQUIRES: every DB opened on env() is closed.
  ~FaultInjectionEnv();

  FaultInjectionEnv(const FaultInjectionEnv&) = delete;
  FaultInjectionEnv& operator=(const FaultInjectionEnv&) = delete;

  // The environment to hand to RocksDB. Owned by this object.
  rocksdb::Env* env() const { return env_.get(); }
  // The fault-injecting file system inside env(), for code that uses the
  // FileSystem API directly.
  const std::shared_ptr<rocksdb::FileSystem>& file_system() const {
    return fs_;
  }

  // ---- Faults ----

  // Arms `spec` for `op`, replacing what was armed for it. A kNextN count
  // starts from now. Operations already past their check are not affected.
  void SetFault(FaultOp op, const FaultSpec& spec);
  // Disarms `op`; the next operation of that kind runs normally.
  void ClearFault(FaultOp op);
  void ClearAllFaults();
  // Whether a fault is armed for `op` (a kNextN fault disarms itself once its
  // count is spent).
  bool FaultArmed(FaultOp op) const;
  // Restarts the kRandom generator. The same seed gives the same decisions
  // for the same sequence of operations (RocksDB's background threads may
  // change that sequence from run to run).
  void Reseed(uint64_t seed);

  // ---- Stalls ----

  // Holds every sync (Sync, Fsync, RangeSync) of the files in `files` until
  // ReleaseStall, or until `at_most` has passed since this call, whichever
  // comes first: a disk that stops answering, as fdatasync does on a
  // stalled device. A held sync then runs as usual (an armed kSync fault
  // included). The appends before it have reached the file; they are not
  // durable until it runs. `at_most` keeps a test that fails before it
  // releases from hanging. Replaces an earlier stall; syncs already held
  // take the new deadline and files.
  void StallSyncs(FileKindSet files, std::chrono::milliseconds at_most);
  // Lets every held sync go on, and later ones run at once.
  void ReleaseStall();
  // How many syncs are held now.
  uint64_t StalledSyncs() const;

  // ---- Counters ----

  FaultCounters counters() const;
  void ResetCounters();

  // ---- Power cut ----

  // Bytes written through this env that no successful sync has made durable,
  // over all files.
  uint64_t UnsyncedBytes() const;

  // Simulates a power cut: truncates every file written through this env to
  // the length its last successful Sync/Fsync made durable (0 if it was never
  // synced), and forgets what it knew of them. Faults stay armed but are not
  // applied to the truncation. Returns the first error of the base file
  // system; files that no longer exist are skipped.
  // REQUIRES: no file written through this env is still open, i.e. every DB
  // on env() is closed (RocksDB's DB::Close, or the store's destructor).
  Status DropUnsyncedData();

 private:
  // Shared with the file system and every file it opened.
  std::shared_ptr<fault_env_internal::State> state_;
  std::shared_ptr<rocksdb::FileSystem> fs_;
  std::unique_ptr<rocksdb::Env> env_;
};

}  // namespace spool::storage

#endif  // SPOOL_STORAGE_FAULT_ENV_H_
