// Encryption at rest through the runtime, on RocksDB on disk: the queue
// works the same with a key; nothing secret reaches the files; altered and
// unreadable records are set aside while the rest runs; rotation, wrong
// keys, plaintext stores and bad key material.

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <spool/config.h>
#include <spool/encryption.h>
#include <spool/runtime.h>

#include <gtest/gtest.h>

#include "storage/crypto.h"
#include "storage/task_store.h"
#include "tests/runtime_testing.h"

namespace spool {
namespace {
using spool::testing::Await;
using spool::testing::FilesContaining;

using namespace std::chrono_literals;
using spool::testing::TempDir;

constexpr auto kWait = 60s;

Status Ok(TaskContext&) { return Status::OK(); }

// Strings that share no 4-byte sequence, so that LZ4 in the table files
// keeps each whole wherever it is stored in plaintext.
constexpr char kPayloadMarker[] = "PAYq7Xv2Lk9Wm4";
constexpr char kGroupMarker[] = "GRPt8Zb3Nd5Hs1";
constexpr char kDedupMarker[] = "DDPy6Fc0Jr2Qe7";
constexpr char kIdemMarker[] = "IDMu4Ga9Kx3Vo8";
constexpr char kCancelMarker[] = "CNLw1Bi5Tp6Ym2";
constexpr char kErrorMarker[] = "ERRh0Sz7Dj4Ul9";

bool HasFileEndingWith(const std::string& dir, const std::string& suffix) {
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return true;
    }
  }
  return false;
}

class EncryptionTest : public ::testing::Test {
 protected:
  Options KeyedOptions(const std::string& key,
                       std::vector<std::string> previous = {}) {
    Options options;
    options.path = dir_.Sub("q");
    options.workers = 4;
    options.encryption_key = key;
    options.previous_encryption_keys = std::move(previous);
    options.close_timeout = 10s;
    return options;
  }

  std::unique_ptr<Runtime> OpenOrDie(const Options& options) {
    std::unique_ptr<Runtime> runtime;
    Status s = Runtime::Open(options, &runtime);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return runtime;
  }

  static void CloseOrDie(std::unique_ptr<Runtime>* runtime) {
    Result<void> closed = Await((*runtime)->Close());
    EXPECT_TRUE(closed.ok()) << closed.status().ToString();
    runtime->reset();
  }

  // The store itself, for looking at stored bytes.
  std::unique_ptr<storage::TaskStore> OpenStore(
      const std::string& key, std::vector<std::string> previous = {}) {
    storage::StoreOptions options;
    options.path = dir_.Sub("q");
    if (!key.empty()) {
      EXPECT_TRUE(storage::KeyRing::Create(key, previous, &options.keys).ok());
    }
    std::unique_ptr<storage::TaskStore> store;
    Status s = storage::TaskStore::Open(options, &store);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return store;
  }

  // Enqueues `n` tasks of `type` (not started), returning their ids.
  static std::vector<TaskId> EnqueueN(Runtime* runtime, const std::string& type,
                                      int n, EnqueueOptions options = {}) {
    std::vector<TaskId> ids;
    for (int i = 0; i < n; ++i) {
      auto stored =
          Await(runtime->Enqueue(type, "payload " + std::to_string(i), options)
                    .stored);
      EXPECT_TRUE(stored.ok()) << stored.status().ToString();
      if (stored.ok()) ids.push_back(*stored);
    }
    return ids;
  }

  TempDir dir_;
  std::string key_a_ = GenerateEncryptionKey();
  std::string key_b_ = GenerateEncryptionKey();
};

