// Tests of FaultInjectionEnv, and what RocksDB 7.8 (Debian's 7.8.3) does when
// the disk fails under spool's TaskStore.
//
// RocksDB 7.8 facts these tests establish (spool's writer must act on them):
//
// * A failed WAL write or WAL sync (a plain IOError, as POSIX gives: not
//   retryable) fails that write and puts the DB in a permanent error state.
//   Every later write fails with that same first error, also after the disk
//   recovers; there is no automatic recovery, and DB::Resume() returns the
//   same error without recovering. Only closing and reopening the DB makes
//   writes work again. Reads keep working throughout.
// * A failed SST write or sync during a flush, a failed read of the new SST
//   (RocksDB opens it to check it), and a failed MANIFEST write or sync do the
//   same: the flush fails, and so does every write after it, until the DB is
//   reopened. DB::Resume() does not help. After a failed flush RocksDB's
//   flush thread sleeps 1 s ("Waiting after background flush error"), and
//   closing the DB in that second waits for it.
// * NoSpace on the WAL is different (a "hard", not a "fatal", error): writes
//   fail while space is short and RocksDB recovers by itself once space is
//   back. Its SstFileManager retries about every 5 seconds, and DB::Resume()
//   returns Busy while that automatic recovery is pending. No reopen needed,
//   BUT: if every memtable was empty when the WAL write failed (the first
//   write after open or after a full flush), the recovery keeps the failed
//   WAL writer and the next write aborts the process in a RocksDB assert()
//   (Debian builds librocksdb with assertions on). Reopening at once is safe.
// * An IOError marked retryable (the POSIX file system never produces one)
//   on the WAL is recovered automatically within milliseconds, but the next
//   write may then reach the failed WAL writer, and Debian's librocksdb keeps
//   assert() enabled: the process aborts in
//   WritableFileWriter::AssertFalseAndGetStatusForPrevError (see upstream
//   facebook/rocksdb#12448, "Don't write to WAL after previous WAL write
//   error", 2024). Not tested here, since it kills the test binary.
// * "Written but the sync failed": the batch whose WAL sync failed is in the
//   WAL file. If the DB is reopened without a power cut, RocksDB replays it
//   and the batch is PRESENT although Commit returned IOError. After a power
//   cut (unsynced data dropped) it is ABSENT. So a failed Commit has an
//   unknown outcome: the caller must treat it as "maybe applied".
// * A failed WAL write (nothing reached the file) leaves the batch absent.
// * Read failures surface as IOError from Get and from iterators; the DB stays
//   writable.
// * Nothing acknowledged is lost across reopen, process crash or power cut
//   with random write, sync and read faults (kSync mode). In kRelaxed mode a
//   power cut loses acknowledged commits, as documented.

#include "storage/fault_env.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <ostream>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <rocksdb/options.h>

#include "storage/record.h"
#include "storage/task_record_generated.h"
#include "storage/task_store.h"
#include "tests/store_testing.h"

namespace spool::storage {
namespace {

using rocksdb::FileOptions;
using rocksdb::IOOptions;
using spool::testing::TempDir;
using spool::testing::WaitUntil;
using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------
// The env on its own, through the FileSystem API on a real directory.

class FaultFsTest : public ::testing::Test {
 protected:
  rocksdb::FileSystem* fs() { return faults_.file_system().get(); }

  std::unique_ptr<rocksdb::FSWritableFile> NewWritable(
      const std::string& name) {
    std::unique_ptr<rocksdb::FSWritableFile> file;
    EXPECT_TRUE(
        fs()->NewWritableFile(dir_.Sub(name), FileOptions(), &file, nullptr)
            .ok());
    return file;
  }

  uint64_t SizeOf(const std::string& name) {
    uint64_t size = 0;
    EXPECT_TRUE(
        fs()->GetFileSize(dir_.Sub(name), IOOptions(), &size, nullptr).ok());
    return size;
  }

