// Online backups and restores (spool/backup.h) on RocksDB on disk: a backup
// taken while callers enqueue holds every task acknowledged before it
// began, in the state it had then; a damaged backup is refused, naming the
// file; backups are listed, kept and shared; an encrypted store stays
// encrypted; and every call that cannot work says why.

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <spool/backup.h>
#include <spool/encryption.h>
#include <spool/runtime.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/runtime_testing.h"

namespace spool {
namespace {

using namespace std::chrono_literals;
using spool::testing::Await;
using spool::testing::FilesContaining;
using spool::testing::OpenOrDie;
using spool::testing::TempDir;
using ::testing::HasSubstr;

constexpr char kPayloadMarker[] = "BKPq7Xv2Lk9Wm4";

class BackupTest : public ::testing::Test {
 protected:
  // Opens `options` with a handler for "work", not started: no handler
  // changes a state behind the test's back.
  std::unique_ptr<Runtime> OpenQueue(const Options& options) {
    std::unique_ptr<Runtime> runtime = OpenOrDie(options);
    if (runtime) {
      EXPECT_TRUE(runtime->RegisterHandler("work", spool::testing::Ok).ok());
    }
    return runtime;
  }

  Options StoreOptions(const std::string& name) {
    Options options;
    options.path = dir_.Sub(name);
    options.workers = 2;
    options.close_timeout = 10s;
    return options;
  }

  // Enqueues `n` tasks and waits until each is stored; their ids.
  std::vector<TaskId> EnqueueStored(Runtime* runtime, int n,
                                    const std::string& payload = "p") {
    std::vector<Ticket> tickets;
    for (int i = 0; i < n; ++i) {
      tickets.push_back(runtime->Enqueue("work", payload));
    }
    std::vector<TaskId> ids;
    for (const Ticket& ticket : tickets) {
      Result<TaskId> id = Await(ticket.stored);
      EXPECT_TRUE(id.ok()) << id.status().ToString();
      if (id.ok()) ids.push_back(*id);
    }
    return ids;
  }

  // The files of backup directory `dir` that hold table data, largest
  // first.
  static std::vector<std::filesystem::path> TableFiles(const std::string& dir) {
    std::vector<std::filesystem::path> files;
    for (const auto& entry :
         std::filesystem::recursive_directory_iterator(dir)) {
      if (entry.is_regular_file() && entry.path().extension() == ".sst") {
        files.push_back(entry.path());
      }
    }
    std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) {
      return std::filesystem::file_size(a) > std::filesystem::file_size(b);
    });
    return files;
  }

  // Flips one bit of the byte at `offset` of `file`; twice restores it.
  static void FlipByte(const std::filesystem::path& path, uintmax_t offset) {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(static_cast<std::streamoff>(offset));
    char byte = 0;
    file.get(byte);
    file.seekp(static_cast<std::streamoff>(offset));
    file.put(static_cast<char>(byte ^ 0x10));
  }

  TempDir dir_;
};