TEST_F(EncryptionTest, TheQueueWorksTheSameWithAKey) {
  auto runtime = OpenOrDie(KeyedOptions(key_a_));
  std::atomic<int> attempts{0};
  HandlerOptions retried;
  retried.retry = RetryPolicy::Fixed(3, 1ms);
  ASSERT_TRUE(runtime
                  ->RegisterHandler(
                      "t",
                      [&](TaskContext&) {
                        return attempts++ == 0 ? Status::Aborted(kErrorMarker)
                                               : Status::OK();
                      },
                      retried)
                  .ok());
  ASSERT_TRUE(runtime->RegisterHandler("idle", Ok).ok());

  EnqueueOptions options;
  options.group = kGroupMarker;
  options.dedup_key = kDedupMarker;
  options.idempotency_key = kIdemMarker;
  auto first = Await(runtime->Enqueue("t", kPayloadMarker, options).stored);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  // Deduplicated while the first is active: found by its tag.
  auto again = Await(runtime->Enqueue("t", "another", options).stored);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *first);

  // CancelGroup finds the group's tasks by tag, and only them.
  EnqueueOptions to_cancel;
  to_cancel.group = kCancelMarker;
  std::vector<TaskId> cancelled = EnqueueN(runtime.get(), "idle", 3, to_cancel);
  auto count = Await(runtime->CancelGroup(kCancelMarker));
  ASSERT_TRUE(count.ok()) << count.status().ToString();
  EXPECT_EQ(*count, 3u);
  EXPECT_EQ(*Await(runtime->CancelGroup("no-such-group")), 0u);
  for (TaskId id : cancelled) {
    EXPECT_EQ(Await(runtime->GetTask(id))->status, TaskStatus::kCancelled);
  }
  // Stored means in the write-ahead log: sealed there too.
  for (const char* marker : {kPayloadMarker, kGroupMarker, kDedupMarker,
                             kIdemMarker, kCancelMarker}) {
    EXPECT_EQ(FilesContaining(dir_.Sub("q"), marker),
              std::vector<std::string>{})
        << marker;
  }

  ASSERT_TRUE(runtime->Start().ok());
  // Drain does not wait for the retry's due time: wait for the outcome.
  EXPECT_TRUE(spool::testing::WaitUntil([&] {
    auto task = Await(runtime->GetTask(*first));
    return task.ok() && task->status == TaskStatus::kSucceeded;
  }));
  auto info = Await(runtime->GetTask(*first));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->status, TaskStatus::kSucceeded);
  EXPECT_EQ(info->attempts, 2u);
  EXPECT_EQ(info->payload, kPayloadMarker);
  EXPECT_EQ(info->group, kGroupMarker);
  EXPECT_EQ(info->dedup_key, kDedupMarker);
  EXPECT_EQ(info->idempotency_key, kIdemMarker);
  ASSERT_EQ(info->failures.size(), 1u);
  EXPECT_EQ(info->failures[0].error, kErrorMarker);
  // The key is free once the task finished.
  auto later = Await(runtime->Enqueue("t", "later", options).stored);
  ASSERT_TRUE(later.ok());
  EXPECT_NE(*later, *first);
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  CloseOrDie(&runtime);

  // Reopened, everything reads back, and the indexes match the records.
  runtime = OpenOrDie(KeyedOptions(key_a_));
  EXPECT_EQ(Await(runtime->GetTask(*first))->payload, kPayloadMarker);
  CloseOrDie(&runtime);
  {
    auto store = OpenStore(key_a_);
    size_t mismatches = 1;
    ASSERT_TRUE(store->CheckIndexes(&mismatches).ok());
    EXPECT_EQ(mismatches, 0u);
  }

  // Close flushed the memtables: there are table files and a log, and not
  // one byte of them holds a payload, group, dedup or idempotency key.
  std::string path = dir_.Sub("q");
  EXPECT_TRUE(HasFileEndingWith(path, ".sst"));
  EXPECT_TRUE(HasFileEndingWith(path, ".log"));
  for (const char* marker : {kPayloadMarker, kGroupMarker, kDedupMarker,
                             kIdemMarker, kCancelMarker, kErrorMarker}) {
    EXPECT_EQ(FilesContaining(path, marker), std::vector<std::string>{})
        << marker;
  }
}