  TempDir dir_;
  FaultInjectionEnv faults_;
};

TEST(FileKindTest, KindsByName) {
  EXPECT_EQ(FileKindOf("/d/000012.log"), FileKind::kWal);
  EXPECT_EQ(FileKindOf("000012.log"), FileKind::kWal);
  EXPECT_EQ(FileKindOf("/d/000013.sst"), FileKind::kSst);
  EXPECT_EQ(FileKindOf("/d/MANIFEST-000005"), FileKind::kManifest);
  EXPECT_EQ(FileKindOf("/d/CURRENT"), FileKind::kOther);
  EXPECT_EQ(FileKindOf("/d/000001.dbtmp"), FileKind::kOther);
  EXPECT_EQ(FileKindOf("/d/OPTIONS-000007"), FileKind::kOther);
  EXPECT_EQ(FileKindOf("/d/LOG"), FileKind::kOther);
  EXPECT_EQ(FileKindOf("/d/.log"), FileKind::kOther);
}

TEST_F(FaultFsTest, AStallHoldsSyncsOfItsFilesUntilReleased) {
  auto wal = NewWritable("000001.log");
  auto sst = NewWritable("000002.sst");
  ASSERT_TRUE(wal->Append("abc", IOOptions(), nullptr).ok());
  faults_.StallSyncs(kWalFiles, std::chrono::seconds(60));
  // Files the stall does not cover sync at once.
  EXPECT_TRUE(sst->Sync(IOOptions(), nullptr).ok());
  EXPECT_EQ(faults_.StalledSyncs(), 0u);

  std::atomic<bool> synced{false};
  std::thread syncer([&] {
    EXPECT_TRUE(wal->Fsync(IOOptions(), nullptr).ok());
    synced = true;
  });
  ASSERT_TRUE(WaitUntil([&] { return faults_.StalledSyncs() == 1; }));
  EXPECT_FALSE(synced);
  // The append reached the file; it is not durable while the sync waits.
  EXPECT_EQ(SizeOf("000001.log"), 3u);
  EXPECT_EQ(faults_.UnsyncedBytes(), 3u);

  faults_.ReleaseStall();
  syncer.join();  // bounded: the stall's own deadline is 60 s
  EXPECT_TRUE(synced);
  EXPECT_EQ(faults_.StalledSyncs(), 0u);
  EXPECT_EQ(faults_.UnsyncedBytes(), 0u);
  // Released: later syncs run at once.
  EXPECT_TRUE(wal->Sync(IOOptions(), nullptr).ok());
}

TEST_F(FaultFsTest, AStallEndsByItselfAtItsDeadline) {
  auto wal = NewWritable("000001.log");
  faults_.StallSyncs(kWalFiles, std::chrono::milliseconds(200));
  auto started = Clock::now();
  EXPECT_TRUE(wal->Sync(IOOptions(), nullptr).ok());
  EXPECT_GE(Clock::now() - started, std::chrono::milliseconds(200));
  // An armed fault still applies to the sync a stall let go.
  faults_.StallSyncs(kWalFiles, std::chrono::milliseconds(1));
  faults_.SetFault(FaultOp::kSync, FaultSpec::NextN(1, kWalFiles));
  EXPECT_TRUE(wal->Sync(IOOptions(), nullptr).IsIOError());
}

TEST_F(FaultFsTest, NextNFailsExactlyNMatchingWritesThenDisarms) {
  auto wal = NewWritable("000001.log");
  auto sst = NewWritable("000002.sst");
  faults_.SetFault(FaultOp::kWrite, FaultSpec::NextN(2, kWalFiles));
  EXPECT_TRUE(faults_.FaultArmed(FaultOp::kWrite));
  // Other kinds are not affected and do not use up the count.
  EXPECT_TRUE(sst->Append("x", IOOptions(), nullptr).ok());
  rocksdb::IOStatus s = wal->Append("a", IOOptions(), nullptr);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_FALSE(s.IsNoSpace());
  EXPECT_TRUE(wal->Append("b", IOOptions(), nullptr).IsIOError());
  EXPECT_FALSE(faults_.FaultArmed(FaultOp::kWrite));
  EXPECT_TRUE(wal->Append("c", IOOptions(), nullptr).ok());
  ASSERT_TRUE(wal->Close(IOOptions(), nullptr).ok());
  ASSERT_TRUE(sst->Close(IOOptions(), nullptr).ok());
  // A failed write writes nothing.
  EXPECT_EQ(SizeOf("000001.log"), 1u);

  FaultCounters c = faults_.counters();
  EXPECT_EQ(c.Seen(FaultOp::kWrite), 4u);
  EXPECT_EQ(c.Seen(FaultOp::kWrite, kWalFiles), 3u);
  EXPECT_EQ(c.Injected(FaultOp::kWrite, kWalFiles), 2u);
  EXPECT_EQ(c.Injected(FaultOp::kWrite, kSstFiles), 0u);
  EXPECT_EQ(c.TotalInjected(), 2u);
  faults_.ResetCounters();
  EXPECT_EQ(faults_.counters().Seen(FaultOp::kWrite), 0u);
}

TEST_F(FaultFsTest, AlwaysFailsUntilClearedWithTheChosenError) {
  auto manifest = NewWritable("MANIFEST-000003");
  FaultSpec spec = FaultSpec::Always(kManifestFiles);
  spec.error = FaultError::kNoSpace;
  spec.retryable = true;
  faults_.SetFault(FaultOp::kWrite, spec);
  for (int i = 0; i < 5; ++i) {
    rocksdb::IOStatus s = manifest->Append("m", IOOptions(), nullptr);
    EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
    EXPECT_TRUE(s.GetRetryable());
  }
  EXPECT_TRUE(faults_.FaultArmed(FaultOp::kWrite));
  faults_.ClearFault(FaultOp::kWrite);
  EXPECT_TRUE(manifest->Append("m", IOOptions(), nullptr).ok());
  EXPECT_EQ(faults_.counters().Injected(FaultOp::kWrite), 5u);
}

TEST_F(FaultFsTest, SyncFaultsHitSyncFsyncAndRangeSync) {
  auto wal = NewWritable("000004.log");
  ASSERT_TRUE(wal->Append("abc", IOOptions(), nullptr).ok());
  faults_.SetFault(FaultOp::kSync, FaultSpec::Always(kWalFiles));
  EXPECT_TRUE(wal->Sync(IOOptions(), nullptr).IsIOError());
  EXPECT_TRUE(wal->Fsync(IOOptions(), nullptr).IsIOError());
  EXPECT_TRUE(wal->RangeSync(0, 3, IOOptions(), nullptr).IsIOError());
  faults_.ClearAllFaults();
  EXPECT_TRUE(wal->Sync(IOOptions(), nullptr).ok());
  EXPECT_EQ(faults_.counters().Injected(FaultOp::kSync, kWalFiles), 3u);
  EXPECT_EQ(faults_.counters().Seen(FaultOp::kSync), 4u);
}

TEST_F(FaultFsTest, ReadFaultsHitSequentialRandomAndMultiReads) {
  {
    auto sst = NewWritable("000005.sst");
    ASSERT_TRUE(sst->Append("0123456789", IOOptions(), nullptr).ok());
    ASSERT_TRUE(sst->Close(IOOptions(), nullptr).ok());
  }
  std::unique_ptr<rocksdb::FSSequentialFile> seq;
  ASSERT_TRUE(fs()->NewSequentialFile(dir_.Sub("000005.sst"), FileOptions(),
                                      &seq, nullptr)
                  .ok());
  std::unique_ptr<rocksdb::FSRandomAccessFile> rnd;
  ASSERT_TRUE(fs()->NewRandomAccessFile(dir_.Sub("000005.sst"), FileOptions(),
                                        &rnd, nullptr)
                  .ok());
  char scratch[16];
  rocksdb::Slice result;
  faults_.SetFault(FaultOp::kRead, FaultSpec::NextN(3, kSstFiles));
  EXPECT_TRUE(seq->Read(4, IOOptions(), &result, scratch, nullptr).IsIOError());
  EXPECT_TRUE(result.empty());
  EXPECT_TRUE(
      rnd->Read(2, 4, IOOptions(), &result, scratch, nullptr).IsIOError());
  rocksdb::FSReadRequest reqs[2];
  char scratch2[16];
  reqs[0].offset = 0;
  reqs[0].len = 2;
  reqs[0].scratch = scratch;
  reqs[1].offset = 5;
  reqs[1].len = 2;
  reqs[1].scratch = scratch2;
  // One fault left: the first request fails, the second runs.
  ASSERT_TRUE(rnd->MultiRead(reqs, 2, IOOptions(), nullptr).ok());
  EXPECT_TRUE(reqs[0].status.IsIOError());
  EXPECT_TRUE(reqs[1].status.ok());
  EXPECT_EQ(reqs[1].result.ToString(), "56");
  ASSERT_TRUE(seq->Read(4, IOOptions(), &result, scratch, nullptr).ok());
  EXPECT_EQ(result.ToString(), "0123");
  EXPECT_EQ(faults_.counters().Injected(FaultOp::kRead), 3u);
}

TEST_F(FaultFsTest, RandomModeIsSeededAndHonoursTheProbability) {
  auto pattern = [this](uint64_t seed, double p) {
    faults_.Reseed(seed);
    faults_.SetFault(FaultOp::kWrite, FaultSpec::Random(p));
    auto file = NewWritable("000006.log");
    std::vector<bool> failed;
    for (int i = 0; i < 2000; ++i) {
      failed.push_back(!file->Append("x", IOOptions(), nullptr).ok());
    }
    return failed;
  };
  std::vector<bool> a = pattern(42, 0.1);
  std::vector<bool> b = pattern(42, 0.1);
  std::vector<bool> c = pattern(43, 0.1);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  size_t failures = 0;
  for (bool f : a) failures += f;
  EXPECT_GT(failures, 120u);  // expected 200
  EXPECT_LT(failures, 280u);
  for (bool f : pattern(7, 0.0)) EXPECT_FALSE(f);
  for (bool f : pattern(7, 1.0)) EXPECT_TRUE(f);
}

TEST_F(FaultFsTest, DropUnsyncedDataKeepsWhatTheLastSuccessfulSyncCovered) {
  {
    auto wal = NewWritable("000007.log");
    ASSERT_TRUE(wal->Append("durable|", IOOptions(), nullptr).ok());
    ASSERT_TRUE(wal->Sync(IOOptions(), nullptr).ok());
    ASSERT_TRUE(
        wal->Append("written-but-sync-failed|", IOOptions(), nullptr).ok());
    faults_.SetFault(FaultOp::kSync, FaultSpec::NextN(1));
    ASSERT_TRUE(wal->Sync(IOOptions(), nullptr).IsIOError());
    ASSERT_TRUE(wal->Close(IOOptions(), nullptr).ok());

    // sync_persists: the sync happened, only its report failed.
    auto sst = NewWritable("000008.sst");
    ASSERT_TRUE(sst->Append("persisted", IOOptions(), nullptr).ok());
    FaultSpec persists = FaultSpec::NextN(1);
    persists.sync_persists = true;
    faults_.SetFault(FaultOp::kSync, persists);
    ASSERT_TRUE(sst->Sync(IOOptions(), nullptr).IsIOError());
    ASSERT_TRUE(sst->Close(IOOptions(), nullptr).ok());

    // Tracked across a rename, as RocksDB writes CURRENT.
    auto tmp = NewWritable("000009.dbtmp");
    ASSERT_TRUE(tmp->Append("synced", IOOptions(), nullptr).ok());
    ASSERT_TRUE(tmp->Fsync(IOOptions(), nullptr).ok());
    ASSERT_TRUE(tmp->Append("+lost", IOOptions(), nullptr).ok());
    ASSERT_TRUE(tmp->Close(IOOptions(), nullptr).ok());
    ASSERT_TRUE(fs()->RenameFile(dir_.Sub("000009.dbtmp"), dir_.Sub("CURRENT"),
                                 IOOptions(), nullptr)
                    .ok());

    auto never = NewWritable("000010.sst");
    ASSERT_TRUE(never->Append("never synced", IOOptions(), nullptr).ok());
    ASSERT_TRUE(never->Close(IOOptions(), nullptr).ok());
  }
  // Before the power cut the written data is all there (a process crash
  // keeps it).
  EXPECT_EQ(SizeOf("000007.log"), 32u);
  EXPECT_EQ(faults_.UnsyncedBytes(), 24u + 5u + 12u);

  Status dropped = faults_.DropUnsyncedData();
  ASSERT_TRUE(dropped.ok()) << dropped.ToString();
  EXPECT_EQ(SizeOf("000007.log"), 8u);
  EXPECT_EQ(SizeOf("000008.sst"), 9u);
  EXPECT_EQ(SizeOf("CURRENT"), 6u);
  EXPECT_EQ(SizeOf("000010.sst"), 0u);
  EXPECT_EQ(faults_.UnsyncedBytes(), 0u);
}

TEST_F(FaultFsTest, FaultsFlipSafelyWhileAnotherThreadWrites) {
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> appends{0};
  std::atomic<uint64_t> failures{0};
  std::thread writer([&] {
    auto file = NewWritable("000011.log");
    while (!stop.load()) {
      if (!file->Append("x", IOOptions(), nullptr).ok()) failures++;
      if (!file->Sync(IOOptions(), nullptr).ok()) failures++;
      appends++;
    }
    EXPECT_TRUE(file->Close(IOOptions(), nullptr).ok());
  });
  auto deadline = Clock::now() + std::chrono::milliseconds(300);
  uint64_t flips = 0;
  while (Clock::now() < deadline) {
    faults_.SetFault(FaultOp::kWrite, FaultSpec::NextN(3, kWalFiles));
    faults_.SetFault(FaultOp::kSync, FaultSpec::Random(0.5));
    std::this_thread::yield();
    faults_.ClearAllFaults();
    (void)faults_.counters();
    ++flips;
  }
  stop = true;
  writer.join();
  FaultCounters c = faults_.counters();
  EXPECT_GT(flips, 10u);
  EXPECT_EQ(c.Seen(FaultOp::kWrite), appends.load());
  EXPECT_EQ(c.Seen(FaultOp::kSync), appends.load());
  EXPECT_EQ(c.TotalInjected(), failures.load());
}

// ---------------------------------------------------------------------------
// Plain RocksDB, for what TaskStore cannot show (DB::Resume).

std::unique_ptr<rocksdb::DB> OpenPlainDb(const std::string& path,
                                         rocksdb::Env* env) {
  rocksdb::Options options;
  options.env = env;
  options.create_if_missing = true;
  options.recycle_log_file_num = 4;  // as TaskStore
  options.avoid_unnecessary_blocking_io = true;
  options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, path, &db);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return std::unique_ptr<rocksdb::DB>(db);
}

class PlainRocksTest : public ::testing::Test {
 protected:
  rocksdb::WriteOptions Sync() {
    rocksdb::WriteOptions wo;
    wo.sync = true;
    return wo;
  }
  TempDir dir_;
  FaultInjectionEnv faults_;
};

TEST_F(PlainRocksTest, ResumeDoesNotRecoverFromAWalSyncFailure) {
  auto db = OpenPlainDb(dir_.Sub("db"), faults_.env());
  ASSERT_TRUE(db);
  ASSERT_TRUE(db->Put(Sync(), "a", "1").ok());
  faults_.SetFault(FaultOp::kSync, FaultSpec::NextN(1, kWalFiles));
  rocksdb::Status first = db->Put(Sync(), "b", "2");
  ASSERT_TRUE(first.IsIOError()) << first.ToString();
  ASSERT_FALSE(faults_.FaultArmed(FaultOp::kSync));

  // The disk is fine again, yet every write repeats the first error...
  rocksdb::Status s = db->Put(Sync(), "c", "3");
  EXPECT_TRUE(s.IsIOError());
  EXPECT_EQ(s.ToString(), first.ToString());
  // ... Resume() refuses with it ...
  s = db->Resume();
  EXPECT_EQ(s.ToString(), first.ToString());
  EXPECT_TRUE(db->Put(Sync(), "c", "3").IsIOError());
  // ... and nothing recovers by itself.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(db->Put(Sync(), "c", "3").IsIOError());
  std::string value;
  EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), "a", &value).ok());

  // Reopening does.
  db.reset();
  db = OpenPlainDb(dir_.Sub("db"), faults_.env());
  ASSERT_TRUE(db);
  EXPECT_TRUE(db->Put(Sync(), "c", "3").ok());
}