// The guarantee: every task whose Stored resolved before Backup() was
// called is in the backup, with the state it had then; changes made after
// the backup resolved are not. Four threads enqueue all the while.
TEST_F(BackupTest, UnderLoadHoldsEveryTaskAcknowledgedBeforeItBegan) {
  Options options = StoreOptions("q");
  options.backup_dir = dir_.Sub("backups");
  std::unique_ptr<Runtime> runtime = OpenQueue(options);
  ASSERT_NE(runtime, nullptr);

  std::mutex mutex;
  std::vector<TaskId> acknowledged;  // GUARDED_BY(mutex)
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      while (!stop.load()) {
        Result<TaskId> id = runtime->Enqueue("work", "payload").stored.Wait();
        if (!id.ok()) {
          failures.fetch_add(1);
          continue;
        }
        std::lock_guard<std::mutex> lock(mutex);
        acknowledged.push_back(*id);
      }
    });
  }
  struct JoinAtExit {
    std::atomic<bool>* stop;
    std::vector<std::thread>* threads;
    ~JoinAtExit() {
      stop->store(true);
      for (std::thread& t : *threads) {
        if (t.joinable()) t.join();
      }
    }
  } join_at_exit{&stop, &callers};
  auto count = [&] {
    std::lock_guard<std::mutex> lock(mutex);
    return acknowledged.size();
  };
  ASSERT_TRUE(spool::testing::WaitUntil([&] { return count() >= 2000; }, 60s))
      << failures.load() << " enqueues failed";

  std::vector<TaskId> before;
  {
    std::lock_guard<std::mutex> lock(mutex);
    before = acknowledged;
  }
  std::sort(before.begin(), before.end());
  // Cancelled before the backup: cancelled in it.
  for (size_t i = 0; i < 100; ++i) {
    ASSERT_TRUE(Await(runtime->Cancel(before[i])).ok());
  }
  Result<BackupInfo> backup = Await(runtime->Backup(), 120s);
  ASSERT_TRUE(backup.ok()) << backup.status().ToString();
  // Cancelled after the backup resolved: still pending in it.
  for (size_t i = 100; i < 200; ++i) {
    ASSERT_TRUE(Await(runtime->Cancel(before[i])).ok());
  }
  stop = true;
  for (std::thread& caller : callers) caller.join();
  callers.clear();
  EXPECT_EQ(failures.load(), 0);
  size_t total = count();
  ASSERT_TRUE(Await(runtime->Close()).ok());
  runtime.reset();

  EXPECT_EQ(backup->id, 1u);
  EXPECT_GT(backup->files, 0u);
  EXPECT_GT(backup->size_bytes, 0u);
  EXPECT_GT(backup->sequence, 0u);
  EXPECT_GT(backup->created_unix_seconds, 0);

  BackupInfo restored_from;
  Status s = RestoreBackup(options.backup_dir, dir_.Sub("restored"), {},
                           &restored_from);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(restored_from.id, backup->id);
  Options reopened = StoreOptions("restored");
  std::unique_ptr<Runtime> restored = OpenOrDie(reopened);
  ASSERT_NE(restored, nullptr);
  for (size_t i = 0; i < before.size(); ++i) {
    Result<TaskInfo> task = Await(restored->GetTask(before[i]));
    ASSERT_TRUE(task.ok()) << "task " << before[i] << ", acknowledged before "
                           << "the backup: " << task.status().ToString();
    EXPECT_EQ(task->status,
              i < 100 ? TaskStatus::kCancelled : TaskStatus::kPending)
        << "task " << before[i];
  }
  Result<StatusCounts> counts = Await(restored->CountByStatus());
  ASSERT_TRUE(counts.ok());
  uint64_t in_backup = counts->total();
  EXPECT_GE(in_backup, before.size());
  EXPECT_LE(in_backup, total);
  Result<ConsistencyReport> report = Await(restored->CheckConsistency());
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok()) << ::testing::PrintToString(report->problems);
  ASSERT_TRUE(Await(restored->Close()).ok());
}

// A restore checks every file against its size and checksum before it
// copies anything, and names the file it refuses.
TEST_F(BackupTest, RestoreRefusesABitFlippedOrTruncatedFileAndNamesIt) {
  Options options = StoreOptions("q");
  std::unique_ptr<Runtime> runtime = OpenQueue(options);
  ASSERT_NE(runtime, nullptr);
  EnqueueStored(runtime.get(), 500);
  std::string backups = dir_.Sub("backups");
  ASSERT_TRUE(Await(runtime->BackupTo(backups)).ok());
  ASSERT_TRUE(Await(runtime->Close()).ok());
  runtime.reset();

  std::vector<std::filesystem::path> tables = TableFiles(backups);
  ASSERT_FALSE(tables.empty());
  const std::filesystem::path& damaged = tables.front();
  uintmax_t size = std::filesystem::file_size(damaged);
  FlipByte(damaged, size / 2);
  std::string target = dir_.Sub("restored");
  Status s = RestoreBackup(backups, target);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_THAT(s.ToString(), HasSubstr(damaged.filename().string()));
  EXPECT_FALSE(std::filesystem::exists(target));
  s = VerifyBackup(backups, 1);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_THAT(s.ToString(), HasSubstr(damaged.filename().string()));

  // Truncated instead: flip the byte back, cut the file short.
  FlipByte(damaged, size / 2);
  ASSERT_TRUE(VerifyBackup(backups, 1).ok());
  std::filesystem::resize_file(damaged, size - 100);
  s = RestoreBackup(backups, target);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_THAT(s.ToString(), HasSubstr(damaged.filename().string()));
  EXPECT_FALSE(std::filesystem::exists(target));
}