// Listings read the group index by the group's tag, so a query by group
// finds its tasks under a key just as it does without one.
TEST_F(EncryptionTest, ListingsByGroupTypeAndStatusWorkWithAKey) {
  auto runtime = OpenOrDie(KeyedOptions(key_a_));
  ASSERT_TRUE(runtime->RegisterHandler("a", Ok).ok());
  ASSERT_TRUE(runtime->RegisterHandler("b", Ok).ok());
  EnqueueOptions grouped;
  grouped.group = kGroupMarker;
  std::vector<TaskId> in_group = EnqueueN(runtime.get(), "a", 3, grouped);
  EnqueueN(runtime.get(), "a", 2);
  EnqueueN(runtime.get(), "b", 4, grouped);

  TaskQuery by_group;
  by_group.group = kGroupMarker;
  auto page = Await(runtime->ListTasks(by_group));
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(page->tasks.size(), 7u);
  EXPECT_TRUE(page->unreadable.empty());
  by_group.type = "a";
  page = Await(runtime->ListTasks(by_group));
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->tasks.size(), 3u);
  for (size_t i = 0; i < in_group.size(); ++i) {
    EXPECT_EQ(page->tasks[i].id, in_group[i]);
    EXPECT_EQ(page->tasks[i].group, kGroupMarker);
  }
  TaskQuery pending_a;
  pending_a.type = "a";
  pending_a.status = TaskStatus::kPending;
  EXPECT_EQ(Await(runtime->ListTasks(pending_a))->tasks.size(), 5u);
  auto json = Await(runtime->ListTasksJson(by_group));
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  EXPECT_NE(json->find(kGroupMarker), std::string::npos) << *json;
  TaskQuery other_group;
  other_group.group = "no-such-group";
  EXPECT_TRUE(Await(runtime->ListTasks(other_group))->tasks.empty());
  CloseOrDie(&runtime);
}

// The scan above would see the markers if they were there: the same work
// without a key leaves every one of them in the files.
TEST_F(EncryptionTest, WithoutAKeyTheMarkersAreOnDisk) {
  auto runtime = OpenOrDie(KeyedOptions(""));
  std::atomic<int> attempts{0};
  HandlerOptions retried;
  retried.retry = RetryPolicy::Fixed(3, 1ms);
  ASSERT_TRUE(runtime
                  ->RegisterHandler(
                      "t",
                      [&](TaskContext&) {
                        return attempts++ == 0 ? Status::Aborted(kErrorMarker)
                                               : Status::OK();
                      },
                      retried)
                  .ok());
  ASSERT_TRUE(runtime->RegisterHandler("idle", Ok).ok());
  EnqueueOptions options;
  options.group = kGroupMarker;
  options.dedup_key = kDedupMarker;
  options.idempotency_key = kIdemMarker;
  auto first = Await(runtime->Enqueue("t", kPayloadMarker, options).stored);
  ASSERT_TRUE(first.ok());
  EnqueueOptions to_cancel;
  to_cancel.group = kCancelMarker;
  EnqueueN(runtime.get(), "idle", 1, to_cancel);
  // In the write-ahead log as soon as stored.
  for (const char* marker : {kPayloadMarker, kGroupMarker, kDedupMarker,
                             kIdemMarker, kCancelMarker}) {
    std::vector<std::string> files = FilesContaining(dir_.Sub("q"), marker);
    EXPECT_TRUE(std::any_of(files.begin(), files.end(),
                            [](const std::string& name) {
                              return name.find(".log") != std::string::npos;
                            }))
        << marker;
  }
  ASSERT_TRUE(runtime->Start().ok());
  EXPECT_TRUE(spool::testing::WaitUntil([&] {
    auto task = Await(runtime->GetTask(*first));
    return task.ok() && task->status == TaskStatus::kSucceeded;
  }));
  CloseOrDie(&runtime);
  std::string path = dir_.Sub("q");
  for (const char* marker : {kPayloadMarker, kGroupMarker, kDedupMarker,
                             kIdemMarker, kCancelMarker, kErrorMarker}) {
    EXPECT_FALSE(FilesContaining(path, marker).empty()) << marker;
  }
}