TEST_F(PlainRocksTest, ResumeIsBusyWhileRocksDbRecoversFromNoSpace) {
  auto db = OpenPlainDb(dir_.Sub("db"), faults_.env());
  ASSERT_TRUE(db);
  FaultSpec no_space = FaultSpec::Always(kAllFiles);
  no_space.error = FaultError::kNoSpace;
  faults_.SetFault(FaultOp::kWrite, no_space);
  rocksdb::Status s = db->Put(Sync(), "a", "1");
  EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
  s = db->Resume();
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
}

TEST(MemEnvTest, WrapsAnInMemoryBase) {
  std::unique_ptr<rocksdb::Env> mem(
      rocksdb::NewMemEnv(rocksdb::Env::Default()));
  FaultInjectionEnv faults(mem.get());
  std::unique_ptr<rocksdb::DB> db = OpenPlainDb("/mem/db", faults.env());
  ASSERT_TRUE(db);
  rocksdb::WriteOptions wo;
  wo.sync = true;
  ASSERT_TRUE(db->Put(wo, "a", "1").ok());
  faults.SetFault(FaultOp::kWrite, FaultSpec::Always(kWalFiles));
  EXPECT_TRUE(db->Put(wo, "b", "2").IsIOError());
  faults.ClearAllFaults();
  db.reset();
  ASSERT_TRUE(faults.DropUnsyncedData().ok());
  db = OpenPlainDb("/mem/db", faults.env());
  ASSERT_TRUE(db);
  std::string value;
  EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), "a", &value).ok());
  EXPECT_GT(faults.counters().Seen(FaultOp::kWrite, kWalFiles), 0u);
}