// Backups are numbered and listed oldest first; the oldest beyond
// backup_keep go; a backup of an unchanged store shares its table files;
// each restored backup opens and holds what it held.
TEST_F(BackupTest, ListsKeepsAndSharesFiles) {
  Options options = StoreOptions("q");
  options.backup_dir = dir_.Sub("backups");
  options.backup_keep = 2;
  std::unique_ptr<Runtime> runtime = OpenQueue(options);
  ASSERT_NE(runtime, nullptr);
  EnqueueStored(runtime.get(), 300);
  Result<BackupInfo> first = Await(runtime->Backup());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  size_t tables_after_first = TableFiles(options.backup_dir).size();
  Result<BackupInfo> second = Await(runtime->Backup());
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  // Nothing changed: at most the one small table of the flush is new.
  EXPECT_LE(TableFiles(options.backup_dir).size(), tables_after_first + 2);
  EnqueueStored(runtime.get(), 200);
  Result<BackupInfo> third = Await(runtime->Backup());
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_GT(third->sequence, second->sequence);
  ASSERT_TRUE(Await(runtime->Close()).ok());
  runtime.reset();

  std::vector<BackupInfo> listed;
  ASSERT_TRUE(ListBackups(options.backup_dir, &listed).ok());
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].id, 2u);
  EXPECT_EQ(listed[1].id, 3u);
  EXPECT_EQ(listed[1].format_version, 3u);
  EXPECT_EQ(listed[1].sequence, third->sequence);

  for (uint32_t id : {2u, 3u}) {
    std::string target = dir_.Sub("restored-" + std::to_string(id));
    RestoreOptions which;
    which.id = id;
    Status s = RestoreBackup(options.backup_dir, target, which);
    ASSERT_TRUE(s.ok()) << s.ToString();
    Options reopened = StoreOptions("restored-" + std::to_string(id));
    std::unique_ptr<Runtime> restored = OpenOrDie(reopened);
    ASSERT_NE(restored, nullptr);
    Result<StatusCounts> counts = Await(restored->CountByStatus());
    ASSERT_TRUE(counts.ok());
    EXPECT_EQ(counts->of(TaskStatus::kPending), id == 2 ? 300u : 500u);
    ASSERT_TRUE(Await(restored->Close()).ok());
  }
}

// Values are sealed before RocksDB sees them, and a backup copies
// RocksDB's files: the payload is nowhere in plaintext, and the restored
// store needs the key.
TEST_F(BackupTest, AnEncryptedStoreStaysEncryptedInItsBackup) {
  Options options = StoreOptions("q");
  options.encryption_key = GenerateEncryptionKey();
  std::unique_ptr<Runtime> runtime = OpenQueue(options);
  ASSERT_NE(runtime, nullptr);
  std::vector<TaskId> ids =
      EnqueueStored(runtime.get(), 50, std::string("x-") + kPayloadMarker);
  ASSERT_EQ(ids.size(), 50u);
  std::string backups = dir_.Sub("backups");
  ASSERT_TRUE(Await(runtime->BackupTo(backups)).ok());
  ASSERT_TRUE(Await(runtime->Close()).ok());
  runtime.reset();
  EXPECT_THAT(FilesContaining(backups, kPayloadMarker), ::testing::IsEmpty());

  ASSERT_TRUE(RestoreBackup(backups, dir_.Sub("restored")).ok());
  Options keyless = StoreOptions("restored");
  std::unique_ptr<Runtime> refused;
  EXPECT_FALSE(Runtime::Open(keyless, &refused).ok());
  Options keyed = keyless;
  keyed.encryption_key = options.encryption_key;
  std::unique_ptr<Runtime> restored = OpenOrDie(keyed);
  ASSERT_NE(restored, nullptr);
  Result<TaskInfo> task = Await(restored->GetTask(ids.back()));
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  EXPECT_EQ(task->payload, std::string("x-") + kPayloadMarker);
  ASSERT_TRUE(Await(restored->Close()).ok());
}