// The scheduler knows groups by tag: limits set by name, queue entries from
// commits and from recovery, and finished attempts must all agree, or a
// group would stay blocked (Drain would not return).
TEST_F(EncryptionTest, GroupLimitsHoldAcrossCommitsAndRecovery) {
  Options options = KeyedOptions(key_a_);
  EnqueueOptions limited;
  limited.group = "limited";
  EnqueueOptions free;
  free.group = "free";
  {
    auto runtime = OpenOrDie(options);
    ASSERT_TRUE(runtime->RegisterHandler("g", Ok).ok());
    EnqueueN(runtime.get(), "g", 4, limited);  // recovered at the next open
    CloseOrDie(&runtime);
  }
  auto runtime = OpenOrDie(options);
  std::mutex mutex;
  std::map<std::string, int> running;
  std::map<std::string, int> most;
  std::atomic<int> runs{0};
  ASSERT_TRUE(runtime
                  ->RegisterHandler("g",
                                    [&](TaskContext& task) {
                                      std::string group(task.group());
                                      {
                                        std::lock_guard<std::mutex> l(mutex);
                                        most[group] = std::max(
                                            most[group], ++running[group]);
                                      }
                                      std::this_thread::sleep_for(5ms);
                                      {
                                        std::lock_guard<std::mutex> l(mutex);
                                        --running[group];
                                      }
                                      runs++;
                                      return Status::OK();
                                    })
                  .ok());
  ASSERT_TRUE(runtime->SetGroupConcurrency("limited", 1).ok());
  ASSERT_TRUE(runtime->Start().ok());
  EnqueueN(runtime.get(), "g", 6, limited);
  EnqueueN(runtime.get(), "g", 6, free);
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  EXPECT_EQ(runs.load(), 16);
  EXPECT_EQ(most["limited"], 1);
  EXPECT_GE(most["free"], 1);
  CloseOrDie(&runtime);
}

TEST_F(EncryptionTest, AnAlteredRecordIsSetAsideWhileTheOthersRun) {
  Options options = KeyedOptions(key_a_);
  std::vector<TaskId> ids;
  {
    auto runtime = OpenOrDie(options);
    ASSERT_TRUE(runtime->RegisterHandler("t", Ok).ok());
    ids = EnqueueN(runtime.get(), "t", 10);
    CloseOrDie(&runtime);
  }
  TaskId broken = ids[4];
  {
    auto store = OpenStore(key_a_);
    std::string stored;
    ASSERT_TRUE(store
                    ->GetStoredForTesting(storage::ColumnFamily::kTasks,
                                          storage::StateKey(broken), &stored)
                    .ok());
    stored[storage::kSealHeaderBytes + storage::kNonceBytes + 3] ^= 0x01;
    ASSERT_TRUE(
        store->PutRawForTesting(storage::StateKey(broken), stored).ok());
  }
  auto runtime = OpenOrDie(options);
  std::atomic<int> runs{0};
  ASSERT_TRUE(runtime
                  ->RegisterHandler("t",
                                    [&](TaskContext&) {
                                      runs++;
                                      return Status::OK();
                                    })
                  .ok());
  auto info = Await(runtime->GetTask(broken));
  EXPECT_TRUE(info.status().IsCorruption());
  EXPECT_NE(info.status().message().find("task " + std::to_string(broken) +
                                         "'s state cannot be decrypted"),
            std::string::npos)
      << info.status().ToString();
  ASSERT_TRUE(runtime->Start().ok());
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  EXPECT_EQ(runs.load(), 9);
  for (TaskId id : ids) {
    if (id == broken) continue;
    EXPECT_EQ(Await(runtime->GetTask(id))->status, TaskStatus::kSucceeded);
  }
  // Set aside, named, and kept.
  info = Await(runtime->GetTask(broken));
  EXPECT_TRUE(info.status().IsCorruption());
  EXPECT_NE(info.status().message().find("task " + std::to_string(broken) +
                                         " is set aside"),
            std::string::npos)
      << info.status().ToString();
  auto aside = Await(runtime->ListSetAside());
  ASSERT_TRUE(aside.ok());
  ASSERT_EQ(aside->size(), 1u);
  EXPECT_EQ((*aside)[0].id, broken);
  EXPECT_NE((*aside)[0].reason.message().find("fails authentication"),
            std::string::npos)
      << (*aside)[0].reason.ToString();
  Result<void> release = Await(runtime->Release(broken));
  EXPECT_TRUE(release.status().IsFailedPrecondition());
  EXPECT_NE(release.status().message().find("still cannot be read"),
            std::string::npos)
      << release.status().ToString();
  CloseOrDie(&runtime);
}