// ---------------------------------------------------------------------------
// TaskStore on the env.

spool::testing::StoredTask NewTask(TaskId id, uint64_t sequence) {
  spool::testing::StoredTask t = spool::testing::PendingTask(
      id, "t", sequence, "payload-" + std::to_string(id));
  t.state.max_attempts = 3;
  return t;
}

// The ids of every task in `tasks`, in order; the scan's error, if any.
Status ListIds(const TaskStore& store, std::vector<TaskId>* ids) {
  return store.ScanTasks(ColumnFamily::kTasks, 0,
                         [&](TaskId id, TaskBytes&, const Status&) {
                           ids->push_back(id);
                           return true;
                         });
}

class FaultStoreTest : public ::testing::Test {
 protected:
  Status Open(std::unique_ptr<TaskStore>* store,
              Durability durability = Durability::kSync) {
    StoreOptions options;
    options.path = dir_.Sub("db");
    options.durability = durability;
    options.env = faults_.env();
    return TaskStore::Open(options, store);
  }

  std::unique_ptr<TaskStore> MustOpen(
      Durability durability = Durability::kSync) {
    std::unique_ptr<TaskStore> store;
    Status s = Open(&store, durability);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return store;
  }

  static Status Insert(TaskStore* store, TaskId id) {
    WriteTxn txn(store);
    spool::testing::InsertTask(&txn, NewTask(id, txn.NextSequence()));
    return store->Commit(&txn);
  }

  // Whether task `id` is in the store, intact: its spec and state, both
  // readable (a commit writes them together). Fails the test on a read
  // error or a damaged value.
  static bool Has(const TaskStore& store, TaskId id) {
    TaskBytes task;
    Status s = store.GetTask(id, &task);
    if (s.IsNotFound()) return false;
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) return false;
    Status v = task.Verify(id);
    EXPECT_TRUE(v.ok()) << v.ToString();
    SpecRecord spec;
    Status d = DecodeSpec(id, task.spec(), &spec);
    EXPECT_TRUE(d.ok()) << d.ToString();
    EXPECT_EQ(spec.payload, "payload-" + std::to_string(id));
    return v.ok();
  }

  // What a crash leaves: nothing more reaches the disk (every write and sync
  // fails while the store closes), then the unsynced data is dropped.
  void CrashAndPowerCut(std::unique_ptr<TaskStore>* store) {
    faults_.SetFault(FaultOp::kWrite, FaultSpec::Always());
    faults_.SetFault(FaultOp::kSync, FaultSpec::Always());
    store->reset();
    faults_.ClearAllFaults();
    Status s = faults_.DropUnsyncedData();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  TempDir dir_;
  FaultInjectionEnv faults_;
};

// Test 1.
TEST_F(FaultStoreTest, WalSyncFailureFailsCommitUntilTheStoreIsReopened) {
  auto store = MustOpen();
  ASSERT_TRUE(Insert(store.get(), 1).ok());

  faults_.SetFault(FaultOp::kSync, FaultSpec::NextN(1, kWalFiles));
  Status first = Insert(store.get(), 2);
  ASSERT_TRUE(first.IsIOError()) << first.ToString();
  EXPECT_NE(first.message().find("injected sync fault on wal"),
            std::string::npos);
  EXPECT_EQ(faults_.counters().Injected(FaultOp::kSync, kWalFiles), 1u);

  // The fault is gone, but the DB stays in its error state: every commit
  // fails with the first error, and waiting does not change that.
  ASSERT_FALSE(faults_.FaultArmed(FaultOp::kSync));
  auto deadline = Clock::now() + std::chrono::milliseconds(500);
  TaskId id = 3;
  while (Clock::now() < deadline) {
    Status s = Insert(store.get(), id++);
    ASSERT_TRUE(s.IsIOError()) << s.ToString();
    EXPECT_EQ(s.message(), first.message());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  // Close and reopen: writes resume, task 1 is there, the tasks refused in
  // the error state are not.
  store.reset();
  store = MustOpen();
  ASSERT_TRUE(store);
  EXPECT_TRUE(Has(*store, 1));
  for (TaskId refused = 3; refused < id; ++refused) {
    EXPECT_FALSE(Has(*store, refused)) << refused;
  }
  ASSERT_TRUE(Insert(store.get(), 100).ok());
  EXPECT_TRUE(Has(*store, 100));
}

// Test 1, for the other files a commit depends on.
struct FlushFault {
  const char* name;
  FaultOp op;
  FileKindSet files;
};

void PrintTo(const FlushFault& fault, std::ostream* os) { *os << fault.name; }

class FlushFaultTest : public FaultStoreTest,
                       public ::testing::WithParamInterface<FlushFault> {};

TEST_P(FlushFaultTest, FailedFlushStopsCommitsUntilReopen) {
  auto store = MustOpen();
  ASSERT_TRUE(Insert(store.get(), 1).ok());
  faults_.SetFault(GetParam().op, FaultSpec::Always(GetParam().files));
  Status s = store->Flush();
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  faults_.ClearAllFaults();
  s = Insert(store.get(), 2);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_TRUE(Has(*store, 1));  // reads still work
  store.reset();
  store = MustOpen();
  ASSERT_TRUE(store);
  EXPECT_TRUE(Has(*store, 1));
  EXPECT_FALSE(Has(*store, 2));
  EXPECT_TRUE(Insert(store.get(), 3).ok());
  EXPECT_TRUE(store->Flush().ok());
}

INSTANTIATE_TEST_SUITE_P(
    Files, FlushFaultTest,
    ::testing::Values(
        FlushFault{"SstWrite", FaultOp::kWrite, kSstFiles},
        FlushFault{"SstSync", FaultOp::kSync, kSstFiles},
        FlushFault{"ManifestWrite", FaultOp::kWrite, kManifestFiles},
        FlushFault{"ManifestSync", FaultOp::kSync, kManifestFiles}),
    [](const ::testing::TestParamInfo<FlushFault>& param_info) {
      return param_info.param.name;
    });

// Test 2.
TEST_F(FaultStoreTest, ReadsKeepWorkingWhileWritesFail) {
  auto store = MustOpen();
  ASSERT_TRUE(Insert(store.get(), 1).ok());
  ASSERT_TRUE(store->Flush().ok());          // task 1 in an SST
  ASSERT_TRUE(Insert(store.get(), 2).ok());  // task 2 in the memtable

  faults_.SetFault(FaultOp::kWrite, FaultSpec::Always());
  faults_.SetFault(FaultOp::kSync, FaultSpec::Always());
  for (TaskId id = 3; id < 6; ++id) {
    EXPECT_TRUE(Insert(store.get(), id).IsIOError());
  }
  EXPECT_TRUE(Has(*store, 1));
  EXPECT_TRUE(Has(*store, 2));
  EXPECT_FALSE(Has(*store, 3));
  std::vector<TaskId> ids;
  Status s = ListIds(*store, &ids);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ids, (std::vector<TaskId>{1, 2}));
  std::array<uint64_t, kTaskStatusCount> counts{};
  ASSERT_TRUE(store->NewReadView()->CountByStatus(&counts).ok());
  EXPECT_EQ(counts[static_cast<size_t>(TaskStatus::kPending)], 2u);
  EXPECT_EQ(faults_.counters().Injected(FaultOp::kRead), 0u);
}