TEST_F(BackupTest, EveryCallThatCannotWorkSaysWhy) {
  Options options = StoreOptions("q");
  std::unique_ptr<Runtime> runtime = OpenOrDie(options);
  ASSERT_NE(runtime, nullptr);
  Result<BackupInfo> r = Await(runtime->Backup());
  EXPECT_TRUE(r.status().IsFailedPrecondition()) << r.status().ToString();
  EXPECT_THAT(r.status().ToString(), HasSubstr("backup_dir"));
  r = Await(runtime->BackupTo(""));
  EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status().ToString();
  r = Await(runtime->BackupTo(options.path + "/backups"));
  EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status().ToString();
  EXPECT_THAT(r.status().ToString(), HasSubstr("outside"));
  std::string backups = dir_.Sub("backups");
  ASSERT_TRUE(Await(runtime->BackupTo(backups)).ok());
  ASSERT_TRUE(Await(runtime->Close()).ok());
  r = Await(runtime->BackupTo(backups));
  EXPECT_TRUE(r.status().IsClosed()) << r.status().ToString();
  runtime.reset();

  // The backup directory is the store's own, as the config says it.
  Options inside = options;
  inside.backup_dir = options.path + "/./backups/";
  Status s = inside.Validate();
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  inside.backup_dir = options.path;
  EXPECT_TRUE(inside.Validate().IsInvalidArgument());
  inside.backup_dir = options.path + "-backups";
  EXPECT_TRUE(inside.Validate().ok());
  inside.backup_keep = 0;
  EXPECT_TRUE(inside.Validate().IsInvalidArgument());

  // Restores: into a store that exists, from nowhere, a backup not there.
  s = RestoreBackup(backups, options.path);
  EXPECT_TRUE(s.IsFailedPrecondition()) << s.ToString();
  EXPECT_THAT(s.ToString(), HasSubstr("not empty"));
  s = RestoreBackup(dir_.Sub("nowhere"), dir_.Sub("r1"));
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  RestoreOptions missing;
  missing.id = 7;
  s = RestoreBackup(backups, dir_.Sub("r2"), missing);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("r2")));
  std::vector<BackupInfo> listed;
  EXPECT_TRUE(ListBackups(dir_.Sub("nowhere"), &listed).IsNotFound());

  // A read-only runtime and an in-memory store have nothing to back up.
  std::unique_ptr<Runtime> reader;
  ASSERT_TRUE(Runtime::OpenReadOnly(options, &reader).ok());
  r = Await(reader->BackupTo(dir_.Sub("b2")));
  EXPECT_TRUE(r.status().IsNotSupported()) << r.status().ToString();
  ASSERT_TRUE(Await(reader->Close()).ok());
  Options memory = StoreOptions("m");
  memory.durability = Durability::kMemory;
  std::unique_ptr<Runtime> in_memory = OpenOrDie(memory);
  ASSERT_NE(in_memory, nullptr);
  r = Await(in_memory->BackupTo(dir_.Sub("b3")));
  EXPECT_TRUE(r.status().IsNotSupported()) << r.status().ToString();
  ASSERT_TRUE(Await(in_memory->Close()).ok());
}

// Close does not wait for a long copy: a backup it overtakes fails with
// Aborted (or had finished), and the store closes cleanly.
TEST_F(BackupTest, CloseStopsABackupInFlight) {
  Options options = StoreOptions("q");
  std::unique_ptr<Runtime> runtime = OpenQueue(options);
  ASSERT_NE(runtime, nullptr);
  EnqueueStored(runtime.get(), 2000, std::string(2000, 'x'));
  Future<BackupInfo> backup = runtime->BackupTo(dir_.Sub("backups"));
  ASSERT_TRUE(Await(runtime->Close()).ok());
  Result<BackupInfo> r = Await(backup);
  EXPECT_TRUE(r.ok() || r.status().IsAborted()) << r.status().ToString();
  runtime.reset();
  std::unique_ptr<Runtime> reopened = OpenOrDie(options);
  ASSERT_NE(reopened, nullptr);
  ASSERT_TRUE(Await(reopened->Close()).ok());
}

}  // namespace
}  // namespace spool