TEST_F(EncryptionTest, ARecordCopiedOntoAnotherIdIsRefused) {
  Options options = KeyedOptions(key_a_);
  std::vector<TaskId> ids;
  {
    auto runtime = OpenOrDie(options);
    ASSERT_TRUE(runtime->RegisterHandler("t", Ok).ok());
    ids = EnqueueN(runtime.get(), "t", 2);
    CloseOrDie(&runtime);
  }
  {
    auto store = OpenStore(key_a_);
    std::string stored;
    ASSERT_TRUE(store
                    ->GetStoredForTesting(storage::ColumnFamily::kTasks,
                                          storage::StateKey(ids[0]), &stored)
                    .ok());
    ASSERT_TRUE(
        store->PutRawForTesting(storage::StateKey(ids[1]), stored).ok());
  }
  auto runtime = OpenOrDie(options);
  ASSERT_TRUE(runtime->RegisterHandler("t", Ok).ok());
  auto info = Await(runtime->GetTask(ids[1]));
  EXPECT_TRUE(info.status().IsCorruption());
  EXPECT_NE(info.status().message().find("copied from another task"),
            std::string::npos)
      << info.status().ToString();
  ASSERT_TRUE(runtime->Start().ok());
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  EXPECT_EQ(Await(runtime->GetTask(ids[0]))->status, TaskStatus::kSucceeded);
  CloseOrDie(&runtime);
}

// A key dropped too early: its records are set aside, not lost, and come
// back with Release once the key is configured again. Queued records are
// set aside when the scheduler claims them; the rest (finished, or waiting
// for a later time) when the next open rebuilds the indexes, so that none
// is left in the store unindexed.
TEST_F(EncryptionTest, RecordsOfAKeyThatIsGoneReturnWhenItIsRestored) {
  std::vector<TaskId> old_ids;
  TaskId old_done = 0;
  TaskId old_later = 0;
  {
    auto runtime = OpenOrDie(KeyedOptions(key_a_));
    ASSERT_TRUE(runtime->RegisterHandler("t", Ok).ok());
    ASSERT_TRUE(runtime->RegisterHandler("later", Ok).ok());
    ASSERT_TRUE(runtime->Start().ok());
    old_done = EnqueueN(runtime.get(), "t", 1)[0];
    ASSERT_TRUE(Await(runtime->Drain()).ok());
    ASSERT_TRUE(runtime->Pause().ok());
    EnqueueOptions delayed;
    delayed.delay = std::chrono::hours(1);
    old_later = EnqueueN(runtime.get(), "later", 1, delayed)[0];
    old_ids = EnqueueN(runtime.get(), "t", 5);  // paused: they stay queued
    CloseOrDie(&runtime);
  }
  TaskId new_id = 0;
  {
    // A rotation begun: B is current. Nothing re-encrypted yet.
    auto runtime = OpenOrDie(KeyedOptions(key_b_, {key_a_}));
    ASSERT_TRUE(runtime->RegisterHandler("t", Ok).ok());
    new_id = EnqueueN(runtime.get(), "t", 1)[0];
    EXPECT_TRUE(Await(runtime->GetTask(old_ids[0])).ok());
    CloseOrDie(&runtime);
  }
  std::atomic<int> runs{0};
  auto counting = [&](TaskContext&) {
    runs++;
    return Status::OK();
  };
  Result<std::string> id_a = EncryptionKeyId(key_a_);
  ASSERT_TRUE(id_a.ok());
  {
    // A dropped before ReencryptAll: the store opens (its lookup key is
    // sealed with B now), A's records cannot be read.
    auto runtime = OpenOrDie(KeyedOptions(key_b_));
    ASSERT_TRUE(runtime->RegisterHandler("t", counting).ok());
    ASSERT_TRUE(runtime->RegisterHandler("later", Ok).ok());
    // The first runtime's pause is stored; this one runs.
    ASSERT_TRUE(runtime->Resume().ok());
    auto info = Await(runtime->GetTask(old_ids[0]));
    EXPECT_TRUE(info.status().IsCorruption());
    EXPECT_NE(info.status().message().find("key id " + *id_a +
                                           ", which is not configured"),
              std::string::npos)
        << info.status().ToString();
    ASSERT_TRUE(runtime->Start().ok());
    ASSERT_TRUE(Await(runtime->Drain()).ok());
    EXPECT_EQ(runs.load(), 1) << "only the task sealed with B ran";
    EXPECT_EQ(Await(runtime->GetTask(new_id))->status, TaskStatus::kSucceeded);
    auto aside = Await(runtime->ListSetAside());
    ASSERT_TRUE(aside.ok());
    ASSERT_EQ(aside->size(), old_ids.size());
    for (const SetAsideTask& task : *aside) {
      EXPECT_TRUE(task.reason.IsCorruption());
    }
    EXPECT_TRUE(
        Await(runtime->Release(old_ids[0])).status().IsFailedPrecondition());
    CloseOrDie(&runtime);
  }
  {
    // Opened again without A: the indexes are rebuilt, and the records
    // nobody claimed are set aside too.
    auto runtime = OpenOrDie(KeyedOptions(key_b_));
    auto aside = Await(runtime->ListSetAside());
    ASSERT_TRUE(aside.ok());
    EXPECT_EQ(aside->size(), old_ids.size() + 2);
    EXPECT_TRUE(Await(runtime->GetTask(old_later)).status().IsCorruption());
    CloseOrDie(&runtime);
  }
  runs = 0;
  auto runtime = OpenOrDie(KeyedOptions(key_b_, {key_a_}));
  ASSERT_TRUE(runtime->RegisterHandler("t", counting).ok());
  ASSERT_TRUE(runtime->RegisterHandler("later", Ok).ok());
  auto aside = Await(runtime->ListSetAside());
  ASSERT_TRUE(aside.ok());
  ASSERT_EQ(aside->size(), old_ids.size() + 2);
  for (const SetAsideTask& task : *aside) {
    EXPECT_TRUE(task.reason.ok()) << task.reason.ToString();
  }
  auto info = Await(runtime->GetTask(old_ids[0]));
  EXPECT_NE(info.status().message().find("can be now"), std::string::npos)
      << info.status().ToString();
  ASSERT_TRUE(runtime->Start().ok());
  for (const SetAsideTask& task : *aside) {
    Result<void> released = Await(runtime->Release(task.id));
    EXPECT_TRUE(released.ok()) << released.status().ToString();
  }
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  EXPECT_EQ(runs.load(), 5);
  for (TaskId id : old_ids) {
    auto done = Await(runtime->GetTask(id));
    ASSERT_TRUE(done.ok()) << done.status().ToString();
    EXPECT_EQ(done->status, TaskStatus::kSucceeded);
    EXPECT_EQ(done->attempts, 1u);
  }
  // Back as they were: finished, and still waiting for its time.
  EXPECT_EQ(Await(runtime->GetTask(old_done))->status, TaskStatus::kSucceeded);
  auto later = Await(runtime->GetTask(old_later));
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->status, TaskStatus::kPending);
  EXPECT_TRUE(later->next_attempt_at.has_value());
  EXPECT_TRUE(Await(runtime->ListSetAside())->empty());
  CloseOrDie(&runtime);
  auto store = OpenStore(key_b_, {key_a_});
  size_t mismatches = 1;
  ASSERT_TRUE(store->CheckIndexes(&mismatches).ok());
  EXPECT_EQ(mismatches, 0u);
}