// Test 3.
TEST_F(FaultStoreTest, WrittenButSyncFailedReappearsOnReopen) {
  auto store = MustOpen();
  ASSERT_TRUE(Insert(store.get(), 1).ok());
  faults_.SetFault(FaultOp::kSync, FaultSpec::NextN(1, kWalFiles));
  ASSERT_TRUE(Insert(store.get(), 2).IsIOError());
  EXPECT_FALSE(Has(*store, 2));  // not in the memtable
  EXPECT_GT(faults_.UnsyncedBytes(), 0u);

  // A process restart: the batch is in the WAL file and RocksDB replays it.
  // The caller was told IOError; the commit happened anyway.
  store.reset();
  store = MustOpen();
  ASSERT_TRUE(store);
  EXPECT_TRUE(Has(*store, 1));
  EXPECT_TRUE(Has(*store, 2));
}

TEST_F(FaultStoreTest, WrittenButSyncFailedIsGoneAfterAPowerCut) {
  auto store = MustOpen();
  ASSERT_TRUE(Insert(store.get(), 1).ok());
  faults_.SetFault(FaultOp::kSync, FaultSpec::NextN(1, kWalFiles));
  ASSERT_TRUE(Insert(store.get(), 2).IsIOError());
  CrashAndPowerCut(&store);
  store = MustOpen();
  ASSERT_TRUE(store);
  EXPECT_TRUE(Has(*store, 1));
  EXPECT_FALSE(Has(*store, 2));
}

TEST_F(FaultStoreTest, SyncThatWorkedButReportedFailureSurvivesAPowerCut) {
  auto store = MustOpen();
  ASSERT_TRUE(Insert(store.get(), 1).ok());
  FaultSpec spec = FaultSpec::NextN(1, kWalFiles);
  spec.sync_persists = true;
  faults_.SetFault(FaultOp::kSync, spec);
  ASSERT_TRUE(Insert(store.get(), 2).IsIOError());
  CrashAndPowerCut(&store);
  store = MustOpen();
  ASSERT_TRUE(store);
  EXPECT_TRUE(Has(*store, 1));
  EXPECT_TRUE(Has(*store, 2));
}

TEST_F(FaultStoreTest, FailedWalWriteLeavesTheBatchOut) {
  auto store = MustOpen();
  ASSERT_TRUE(Insert(store.get(), 1).ok());
  faults_.SetFault(FaultOp::kWrite, FaultSpec::NextN(1, kWalFiles));
  ASSERT_TRUE(Insert(store.get(), 2).IsIOError());
  store.reset();
  store = MustOpen();
  ASSERT_TRUE(store);
  EXPECT_TRUE(Has(*store, 1));
  EXPECT_FALSE(Has(*store, 2));
}

// Test 4.
TEST_F(FaultStoreTest, NoSpaceFailsCommitsThenRecoversWithoutReopen) {
  auto store = MustOpen();
  ASSERT_TRUE(Insert(store.get(), 1).ok());
  FaultSpec spec = FaultSpec::Always(kAllFiles);
  spec.error = FaultError::kNoSpace;
  faults_.SetFault(FaultOp::kWrite, spec);
  Status s = Insert(store.get(), 2);
  ASSERT_TRUE(s.IsIOError()) << s.ToString();
  // spool has no code of its own for it; the text tells.
  EXPECT_NE(s.message().find("No space left on device"), std::string::npos)
      << s.ToString();
  EXPECT_TRUE(Insert(store.get(), 3).IsIOError());
  EXPECT_TRUE(Has(*store, 1));
  // RocksDB tries to recover at once, by flushing; with the disk still full
  // that flush fails too.
  ASSERT_TRUE(WaitUntil(
      [&] {
        return faults_.counters().Injected(FaultOp::kWrite, kSstFiles) > 0;
      },
      std::chrono::seconds(5)));
  EXPECT_TRUE(Insert(store.get(), 4).IsIOError());

  // Space comes back. RocksDB's SstFileManager retries on its own (about
  // every 5 s); no reopen and no Resume is needed.
  faults_.ClearAllFaults();
  auto start = Clock::now();
  TaskId id = 10;
  ASSERT_TRUE(WaitUntil([&] { return Insert(store.get(), id++).ok(); },
                        std::chrono::seconds(12)));
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      Clock::now() - start);
  RecordProperty("no_space_recovery_ms", static_cast<int>(took.count()));
  std::printf("writes resumed %lld ms after space came back\n",
              static_cast<long long>(took.count()));
  EXPECT_TRUE(Has(*store, id - 1));
  EXPECT_FALSE(Has(*store, 2));
  store.reset();
  store = MustOpen();
  ASSERT_TRUE(store);
  EXPECT_TRUE(Has(*store, 1));
  EXPECT_TRUE(Has(*store, id - 1));
  EXPECT_FALSE(Has(*store, 2));
}