TEST_F(EncryptionTest,
       ReencryptAllMovesEveryRecordToTheNewKeyWhileTheQueueWorks) {
  std::vector<TaskId> all;
  {
    auto runtime = OpenOrDie(KeyedOptions(key_a_));
    ASSERT_TRUE(runtime->RegisterHandler("t", Ok).ok());
    ASSERT_TRUE(runtime->RegisterHandler("later", Ok).ok());
    ASSERT_TRUE(runtime->Start().ok());
    all = EnqueueN(runtime.get(), "t", 40);  // run: finished records
    EnqueueOptions delayed;
    delayed.delay = std::chrono::hours(1);
    for (TaskId id : EnqueueN(runtime.get(), "later", 30, delayed)) {
      all.push_back(id);  // wait: queued records
    }
    ASSERT_TRUE(Await(runtime->Drain()).ok());
    CloseOrDie(&runtime);
  }
  auto runtime = OpenOrDie(KeyedOptions(key_b_, {key_a_}));
  std::atomic<int> runs{0};
  ASSERT_TRUE(runtime
                  ->RegisterHandler("t",
                                    [&](TaskContext&) {
                                      runs++;
                                      return Status::OK();
                                    })
                  .ok());
  ASSERT_TRUE(runtime->RegisterHandler("later", Ok).ok());
  ASSERT_TRUE(runtime->Start().ok());
  // New work goes on while the records are moved, in small steps.
  std::vector<TaskId> produced;
  std::thread producer([&] { produced = EnqueueN(runtime.get(), "t", 60); });
  ReencryptOptions reencrypt;
  reencrypt.batch_size = 7;
  auto result = Await(runtime->ReencryptAll(reencrypt));
  producer.join();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->reencrypted, 70u);
  EXPECT_TRUE(result->unreadable.empty());
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  EXPECT_EQ(runs.load(), 60);
  all.insert(all.end(), produced.begin(), produced.end());
  // A second pass finds nothing to do.
  result = Await(runtime->ReencryptAll(reencrypt));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->reencrypted, 0u);
  CloseOrDie(&runtime);

  {
    auto store = OpenStore(key_b_);
    std::vector<TaskId> stale;
    TaskId last = 0;
    bool more = false;
    ASSERT_TRUE(store
                    ->FindStale(storage::ColumnFamily::kTasks, 0, 1000, &stale,
                                &last, &more)
                    .ok());
    EXPECT_TRUE(stale.empty());
    EXPECT_EQ(last, *std::max_element(all.begin(), all.end()));
  }
  // A is no longer needed: every task reads with B alone.
  runtime = OpenOrDie(KeyedOptions(key_b_));
  ASSERT_EQ(all.size(), 130u);
  for (TaskId id : all) {
    auto info = Await(runtime->GetTask(id));
    ASSERT_TRUE(info.ok()) << info.status().ToString();
  }
  CloseOrDie(&runtime);
}

TEST_F(EncryptionTest, OpenRefusesAWrongOrMissingKey) {
  TaskId id = 0;
  {
    auto runtime = OpenOrDie(KeyedOptions(key_a_));
    ASSERT_TRUE(runtime->RegisterHandler("t", Ok).ok());
    id = EnqueueN(runtime.get(), "t", 1).at(0);
    CloseOrDie(&runtime);
  }
  std::unique_ptr<Runtime> runtime;
  Status s = Runtime::Open(KeyedOptions(key_b_), &runtime);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("wrong encryption key"), std::string::npos);
  EXPECT_NE(s.message().find(*EncryptionKeyId(key_a_)), std::string::npos);
  EXPECT_NE(s.message().find(*EncryptionKeyId(key_b_)), std::string::npos);
  s = Runtime::Open(KeyedOptions(""), &runtime);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("is encrypted"), std::string::npos);
  // Nothing was changed by the refusals.
  runtime = OpenOrDie(KeyedOptions(key_a_));
  EXPECT_TRUE(Await(runtime->GetTask(id)).ok());
  CloseOrDie(&runtime);
}

TEST_F(EncryptionTest, APlaintextStoreIsRefusedOrEncryptedInPlace) {
  std::vector<TaskId> ids;
  EnqueueOptions grouped;
  grouped.group = "old-group";
  grouped.dedup_key = "old-dedup";
  {
    auto runtime = OpenOrDie(KeyedOptions(""));
    ASSERT_TRUE(runtime->RegisterHandler("t", Ok).ok());
    ids = EnqueueN(runtime.get(), "t", 1, grouped);
    EnqueueOptions group_only;
    group_only.group = "old-group";
    for (TaskId id : EnqueueN(runtime.get(), "t", 3, group_only)) {
      ids.push_back(id);
    }
    CloseOrDie(&runtime);
  }
  std::unique_ptr<Runtime> runtime;
  Status s = Runtime::Open(KeyedOptions(key_a_), &runtime);
  EXPECT_TRUE(s.IsFailedPrecondition()) << s.ToString();
  EXPECT_NE(s.message().find("plaintext_records"), std::string::npos);

  Options accepting = KeyedOptions(key_a_);
  accepting.plaintext_records = PlaintextRecords::kAccept;
  runtime = OpenOrDie(accepting);
  ASSERT_TRUE(runtime->RegisterHandler("t", Ok).ok());
  // Lookups of groups and dedup keys stored before encryption still work:
  // the indexes were rebuilt with tags at open.
  auto deduplicated = Await(runtime->Enqueue("t", "x", grouped).stored);
  ASSERT_TRUE(deduplicated.ok());
  EXPECT_EQ(*deduplicated, ids[0]);
  EXPECT_EQ(Await(runtime->GetTask(ids[1]))->payload, "payload 0");
  auto result = Await(runtime->ReencryptAll());
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->reencrypted, ids.size());
  EXPECT_EQ(*Await(runtime->CancelGroup("old-group")), ids.size());
  CloseOrDie(&runtime);

  // Fully encrypted now: opens without accepting plaintext, and the
  // compaction after ReencryptAll left no plaintext in the table files.
  runtime = OpenOrDie(KeyedOptions(key_a_));
  for (TaskId id : ids) {
    EXPECT_EQ(Await(runtime->GetTask(id))->status, TaskStatus::kCancelled);
  }
  CloseOrDie(&runtime);
  for (const auto& entry : std::filesystem::directory_iterator(dir_.Sub("q"))) {
    std::string name = entry.path().filename().string();
    if (name.size() < 4 || name.substr(name.size() - 4) != ".sst") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    EXPECT_EQ(bytes.str().find("old-group"), std::string::npos) << name;
    EXPECT_EQ(bytes.str().find("payload 0"), std::string::npos) << name;
  }
}