// RocksDB 7.8.3 as Debian builds it (assert() enabled) aborts the process
// when the first WAL write after open (or after a flush that left every
// memtable empty) fails with NoSpace and the writer writes again once RocksDB
// has recovered by itself: the recovery has nothing to flush, keeps the failed
// WAL writer, and the next write trips
// WritableFileWriter::AssertFalseAndGetStatusForPrevError. Closing and
// reopening the store at once avoids it.
TEST_F(FaultStoreTest, NoSpaceRightAfterOpenIsSafeWhenTheStoreIsReopened) {
  {
    auto store = MustOpen();
    ASSERT_TRUE(Insert(store.get(), 1).ok());
  }
  auto store = MustOpen();  // the open flushed what the WAL held
  ASSERT_TRUE(store);
  FaultSpec spec = FaultSpec::NextN(1, kWalFiles);
  spec.error = FaultError::kNoSpace;
  faults_.SetFault(FaultOp::kWrite, spec);
  ASSERT_TRUE(Insert(store.get(), 2).IsIOError());
  store.reset();
  store = MustOpen();
  ASSERT_TRUE(store);
  for (TaskId id = 3; id < 50; ++id) ASSERT_TRUE(Insert(store.get(), id).ok());
  EXPECT_TRUE(Has(*store, 1));
  EXPECT_FALSE(Has(*store, 2));
  EXPECT_TRUE(Has(*store, 49));
}

// The same, retrying on the same store: aborts the test binary with RocksDB
// 7.8.3 (see above), so it is disabled. Run it to check a new RocksDB:
//   fault_env_test --gtest_also_run_disabled_tests
//     --gtest_filter='*NoSpaceRightAfterOpenThenRetry*'
TEST_F(FaultStoreTest, DISABLED_NoSpaceRightAfterOpenThenRetryOnTheSameStore) {
  {
    auto store = MustOpen();
    ASSERT_TRUE(Insert(store.get(), 1).ok());
  }
  auto store = MustOpen();
  ASSERT_TRUE(store);
  FaultSpec spec = FaultSpec::NextN(1, kWalFiles);
  spec.error = FaultError::kNoSpace;
  faults_.SetFault(FaultOp::kWrite, spec);
  ASSERT_TRUE(Insert(store.get(), 2).IsIOError());
  TaskId id = 3;
  EXPECT_TRUE(WaitUntil([&] { return Insert(store.get(), id++).ok(); },
                        std::chrono::seconds(10)));
}

// Test 5.
TEST_F(FaultStoreTest, ReadFailuresSurfaceAsIOError) {
  // Enough tasks for many data blocks: a block read once sits in the block
  // cache, and later reads of it never reach the file.
  constexpr TaskId kTasks = 2000;
  auto store = MustOpen();
  for (TaskId first = 1; first <= kTasks; first += 100) {
    WriteTxn txn(store.get());
    for (TaskId id = first; id < first + 100; ++id) {
      spool::testing::InsertTask(&txn, NewTask(id, txn.NextSequence()));
    }
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  ASSERT_TRUE(store->Flush().ok());

  faults_.SetFault(FaultOp::kRead, FaultSpec::Always(kSstFiles));
  TaskBytes task;
  Status s = store->GetTask(5, &task);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  std::string bytes;
  s = store->GetSpec(6, &bytes);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  StateRecord state;
  s = store->ReadState(7, &state);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  std::vector<TaskId> ids;
  s = ListIds(*store, &ids);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  // Writes do not need the failed reads.
  EXPECT_TRUE(Insert(store.get(), kTasks + 1).ok());

  // Random read faults: every answer is the task or IOError.
  faults_.SetFault(FaultOp::kRead, FaultSpec::Random(0.5, kSstFiles));
  int errors = 0;
  for (TaskId id = 1; id <= kTasks; ++id) {
    s = store->GetTask(id, &task);
    if (s.IsIOError()) {
      ++errors;
    } else {
      ASSERT_TRUE(s.ok()) << id << ": " << s.ToString();
      ASSERT_TRUE(task.Verify(id).ok()) << id;
    }
  }
  EXPECT_GT(errors, 5);

  faults_.ClearAllFaults();
  for (TaskId id = 1; id <= kTasks + 1; ++id) {
    ASSERT_TRUE(Has(*store, id)) << id;
  }
  // Each failed read met at least one injected fault.
  EXPECT_GE(faults_.counters().Injected(FaultOp::kRead, kSstFiles),
            static_cast<uint64_t>(4 + errors));
}

TEST_F(FaultStoreTest, ReadFailureAtOpenFailsOpenThenOpenWorks) {
  {
    auto store = MustOpen();
    ASSERT_TRUE(Insert(store.get(), 1).ok());
  }
  faults_.SetFault(FaultOp::kRead, FaultSpec::Always(kManifestFiles));
  std::unique_ptr<TaskStore> store;
  Status s = Open(&store);
  EXPECT_TRUE(s.IsIOError() || s.IsCorruption()) << s.ToString();
  EXPECT_FALSE(store);
  faults_.ClearAllFaults();
  store = MustOpen();
  ASSERT_TRUE(store);
  EXPECT_TRUE(Has(*store, 1));
}

// Relaxed vs sync: the power-cut simulation is what tells them apart.
TEST_F(FaultStoreTest, PowerCutLosesRelaxedCommitsButNotSyncedOnes) {
  auto relaxed = MustOpen(Durability::kRelaxed);
  for (TaskId id = 1; id <= 50; ++id) {
    ASSERT_TRUE(Insert(relaxed.get(), id).ok());
  }
  CrashAndPowerCut(&relaxed);
  auto store = MustOpen();
  ASSERT_TRUE(store);
  int survived = 0;
  for (TaskId id = 1; id <= 50; ++id) survived += Has(*store, id);
  EXPECT_LT(survived, 50) << "kRelaxed never syncs the WAL";

  for (TaskId id = 101; id <= 150; ++id) {
    ASSERT_TRUE(Insert(store.get(), id).ok());
  }
  CrashAndPowerCut(&store);
  store = MustOpen();
  ASSERT_TRUE(store);
  for (TaskId id = 101; id <= 150; ++id) EXPECT_TRUE(Has(*store, id)) << id;
}

// Faults armed and cleared from another thread while the writer commits: no
// crash, no hang, and what was acknowledged survives a power cut.
TEST_F(FaultStoreTest, FaultsFlippedFromAnotherThreadWhileCommitting) {
  std::atomic<bool> stop{false};
  std::set<TaskId> acked;
  TaskId attempted = 0;
  int failures = 0;
  std::unique_ptr<TaskStore> store = MustOpen();
  ASSERT_TRUE(store);
  std::thread writer([&] {
    for (TaskId id = 1; id <= 3000 && !stop.load(); ++id) {
      attempted = id;
      if (Insert(store.get(), id).ok()) {
        acked.insert(id);
        continue;
      }
      ++failures;
      store.reset();
      // The other thread may fail the open too; it never holds a fault long.
      for (int attempt = 0; attempt < 1000 && !store; ++attempt) {
        if (!Open(&store).ok()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      }
      if (!store) {
        ADD_FAILURE() << "could not reopen";
        return;
      }
    }
  });
  const FaultSpec kSpecs[] = {
      FaultSpec::NextN(1, kWalFiles), FaultSpec::Always(kWalFiles),
      FaultSpec::Random(0.3, kWalFiles), FaultSpec::NextN(2)};
  auto deadline = Clock::now() + std::chrono::milliseconds(1500);
  for (int round = 0; Clock::now() < deadline; ++round) {
    const FaultSpec& spec = kSpecs[round % 4];
    faults_.SetFault(round % 3 == 0 ? FaultOp::kWrite : FaultOp::kSync, spec);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    faults_.ClearAllFaults();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stop = true;
  writer.join();
  ASSERT_TRUE(store);
  CrashAndPowerCut(&store);
  store = MustOpen();
  ASSERT_TRUE(store);
  size_t lost = 0;
  for (TaskId id : acked) lost += !Has(*store, id);
  EXPECT_EQ(lost, 0u);
  EXPECT_GT(failures, 0);
  EXPECT_GT(acked.size(), 10u);
  std::printf("%llu attempted, %zu acked, %d failed\n",
              static_cast<unsigned long long>(attempted), acked.size(),
              failures);
}

// The writer keeps the states it committed of tasks it will change next
// (storage/state_cache.h): running ones always, queued ones up to
// StoreOptions::state_cache_entries. GetState of a kept state reads
// nothing: with every table read failing, only kept states can be had.
TEST_F(FaultStoreTest, KeptStatesAreReadWithoutTouchingTheDisk) {
  for (size_t capacity : {size_t{0}, size_t{2}, size_t{65536}}) {
    SCOPED_TRACE("state_cache_entries " + std::to_string(capacity));
    StoreOptions options;
    options.path = dir_.Sub("cache-" + std::to_string(capacity));
    options.env = faults_.env();
    options.state_cache_entries = capacity;
    std::unique_ptr<TaskStore> store;
    ASSERT_TRUE(TaskStore::Open(options, &store).ok());
    auto readable = [&] {
      faults_.SetFault(FaultOp::kRead, FaultSpec::Always(kSstFiles));
      size_t ok = 0;
      for (TaskId id = 1; id <= 3; ++id) {
        WriteTxn txn(store.get());
        StateRecord state;
        Status s = txn.GetState(id, &state);
        if (s.ok()) {
          EXPECT_EQ(state.id, id);
          ++ok;
        } else {
          EXPECT_TRUE(s.IsIOError()) << s.ToString();
        }
      }
      faults_.ClearAllFaults();
      return ok;
    };
    auto transition = [&](TaskStatus status) {
      WriteTxn txn(store.get());
      for (TaskId id = 1; id <= 3; ++id) {
        StateRecord state;
        ASSERT_TRUE(txn.GetState(id, &state).ok());
        state.status = status;
        txn.Update(state);
      }
      ASSERT_TRUE(store->Commit(&txn).ok());
      ASSERT_TRUE(store->Flush().ok());  // nothing left in the memtable
    };
    {
      WriteTxn txn(store.get());
      for (TaskId id = 1; id <= 3; ++id) {
        spool::testing::InsertTask(&txn, NewTask(id, txn.NextSequence()));
      }
      ASSERT_TRUE(store->Commit(&txn).ok());
      ASSERT_TRUE(store->Flush().ok());
    }
    // Queued: as many as the cache holds.
    EXPECT_EQ(readable(), std::min<size_t>(capacity, 3));
    transition(TaskStatus::kRunning);
    EXPECT_EQ(readable(), 3u) << "running states are always kept";
    transition(TaskStatus::kSucceeded);
    EXPECT_EQ(readable(), 0u) << "a finished task leaves";
    EXPECT_GT(faults_.counters().Injected(FaultOp::kRead, kSstFiles), 0u);
    store.reset();
  }
}

// A transition writes a task's state and its new failure entries (and
// removes the oldest) in one batch: whatever faults and power cuts do, a
// task's history matches its state's failures_total, and no acknowledged
// failure is lost.
TEST_F(FaultStoreTest, AStateAndItsFailureHistoryCommitTogether) {
  constexpr TaskId kTasks = 4;
  auto store = MustOpen();
  ASSERT_TRUE(store);
  for (TaskId id = 1; id <= kTasks; ++id) {
    ASSERT_TRUE(Insert(store.get(), id).ok());
  }
  faults_.Reseed(20240612);
  auto arm = [this] {
    faults_.SetFault(FaultOp::kWrite, FaultSpec::Random(0.05, kWalFiles));
    faults_.SetFault(FaultOp::kSync, FaultSpec::Random(0.05, kWalFiles));
  };
  std::map<TaskId, uint32_t> acked;
  int failed = 0;
  auto reopen = [&](bool power_cut) {
    if (power_cut) {
      CrashAndPowerCut(&store);
    } else {
      store.reset();
    }
    faults_.ClearAllFaults();
    store = MustOpen();
    arm();
  };
  arm();
  for (int round = 0; round < 240; ++round) {
    ASSERT_TRUE(store);
    TaskId id = 1 + static_cast<TaskId>(round) % kTasks;
    WriteTxn txn(store.get());
    StateRecord state;
    Status s = txn.GetState(id, &state);
    ASSERT_TRUE(s.ok()) << s.ToString();
    // One to three failures per transition.
    for (int f = 0; f <= round % 3; ++f) {
      ++state.attempts;
      RecordFailure(&state, state.attempts, round,
                    "attempt " + std::to_string(state.attempts));
    }
    uint32_t total = state.failures_total;
    txn.Update(std::move(state));
    s = store->Commit(&txn);
    if (s.ok()) {
      acked[id] = total;
      continue;
    }
    ASSERT_TRUE(s.IsIOError()) << s.ToString();
    ++failed;
    reopen(round % 2 == 0);
  }
  CrashAndPowerCut(&store);
  store = MustOpen();
  ASSERT_TRUE(store);
  EXPECT_GT(failed, 0);
  for (TaskId id = 1; id <= kTasks; ++id) {
    TaskBytes task;
    ASSERT_TRUE(store->GetTask(id, &task).ok());
    ASSERT_TRUE(task.Verify(id).ok());
    uint32_t total = task.view().state->failures_total();
    EXPECT_GE(total, acked[id]) << "task " << id << " lost acknowledged work";
    EXPECT_EQ(task.view().state->attempts(), total);
    // The history on disk: exactly the newest entries, numbered up to the
    // total, each the attempt of its number.
    uint32_t first =
        total > kMaxFailureHistory ? total - kMaxFailureHistory : 0;
    std::vector<uint32_t> numbers;
    std::string prefix = TaskPrefix(id);
    prefix.push_back(static_cast<char>(TaskValueKind::kFailure));
    ASSERT_TRUE(store
                    ->ForEachEntry(ColumnFamily::kTasks, prefix,
                                   [&](std::string_view key, std::string_view) {
                                     TaskId owner = 0;
                                     TaskValueKind kind;
                                     uint32_t number = 0;
                                     EXPECT_TRUE(DecodeTaskKey(key, &owner,
                                                               &kind, &number));
                                     numbers.push_back(number);
                                     return Status::OK();
                                   })
                    .ok());
    std::vector<uint32_t> want;
    for (uint32_t n = first; n < total; ++n) want.push_back(n);
    EXPECT_EQ(numbers, want) << "task " << id;
    ASSERT_EQ(task.view().failures->size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ((*task.view().failures)[i]->attempt(), want[i] + 1);
    }
  }
  size_t mismatches = 1;
  ASSERT_TRUE(store->CheckIndexes(&mismatches).ok());
  EXPECT_EQ(mismatches, 0u);
}

// Test 6: nothing acknowledged is lost, with faults at random everywhere and
// closes, crashes and power cuts in between.
TEST_F(FaultStoreTest, NoAcknowledgedCommitIsLostUnderRandomFaults) {
  uint64_t seed = 20240611;
  if (const char* env = std::getenv("SPOOL_FAULT_SEED")) {
    seed = std::strtoull(env, nullptr, 10);
  }
  SCOPED_TRACE("seed " + std::to_string(seed) +
               " (rerun with SPOOL_FAULT_SEED=" + std::to_string(seed) + ")");
  faults_.Reseed(seed);
  uint64_t rng = seed;
  auto next = [&rng] {  // xorshift64*, for the test's own choices
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1Dull;
  };
  if (rng == 0) rng = 1;

  auto arm = [this] {
    faults_.SetFault(FaultOp::kWrite, FaultSpec::Random(0.004));
    faults_.SetFault(FaultOp::kSync, FaultSpec::Random(0.004));
    faults_.SetFault(FaultOp::kRead, FaultSpec::Random(0.002));
  };

  // 2,000 commits, unless the disk is so slow (each commit is an fdatasync,
  // and other jobs may share the disk) that the budget runs out first.
  constexpr TaskId kCommits = 2000;
  constexpr TaskId kMinCommits = 500;
  constexpr auto kBudget = std::chrono::seconds(14);
  const auto start = Clock::now();
  TaskId last = 0;
  std::set<TaskId> acked;
  int failed_commits = 0, failed_opens = 0, reopens = 0, power_cuts = 0;
  std::unique_ptr<TaskStore> store;

  // Opens with the faults armed; an open that fails is retried (a failed
  // open may leave unsynced files, so sometimes the power goes too).
  auto reopen = [&](bool crash) {
    ++reopens;
    if (crash) {
      CrashAndPowerCut(&store);
      ++power_cuts;
      arm();
    } else {
      store.reset();
    }
    for (int attempt = 0; attempt < 200; ++attempt) {
      Status s = Open(&store);
      if (s.ok()) return;
      ++failed_opens;
      // An injected fault, never damage: Corruption would mean a power cut
      // left a store that cannot open.
      ASSERT_TRUE(s.IsIOError()) << s.ToString();
      if (next() % 2 == 0) {
        Status d = faults_.DropUnsyncedData();
        ASSERT_TRUE(d.ok()) << d.ToString();
      }
    }
    FAIL() << "could not open the store in 200 attempts";
  };

  arm();
  reopen(false);
  ASSERT_TRUE(store);
  for (TaskId id = 1; id <= kCommits; ++id) {
    if (id > kMinCommits && Clock::now() - start > kBudget) break;
    last = id;
    Status s = Insert(store.get(), id);
    if (s.ok()) {
      acked.insert(id);
    } else {
      ASSERT_TRUE(s.IsIOError()) << s.ToString();
      ++failed_commits;
      // The error state lasts until a reopen (see the top of the file).
      reopen(next() % 2 == 0);
      ASSERT_TRUE(store);
    }
    if (id % 500 == 0) {
      // Flushes put SST and MANIFEST writes and SST reads in the way. Few of
      // them: after a failed flush RocksDB's flush thread sleeps 1 s, and a
      // close waits for it.
      if (!store->Flush().ok()) reopen(next() % 2 == 0);
      ASSERT_TRUE(store);
    }
    if (id % 400 == 0) {
      reopen(/*crash=*/true);
      ASSERT_TRUE(store);
    }
    ASSERT_LT(Clock::now() - start, std::chrono::seconds(18))
        << "too slow at commit " << id;
  }
  const double loop_seconds =
      std::chrono::duration<double>(Clock::now() - start).count();

  CrashAndPowerCut(&store);
  store = MustOpen();
  ASSERT_TRUE(store);
  size_t lost = 0, ghosts = 0;
  for (TaskId id = 1; id <= last; ++id) {
    bool present = Has(*store, id);
    if (acked.count(id) && !present) {
      ++lost;
      ADD_FAILURE() << "acknowledged task " << id << " lost";
      if (lost > 10) break;
    }
    if (!acked.count(id) && present) ++ghosts;
  }
  FaultCounters c = faults_.counters();
  char timing[64];
  std::snprintf(timing, sizeof(timing), "%.1f", loop_seconds);
  std::string summary = std::to_string(last) + " commits in " + timing +
                        " s: acked " + std::to_string(acked.size()) +
                        ", failed commits " + std::to_string(failed_commits) +
                        ", ghosts " + std::to_string(ghosts) + ", reopens " +
                        std::to_string(reopens) + ", failed opens " +
                        std::to_string(failed_opens) + ", power cuts " +
                        std::to_string(power_cuts) + "\n" + c.ToString();
  std::printf("%s", summary.c_str());
  EXPECT_EQ(lost, 0u) << summary;
  // The run must have exercised something.
  EXPECT_GT(failed_commits, 3) << summary;
  EXPECT_GT(acked.size(), last / 2) << summary;
  EXPECT_GT(c.Injected(FaultOp::kSync, kWalFiles), 0u) << summary;
  EXPECT_GT(c.Injected(FaultOp::kWrite, kWalFiles), 0u) << summary;
}

}  // namespace
}  // namespace spool::storage