TEST_F(EncryptionTest, BadKeyMaterialIsRejectedNamingTheKey) {
  std::unique_ptr<Runtime> runtime;
  Status s = Runtime::Open(KeyedOptions(std::string(31, 'k')), &runtime);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("encryption_key is 31 bytes"), std::string::npos)
      << s.ToString();
  s = Runtime::Open(KeyedOptions(key_a_, {std::string(16, 'k')}), &runtime);
  EXPECT_NE(s.message().find("previous_encryption_keys[0] is 16 bytes"),
            std::string::npos)
      << s.ToString();
  s = Runtime::Open(KeyedOptions(key_a_, {key_a_}), &runtime);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("is the same key as encryption_key"),
            std::string::npos)
      << s.ToString();

  std::string key_file = dir_.Sub("keys.hex");
  Options from_file = KeyedOptions("");
  from_file.encryption_key_file = key_file;
  s = Runtime::Open(from_file, &runtime);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("storage.encryption_key_file " + key_file +
                             ": no such file"),
            std::string::npos)
      << s.ToString();
  std::string hex = EncryptionKeyToHex(key_a_);
  std::ofstream(key_file) << "# current key\n" << hex.substr(0, 60) << "zz\n";
  // A key file is refused unless only its owner may access it (the mode
  // check itself is tested in tests/security/files_test.cc).
  std::filesystem::permissions(
      key_file,
      std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  s = Runtime::Open(from_file, &runtime);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("storage.encryption_key_file " + key_file +
                             ": line 2: expected 64 hex digits"),
            std::string::npos)
      << s.ToString();
  EXPECT_EQ(s.message().find(hex.substr(0, 60)), std::string::npos)
      << "key material must not appear in messages";

  Options both = KeyedOptions(key_a_);
  both.encryption_key_file = key_file;
  EXPECT_TRUE(Runtime::Open(both, &runtime).IsInvalidArgument());

  // A good key file: the first key is current, the next a previous one.
  std::ofstream(key_file) << EncryptionKeyToHex(key_b_) << "\n" << hex << "\n";
  TaskId id = 0;
  {
    auto keyed = OpenOrDie(KeyedOptions(key_a_));
    ASSERT_TRUE(keyed->RegisterHandler("t", Ok).ok());
    id = EnqueueN(keyed.get(), "t", 1).at(0);
    CloseOrDie(&keyed);
  }
  runtime = OpenOrDie(from_file);
  ASSERT_TRUE(runtime != nullptr);
  EXPECT_TRUE(Await(runtime->GetTask(id)).ok());
  CloseOrDie(&runtime);

  // The config keys.
  Options parsed;
  parsed.path = "x";
  ASSERT_TRUE(ParseOptions("[storage]\nencryption_key_file = \"" + key_file +
                               "\"\nplaintext_records = \"accept\"\n",
                           "test.toml", {}, &parsed)
                  .ok());
  EXPECT_EQ(parsed.encryption_key_file, key_file);
  EXPECT_EQ(parsed.plaintext_records, PlaintextRecords::kAccept);
  s = ParseOptions("[storage]\nplaintext_records = \"maybe\"\n", "test.toml",
                   {}, &parsed);
  EXPECT_NE(s.message().find("storage.plaintext_records"), std::string::npos)
      << s.ToString();
}

}  // namespace
}  // namespace spool
