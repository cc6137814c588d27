// TaskStore on schema version 2: a task as a spec, a state and a failure
// history in `tasks`, every index entry in `index`, derived from the state.

#include "storage/task_store.h"

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include "storage/task_record_generated.h"
#include "tests/store_testing.h"

namespace spool::storage {
namespace {

using spool::testing::InsertTask;
using spool::testing::PendingTask;
using spool::testing::StoredTask;
using spool::testing::TempDir;

using Entries = std::map<std::string, std::string>;

StoredTask NewTask(TaskId id, int32_t priority, uint64_t sequence) {
  StoredTask t = PendingTask(id, "t", sequence, "p" + std::to_string(id));
  t.state.priority = priority;
  t.state.max_attempts = 3;
  return t;
}

// Every entry of `family` under `prefix`.
Entries Family(const TaskStore& store, ColumnFamily family,
               std::string_view prefix = "") {
  Entries out;
  Status s = store.ForEachEntry(family, prefix,
                                [&](std::string_view k, std::string_view v) {
                                  out.emplace(k, v);
                                  return Status::OK();
                                });
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

// The keys task `id` has in `family` (kTasks or kCorrupt).
std::vector<std::string> KeysOf(const TaskStore& store, ColumnFamily family,
                                TaskId id) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : Family(store, family, TaskPrefix(id))) {
    keys.push_back(key);
  }
  return keys;
}

// The keys a task with `failures` failures in all should have in `tasks`.
std::vector<std::string> ExpectedKeys(TaskId id, uint32_t failures) {
  std::vector<std::string> keys = {SpecKey(id), StateKey(id)};
  uint32_t first =
      failures > kMaxFailureHistory ? failures - kMaxFailureHistory : 0;
  for (uint32_t n = first; n < failures; ++n) keys.push_back(FailureKey(id, n));
  return keys;
}

size_t Mismatches(const TaskStore& store,
                  std::vector<std::string>* problems = nullptr) {
  size_t mismatches = 0;
  std::vector<std::string> found;
  Status s = store.CheckIndexes(&mismatches, &found);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (problems != nullptr) *problems = found;
  return mismatches;
}

// The index entries of a state, written from the layout the headers
// describe (keys.h, IndexKind), independently of IndexEntriesOf.
Entries ExpectedIndexOf(const StateRecord& s) {
  Entries out;
  bool queued = s.status == TaskStatus::kPending ||
                s.status == TaskStatus::kRetryScheduled;
  out[StatusIndexKey(s.status, s.type, s.id)] =
      queued ? EncodeQueueValue(
                   {s.priority, s.sequence, s.next_attempt_us, s.stored_group})
             : "";
  out[TypeIndexKey(s.type, s.id)] = "";
  if (!s.stored_group.empty()) {
    out[GroupIndexKey(s.stored_group, s.id)] =
        std::string(1, static_cast<char>(s.status));
  }
  if (!s.stored_dedup_key.empty() && !IsTerminal(s.status)) {
    out[DedupIndexKey(s.stored_dedup_key)] = IdValue(s.id);
  }
  if (s.status == TaskStatus::kWaiting) {
    for (TaskId d : s.depends_on) out[WaitingIndexKey(d, s.id)] = "";
  }
  if (queued && s.next_attempt_us != 0) {
    out[DueIndexKey(s.next_attempt_us, s.sequence)] = IdValue(s.id);
  }
  return out;
}

// Reads and verifies task `id`.
Status ReadVerified(const TaskStore& store, TaskId id, TaskBytes* task) {
  Status s = store.GetTask(id, task);
  if (!s.ok()) return s;
  return task->Verify(id);
}

std::vector<uint32_t> FailureAttempts(const TaskView& view) {
  std::vector<uint32_t> attempts;
  for (const fb::Failure* f : *view.failures) attempts.push_back(f->attempt());
  return attempts;
}

std::vector<uint32_t> Range(uint32_t first, uint32_t last) {
  std::vector<uint32_t> out;
  for (uint32_t i = first; i <= last; ++i) out.push_back(i);
  return out;
}

uint64_t CountIn(const TaskStore& store, TaskStatus status) {
  std::array<uint64_t, kTaskStatusCount> counts{};
  EXPECT_TRUE(store.NewReadView()->CountByStatus(&counts).ok());
  return counts[static_cast<size_t>(status)];
}

// Changes task `id` in a transaction of its own; `change` edits the state.
void Transition(TaskStore* store, TaskId id,
                const std::function<void(StateRecord*)>& change) {
  WriteTxn txn(store);
  StateRecord state;
  Status s = txn.GetState(id, &state);
  ASSERT_TRUE(s.ok()) << s.ToString();
  change(&state);
  txn.Update(std::move(state));
  s = store->Commit(&txn);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

std::unique_ptr<TaskStore> OpenStoreAt(const std::string& path,
                                       Durability durability) {
  StoreOptions options;
  options.path = path;
  options.durability = durability;
  std::unique_ptr<TaskStore> store;
  Status s = TaskStore::Open(options, &store);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return store;
}

class TaskStoreTest : public ::testing::TestWithParam<Durability> {
 protected:
  std::unique_ptr<TaskStore> OpenStore() {
    return OpenStoreAt(dir_.Sub("db"), GetParam());
  }
  TempDir dir_;
};

TEST_P(TaskStoreTest, InsertPutsSpecStateAndIndexEntriesTogether) {
  auto store = OpenStore();
  WriteTxn txn(store.get());
  InsertTask(&txn, NewTask(1, 0, txn.NextSequence()));
  InsertTask(&txn, NewTask(2, 5, txn.NextSequence()));
  ASSERT_EQ(txn.entries().size(), 2u);
  EXPECT_EQ(txn.order(), (std::vector<TaskId>{1, 2}));
  EXPECT_TRUE(txn.entries().at(1).spec.has_value());
  EXPECT_FALSE(txn.entries().at(1).before.has_value());
  ASSERT_TRUE(store->Commit(&txn).ok());

  EXPECT_EQ(KeysOf(*store, ColumnFamily::kTasks, 1), ExpectedKeys(1, 0));
  EXPECT_EQ(KeysOf(*store, ColumnFamily::kTasks, 2), ExpectedKeys(2, 0));
  // A status and a type entry each, nothing else: no group, dedup key or
  // due time.
  Entries index = Family(*store, ColumnFamily::kIndex);
  EXPECT_EQ(index.size(), 4u);
  auto queued = Family(*store, ColumnFamily::kIndex,
                       StatusIndexPrefix(TaskStatus::kPending));
  ASSERT_EQ(queued.size(), 2u);
  QueueValue second;
  ASSERT_TRUE(DecodeQueueValue(
      queued[StatusIndexKey(TaskStatus::kPending, "t", 2)], &second));
  EXPECT_EQ(second.priority, 5);
  EXPECT_EQ(second.sequence, 2u);
  EXPECT_EQ(second.due_us, 0);
  EXPECT_EQ(second.group, "");
  EXPECT_EQ(index.count(StatusIndexKey(TaskStatus::kPending, "t", 1)), 1u);
  EXPECT_EQ(Family(*store, ColumnFamily::kIndex,
                   StatusIndexPrefix(TaskStatus::kPending, "t"))
                .size(),
            2u);
  EXPECT_EQ(Mismatches(*store), 0u);
  EXPECT_EQ(store->CountOf(TaskStatus::kPending), 2u);

  TaskBytes task;
  ASSERT_TRUE(ReadVerified(*store, 1, &task).ok());
  TaskInfo info;
  FillTaskInfo(task.view(), &info);
  EXPECT_EQ(info.payload, "p1");
  EXPECT_EQ(info.max_attempts, 3u);
  std::string spec_bytes;
  ASSERT_TRUE(store->GetSpec(2, &spec_bytes).ok());
  SpecRecord spec;
  ASSERT_TRUE(DecodeSpec(2, spec_bytes, &spec).ok());
  EXPECT_EQ(spec.payload, "p2");
  StateRecord state;
  ASSERT_TRUE(store->ReadState(2, &state).ok());
  EXPECT_EQ(state.priority, 5);
  EXPECT_EQ(state.sequence, 2u);

  EXPECT_TRUE(store->GetTask(3, &task).IsNotFound());
  EXPECT_TRUE(store->GetSpec(3, &spec_bytes).IsNotFound());
  EXPECT_TRUE(store->ReadState(3, &state).IsNotFound());
  std::string value;
  EXPECT_TRUE(
      store->GetEntry(ColumnFamily::kIndex, "nothing", &value).IsNotFound());
}

TEST_P(TaskStoreTest, TransitionsMoveIndexEntries) {
  auto store = OpenStore();
  {
    WriteTxn txn(store.get());
    InsertTask(&txn, NewTask(1, 0, txn.NextSequence()));
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  Transition(store.get(), 1, [](StateRecord* r) {
    r->status = TaskStatus::kRunning;
    r->attempts = 1;
  });
  Entries index = Family(*store, ColumnFamily::kIndex);
  EXPECT_EQ(index, (Entries{{StatusIndexKey(TaskStatus::kRunning, "t", 1), ""},
                            {TypeIndexKey("t", 1), ""}}));
  Transition(store.get(), 1, [](StateRecord* r) {
    r->status = TaskStatus::kRetryScheduled;
    r->next_attempt_us = 5000;
    RecordFailure(r, 1, 4000, "refused");
  });
  auto due = Family(*store, ColumnFamily::kIndex, DueIndexPrefix());
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due.begin()->first, DueIndexKey(5000, 1));
  EXPECT_EQ(due.begin()->second, IdValue(1));
  std::string value;
  ASSERT_TRUE(
      store
          ->GetEntry(ColumnFamily::kIndex,
                     StatusIndexKey(TaskStatus::kRetryScheduled, "t", 1),
                     &value)
          .ok());
  QueueValue queued;
  ASSERT_TRUE(DecodeQueueValue(value, &queued));
  EXPECT_EQ(queued.due_us, 5000);
  EXPECT_TRUE(Family(*store, ColumnFamily::kIndex,
                     StatusIndexPrefix(TaskStatus::kRunning))
                  .empty());
  Transition(store.get(), 1, [](StateRecord* r) {
    r->status = TaskStatus::kSucceeded;
    r->next_attempt_us = 0;
  });
  EXPECT_TRUE(Family(*store, ColumnFamily::kIndex, DueIndexPrefix()).empty());
  EXPECT_EQ(Family(*store, ColumnFamily::kIndex).size(), 2u);
  EXPECT_EQ(Mismatches(*store), 0u);
  EXPECT_EQ(CountIn(*store, TaskStatus::kSucceeded), 1u);
  EXPECT_EQ(CountIn(*store, TaskStatus::kPending), 0u);
  EXPECT_EQ(CountIn(*store, TaskStatus::kRetryScheduled), 0u);
  EXPECT_EQ(store->CountOf(TaskStatus::kSucceeded), 1u);
  TypeCounts by_type;
  ASSERT_TRUE(store->NewReadView()->CountByType(&by_type).ok());
  ASSERT_EQ(by_type.size(), 1u);
  std::array<uint64_t, kTaskStatusCount> only_succeeded{};
  only_succeeded[static_cast<size_t>(TaskStatus::kSucceeded)] = 1;
  EXPECT_EQ(by_type["t"], only_succeeded);
}

TEST_P(TaskStoreTest, ReadsInsideATransactionSeeItsOwnWrites) {
  auto store = OpenStore();
  WriteTxn txn(store.get());
  InsertTask(&txn, NewTask(7, 0, txn.NextSequence()));
  StateRecord r;
  ASSERT_TRUE(txn.GetState(7, &r).ok());
  EXPECT_EQ(r.status, TaskStatus::kPending);
  r.status = TaskStatus::kRunning;
  txn.Update(r);
  ASSERT_TRUE(txn.GetState(7, &r).ok());
  EXPECT_EQ(r.status, TaskStatus::kRunning);
  EXPECT_EQ(txn.entries().size(), 1u);
  EXPECT_EQ(txn.order().size(), 1u);
  EXPECT_TRUE(txn.GetState(8, &r).IsNotFound());
  ASSERT_TRUE(store->Commit(&txn).ok());
  // Inserted and claimed in one batch: only the final index entries exist.
  EXPECT_EQ(Family(*store, ColumnFamily::kIndex),
            (Entries{{StatusIndexKey(TaskStatus::kRunning, "t", 7), ""},
                     {TypeIndexKey("t", 7), ""}}));
  EXPECT_EQ(store->CountOf(TaskStatus::kPending), 0u);
  EXPECT_EQ(store->CountOf(TaskStatus::kRunning), 1u);
}

TEST_P(TaskStoreTest, SnapshotsDoNotSeeLaterWrites) {
  auto store = OpenStore();
  {
    WriteTxn txn(store.get());
    InsertTask(&txn, NewTask(1, 0, txn.NextSequence()));
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  auto view = store->NewReadView();
  {
    WriteTxn txn(store.get());
    InsertTask(&txn, NewTask(2, 0, txn.NextSequence()));
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  Transition(store.get(), 1, [](StateRecord* r) {
    r->status = TaskStatus::kRunning;
    RecordFailure(r, 1, 5, "later");
  });
  TaskBytes task;
  ASSERT_TRUE(view->GetTask(1, &task).ok());
  ASSERT_TRUE(task.Verify(1).ok());
  EXPECT_EQ(StatusOf(*task.view().state), TaskStatus::kPending);
  EXPECT_EQ(task.failure_count(), 0u);
  EXPECT_TRUE(view->GetTask(2, &task).IsNotFound());
  std::vector<TaskId> seen;
  ASSERT_TRUE(view->ScanTasks(ColumnFamily::kTasks, 0,
                              [&](TaskId id, TaskBytes&, const Status&) {
                                seen.push_back(id);
                                return true;
                              })
                  .ok());
  EXPECT_EQ(seen, std::vector<TaskId>{1});
  std::string value;
  EXPECT_TRUE(view->GetEntry(ColumnFamily::kIndex,
                             StatusIndexKey(TaskStatus::kPending, "t", 1),
                             &value)
                  .ok());
  size_t entries = 0;
  ASSERT_TRUE(view->Scan(ColumnFamily::kIndex, "", "",
                         [&](std::string_view, std::string_view) {
                           ++entries;
                           return true;
                         })
                  .ok());
  EXPECT_EQ(entries, 2u);  // its status and type entries
  std::array<uint64_t, kTaskStatusCount> counts{};
  ASSERT_TRUE(view->CountByStatus(&counts).ok());
  EXPECT_EQ(counts[0], 1u);
  // The store itself is at the latest commit.
  ASSERT_TRUE(ReadVerified(*store, 1, &task).ok());
  EXPECT_EQ(StatusOf(*task.view().state), TaskStatus::kRunning);
  EXPECT_EQ(task.failure_count(), 1u);
}

TEST_P(TaskStoreTest, QuarantineMovesACorruptTaskAside) {
  auto store = OpenStore();
  {
    WriteTxn txn(store.get());
    StoredTask one = NewTask(1, 0, txn.NextSequence());
    one.spec.group = "g";
    one.state.stored_group = "g";
    InsertTask(&txn, one);
    InsertTask(&txn, NewTask(2, 0, txn.NextSequence()));
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  std::string spec_before;
  ASSERT_TRUE(
      store->GetStoredForTesting(ColumnFamily::kTasks, SpecKey(1), &spec_before)
          .ok());
  ASSERT_TRUE(store->PutRawForTesting(StateKey(1), "garbage").ok());
  StateRecord r;
  EXPECT_TRUE(store->ReadState(1, &r).IsCorruption());
  WriteTxn txn(store.get());
  Status s = txn.GetState(1, &r);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("task 1"), std::string::npos) << s.ToString();
  txn.Quarantine(1, {StatusIndexKey(TaskStatus::kPending, "t", 1)});
  EXPECT_FALSE(txn.empty());
  ASSERT_TRUE(store->Commit(&txn).ok());

  TaskBytes task;
  Status missing = store->GetTask(1, &task);
  EXPECT_TRUE(missing.IsNotFound()) << missing.ToString();
  EXPECT_TRUE(KeysOf(*store, ColumnFamily::kTasks, 1).empty());
  // Every value, as stored.
  EXPECT_EQ(Family(*store, ColumnFamily::kCorrupt),
            (Entries{{SpecKey(1), spec_before}, {StateKey(1), "garbage"}}));
  EXPECT_TRUE(Family(*store, ColumnFamily::kIndex,
                     StatusIndexPrefix(TaskStatus::kPending))
                  .count(StatusIndexKey(TaskStatus::kPending, "t", 1)) == 0);
  Status explained = store->NewReadView()->ExplainMissing(1, missing);
  EXPECT_TRUE(explained.IsCorruption());
  EXPECT_NE(explained.message().find("task 1 is set aside, unreadable"),
            std::string::npos)
      << explained.ToString();
  // The task's other index entries (its type and group entries) were
  // unknown; they dangle until the next open repairs them.
  std::vector<std::string> problems;
  EXPECT_EQ(Mismatches(*store, &problems), 2u);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("entry without a task"), std::string::npos);
  ASSERT_TRUE(store->Reopen().ok());
  EXPECT_EQ(Mismatches(*store), 0u);
  EXPECT_EQ(store->CountOf(TaskStatus::kPending), 1u);
  EXPECT_EQ(CountIn(*store, TaskStatus::kPending), 1u);
  ASSERT_TRUE(ReadVerified(*store, 2, &task).ok());
  EXPECT_EQ(Family(*store, ColumnFamily::kCorrupt).size(), 2u);
}

TEST_P(TaskStoreTest, TransactionsSeeTheirOwnIndexEntries) {
  auto store = OpenStore();
  {
    WriteTxn txn(store.get());
    StoredTask t = NewTask(1, 0, txn.NextSequence());
    t.spec.dedup_key = "k";
    t.spec.group = "g";
    t.state.stored_dedup_key = store->StoredDedupKey("k");
    t.state.stored_group = store->StoredGroup("g");
    InsertTask(&txn, t);
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  WriteTxn txn(store.get());
  std::string value;
  ASSERT_TRUE(txn.GetIndex(DedupIndexKey("k"), &value).ok());
  EXPECT_EQ(value, IdValue(1));
  // A waiting task staged here shows up in scans of its dependency's
  // waiters, merged in order with what is stored.
  StoredTask waiter = NewTask(2, 0, txn.NextSequence());
  waiter.state.status = TaskStatus::kWaiting;
  waiter.state.depends_on = {1};
  waiter.spec.group = "g";
  waiter.state.stored_group = "g";
  InsertTask(&txn, waiter);
  std::vector<TaskId> waiters;
  ASSERT_TRUE(txn.ScanIndex(WaitingIndexPrefix(1), "",
                            [&](std::string_view key, std::string_view) {
                              TaskId id = 0;
                              EXPECT_TRUE(DecodeTrailingId(key, &id));
                              waiters.push_back(id);
                              return true;
                            })
                  .ok());
  EXPECT_EQ(waiters, std::vector<TaskId>{2});
  std::map<TaskId, std::string> group;
  auto scan_group = [&] {
    group.clear();
    EXPECT_TRUE(txn.ScanIndex(GroupIndexPrefix("g"), "",
                              [&](std::string_view key, std::string_view v) {
                                TaskId id = 0;
                                EXPECT_TRUE(DecodeTrailingId(key, &id));
                                group[id] = std::string(v);
                                return true;
                              })
                    .ok());
  };
  scan_group();
  EXPECT_EQ(group, (std::map<TaskId, std::string>{
                       {1, std::string(1, char(TaskStatus::kPending))},
                       {2, std::string(1, char(TaskStatus::kWaiting))}}));
  // Ending task 1 frees its dedup key within the transaction, and its group
  // entry holds the new status.
  StateRecord one;
  ASSERT_TRUE(txn.GetState(1, &one).ok());
  one.status = TaskStatus::kCancelled;
  txn.Update(one);
  EXPECT_TRUE(txn.GetIndex(DedupIndexKey("k"), &value).IsNotFound());
  scan_group();
  EXPECT_EQ(group[1], std::string(1, char(TaskStatus::kCancelled)));
  // As documented: status and type entries staged here are not visible to
  // the transaction's reads, only what is stored.
  EXPECT_TRUE(txn.GetIndex(StatusIndexKey(TaskStatus::kWaiting, "t", 2), &value)
                  .IsNotFound());
  EXPECT_TRUE(
      txn.GetIndex(StatusIndexKey(TaskStatus::kPending, "t", 1), &value).ok());
  ASSERT_TRUE(store->Commit(&txn).ok());
  EXPECT_EQ(Mismatches(*store), 0u);
  ASSERT_TRUE(store
                  ->GetEntry(ColumnFamily::kIndex,
                             StatusIndexKey(TaskStatus::kWaiting, "t", 2),
                             &value)
                  .ok());
  EXPECT_TRUE(store->GetEntry(ColumnFamily::kIndex, DedupIndexKey("k"), &value)
                  .IsNotFound());
}

TEST_P(TaskStoreTest, ScanIndexMergesStagedAndStoredEntriesInKeyOrder) {
  auto store = OpenStore();
  auto grouped = [&](WriteTxn* txn, TaskId id) {
    StoredTask t = NewTask(id, 0, txn->NextSequence());
    t.spec.group = "h";
    t.state.stored_group = "h";
    InsertTask(txn, t);
  };
  {
    WriteTxn txn(store.get());
    grouped(&txn, 10);
    grouped(&txn, 30);
    grouped(&txn, 50);
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  WriteTxn txn(store.get());
  grouped(&txn, 20);
  grouped(&txn, 40);
  StateRecord r;
  ASSERT_TRUE(txn.GetState(30, &r).ok());
  txn.Delete(30);
  auto scan = [&](std::string_view start, size_t stop_after) {
    std::vector<TaskId> ids;
    Status s = txn.ScanIndex(GroupIndexPrefix("h"), start,
                             [&](std::string_view key, std::string_view) {
                               TaskId id = 0;
                               DecodeTrailingId(key, &id);
                               ids.push_back(id);
                               return ids.size() < stop_after;
                             });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return ids;
  };
  EXPECT_EQ(scan("", 100), (std::vector<TaskId>{10, 20, 40, 50}));
  EXPECT_EQ(scan(GroupIndexKey("h", 15), 100),
            (std::vector<TaskId>{20, 40, 50}));
  EXPECT_EQ(scan(GroupIndexKey("h", 40), 100), (std::vector<TaskId>{40, 50}));
  EXPECT_EQ(scan(GroupIndexKey("h", 41), 100), (std::vector<TaskId>{50}));
  // Stopping on a stored entry, and on a staged one.
  EXPECT_EQ(scan("", 1), (std::vector<TaskId>{10}));
  EXPECT_EQ(scan("", 2), (std::vector<TaskId>{10, 20}));
  EXPECT_EQ(scan("", 3), (std::vector<TaskId>{10, 20, 40}));
  // A group that shares a prefix is not part of the scan.
  EXPECT_TRUE(txn.ScanIndex(GroupIndexPrefix("hh"), "",
                            [&](std::string_view, std::string_view) {
                              ADD_FAILURE() << "entry of another group";
                              return true;
                            })
                  .ok());
  ASSERT_TRUE(store->Commit(&txn).ok());
  EXPECT_EQ(Mismatches(*store), 0u);
}

TEST_P(TaskStoreTest, DeleteRemovesSpecStateHistoryAndEveryIndexEntry) {
  auto store = OpenStore();
  {
    WriteTxn txn(store.get());
    StoredTask t = NewTask(1, 0, txn.NextSequence());
    t.spec.group = "g";
    t.spec.dedup_key = "dk";
    t.state.stored_group = "g";
    t.state.stored_dedup_key = "dk";
    t.state.status = TaskStatus::kRetryScheduled;
    t.state.next_attempt_us = 9000;
    // Failures recorded before the insert go into the history too.
    for (uint32_t i = 1; i <= 3; ++i) {
      RecordFailure(&t.state, i, i * 10, "e" + std::to_string(i));
    }
    InsertTask(&txn, t);
    InsertTask(&txn, NewTask(2, 0, txn.NextSequence()));
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  EXPECT_EQ(KeysOf(*store, ColumnFamily::kTasks, 1), ExpectedKeys(1, 3));
  StateRecord stored;
  ASSERT_TRUE(store->ReadState(1, &stored).ok());
  EXPECT_EQ(Family(*store, ColumnFamily::kIndex).size(),
            ExpectedIndexOf(stored).size() + 2);
  // Status, type, group, dedup and due entries.
  EXPECT_EQ(ExpectedIndexOf(stored).size(), 5u);
  {
    WriteTxn txn(store.get());
    StateRecord r;
    ASSERT_TRUE(txn.GetState(1, &r).ok());
    txn.Delete(1);
    EXPECT_TRUE(txn.GetState(1, &r).IsNotFound());
    std::string value;
    EXPECT_TRUE(txn.GetIndex(DedupIndexKey("dk"), &value).IsNotFound());
    ASSERT_TRUE(txn.entries().at(1).before.has_value());
    EXPECT_FALSE(txn.entries().at(1).after.has_value());
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  TaskBytes task;
  EXPECT_TRUE(store->GetTask(1, &task).IsNotFound());
  EXPECT_TRUE(KeysOf(*store, ColumnFamily::kTasks, 1).empty());
  EXPECT_TRUE(KeysOf(*store, ColumnFamily::kCorrupt, 1).empty());
  // Only task 2's status and type entries are left.
  EXPECT_EQ(Family(*store, ColumnFamily::kIndex),
            (Entries{{StatusIndexKey(TaskStatus::kPending, "t", 2),
                      EncodeQueueValue({0, 2, 0, ""})},
                     {TypeIndexKey("t", 2), ""}}));
  EXPECT_EQ(Mismatches(*store), 0u);
  EXPECT_EQ(CountIn(*store, TaskStatus::kRetryScheduled), 0u);
  EXPECT_EQ(store->CountOf(TaskStatus::kRetryScheduled), 0u);
  {
    WriteTxn txn(store.get());
    StateRecord r;
    ASSERT_TRUE(txn.GetState(2, &r).ok());
    txn.Delete(2);
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  EXPECT_TRUE(Family(*store, ColumnFamily::kTasks).empty());
  EXPECT_TRUE(Family(*store, ColumnFamily::kIndex).empty());
  TypeCounts by_type;
  ASSERT_TRUE(store->NewReadView()->CountByType(&by_type).ok());
  EXPECT_TRUE(by_type.empty());
  for (size_t s = 0; s < kTaskStatusCount; ++s) {
    EXPECT_EQ(store->CountOf(static_cast<TaskStatus>(s)), 0u);
  }
}

TEST_P(TaskStoreTest, ATaskInsertedAndDeletedInOneTransactionLeavesNothing) {
  auto store = OpenStore();
  WriteTxn txn(store.get());
  StoredTask t = NewTask(1, 0, txn.NextSequence());
  t.state.stored_group = "g";
  RecordFailure(&t.state, 1, 1, "e");
  InsertTask(&txn, t);
  StateRecord r;
  ASSERT_TRUE(txn.GetState(1, &r).ok());
  RecordFailure(&r, 2, 2, "f");
  txn.Update(r);
  txn.Delete(1);
  EXPECT_TRUE(txn.GetState(1, &r).IsNotFound());
  ASSERT_TRUE(store->Commit(&txn).ok());
  EXPECT_TRUE(Family(*store, ColumnFamily::kTasks).empty());
  EXPECT_TRUE(Family(*store, ColumnFamily::kIndex).empty());
  EXPECT_EQ(store->CountOf(TaskStatus::kPending), 0u);
}

TEST_P(TaskStoreTest, CountsByType) {
  auto store = OpenStore();
  WriteTxn txn(store.get());
  for (TaskId id = 1; id <= 5; ++id) {
    StoredTask t = PendingTask(id, id % 2 ? "odd" : "even", txn.NextSequence());
    InsertTask(&txn, t);
  }
  ASSERT_TRUE(store->Commit(&txn).ok());
  TypeCounts by_type;
  ASSERT_TRUE(store->NewReadView()->CountByType(&by_type).ok());
  EXPECT_EQ(by_type["odd"][0], 3u);
  EXPECT_EQ(by_type["even"][0], 2u);
  Transition(store.get(), 3,
             [](StateRecord* r) { r->status = TaskStatus::kFailed; });
  ASSERT_TRUE(store->NewReadView()->CountByType(&by_type).ok());
  EXPECT_EQ(by_type["odd"][0], 2u);
  EXPECT_EQ(by_type["odd"][static_cast<size_t>(TaskStatus::kFailed)], 1u);
}

TEST_P(TaskStoreTest, MayHaveIsTheCommittedCountPlusWhatIsStaged) {
  auto store = OpenStore();
  {
    WriteTxn txn(store.get());
    InsertTask(&txn, NewTask(1, 0, txn.NextSequence()));
    InsertTask(&txn, NewTask(2, 0, txn.NextSequence()));
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  WriteTxn txn(store.get());
  EXPECT_EQ(txn.MayHave(TaskStatus::kPending), 2u);
  EXPECT_EQ(txn.MayHave(TaskStatus::kWaiting), 0u);
  StoredTask waiting = NewTask(3, 0, txn.NextSequence());
  waiting.state.status = TaskStatus::kWaiting;
  waiting.state.depends_on = {1};
  InsertTask(&txn, waiting);
  EXPECT_EQ(txn.MayHave(TaskStatus::kWaiting), 1u);
  StateRecord r;
  ASSERT_TRUE(txn.GetState(1, &r).ok());
  r.status = TaskStatus::kRunning;
  txn.Update(r);
  // Never below the truth: the pending task that left is not subtracted.
  EXPECT_GE(txn.MayHave(TaskStatus::kPending), 1u);
  EXPECT_LE(txn.MayHave(TaskStatus::kPending), 2u);
  EXPECT_EQ(txn.MayHave(TaskStatus::kRunning), 1u);
  ASSERT_TRUE(txn.GetState(3, &r).ok());
  r.status = TaskStatus::kCancelled;
  txn.Update(r);
  EXPECT_EQ(txn.MayHave(TaskStatus::kWaiting), 0u);
  ASSERT_TRUE(store->Commit(&txn).ok());
  EXPECT_EQ(store->CountOf(TaskStatus::kPending), 1u);
  EXPECT_EQ(store->CountOf(TaskStatus::kRunning), 1u);
  EXPECT_EQ(store->CountOf(TaskStatus::kCancelled), 1u);
}

// The history keeps the newest kMaxFailureHistory failures, numbered by
// failures_total; older entries are deleted on disk as new ones arrive.
TEST_P(TaskStoreTest, FailureHistoryKeepsTheNewestSixteen) {
  auto store = OpenStore();
  {
    WriteTxn txn(store.get());
    InsertTask(&txn, NewTask(1, 0, txn.NextSequence()));
    InsertTask(&txn, NewTask(2, 0, txn.NextSequence()));
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  uint32_t attempt = 0;
  for (int round = 0; round < 6; ++round) {
    // 1, 2, ... failures per round, some rounds with two Updates of the
    // task in one transaction.
    WriteTxn txn(store.get());
    for (int update = 0; update < 1 + round % 2; ++update) {
      StateRecord r;
      ASSERT_TRUE(txn.GetState(1, &r).ok());
      for (int f = 0; f <= round; ++f) {
        ++attempt;
        RecordFailure(&r, attempt, 1000 + attempt,
                      "error " + std::to_string(attempt));
      }
      r.attempts = attempt;
      txn.Update(r);
    }
    ASSERT_TRUE(store->Commit(&txn).ok());
    StateRecord stored;
    ASSERT_TRUE(store->ReadState(1, &stored).ok());
    EXPECT_EQ(stored.failures_total, attempt);
    EXPECT_TRUE(stored.new_failures.empty());
    EXPECT_EQ(stored.last_error, "error " + std::to_string(attempt));
    EXPECT_EQ(KeysOf(*store, ColumnFamily::kTasks, 1), ExpectedKeys(1, attempt))
        << "after " << attempt << " failures";
    TaskBytes task;
    ASSERT_TRUE(ReadVerified(*store, 1, &task).ok());
    uint32_t first =
        attempt > kMaxFailureHistory ? attempt - kMaxFailureHistory + 1 : 1;
    EXPECT_EQ(FailureAttempts(task.view()), Range(first, attempt));
  }
  ASSERT_GT(attempt, kMaxFailureHistory);

  // Twenty failures in one Update: the oldest four never reach the store.
  Transition(store.get(), 2, [](StateRecord* r) {
    for (uint32_t i = 1; i <= 20; ++i) {
      RecordFailure(r, i, i, "burst " + std::to_string(i));
    }
  });
  EXPECT_EQ(KeysOf(*store, ColumnFamily::kTasks, 2), ExpectedKeys(2, 20));
  TaskBytes task;
  ASSERT_TRUE(ReadVerified(*store, 2, &task).ok());
  EXPECT_EQ(FailureAttempts(task.view()), Range(5, 20));
  TaskInfo info;
  FillTaskInfo(task.view(), &info);
  ASSERT_EQ(info.failures.size(), kMaxFailureHistory);
  EXPECT_EQ(info.failures.front().error, "burst 5");
  EXPECT_EQ(info.failures.back().error, "burst 20");
  EXPECT_EQ(info.last_error, "burst 20");

  // A state-only transition leaves the history alone.
  Transition(store.get(), 2,
             [](StateRecord* r) { r->status = TaskStatus::kFailed; });
  EXPECT_EQ(KeysOf(*store, ColumnFamily::kTasks, 2), ExpectedKeys(2, 20));

  // Deleting a task with a full history removes every entry.
  {
    WriteTxn txn(store.get());
    StateRecord r;
    ASSERT_TRUE(txn.GetState(1, &r).ok());
    txn.Delete(1);
    ASSERT_TRUE(txn.GetState(2, &r).ok());
    txn.Delete(2);
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  EXPECT_TRUE(Family(*store, ColumnFamily::kTasks).empty());
}

// A transition rewrites the state only: the spec's stored bytes stay as the
// enqueue wrote them.
TEST_P(TaskStoreTest, StateOnlyTransitionsLeaveTheSpecUntouched) {
  auto store = OpenStore();
  {
    WriteTxn txn(store.get());
    StoredTask t = NewTask(1, 0, txn.NextSequence());
    t.spec.payload = std::string(10000, 'x');
    t.spec.group = "g";
    t.state.stored_group = "g";
    InsertTask(&txn, t);
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  std::string spec_before;
  ASSERT_TRUE(
      store->GetStoredForTesting(ColumnFamily::kTasks, SpecKey(1), &spec_before)
          .ok());
  std::string state_before;
  ASSERT_TRUE(store
                  ->GetStoredForTesting(ColumnFamily::kTasks, StateKey(1),
                                        &state_before)
                  .ok());
  EXPECT_LT(state_before.size(), 300u) << "a state holds no payload";
  auto check = [&](const char* after) {
    std::string spec;
    ASSERT_TRUE(
        store->GetStoredForTesting(ColumnFamily::kTasks, SpecKey(1), &spec)
            .ok());
    EXPECT_EQ(spec, spec_before) << "after " << after;
    std::string opened;
    ASSERT_TRUE(store->GetSpec(1, &opened).ok());
    EXPECT_EQ(opened, spec_before);
  };
  Transition(store.get(), 1, [](StateRecord* r) {
    r->status = TaskStatus::kRunning;
    r->attempts = 1;
  });
  check("claim");
  Transition(store.get(), 1, [](StateRecord* r) {
    r->status = TaskStatus::kRetryScheduled;
    r->next_attempt_us = 777;
    RecordFailure(r, 1, 700, "no");
  });
  check("failure");
  Transition(store.get(), 1, [](StateRecord* r) {
    r->status = TaskStatus::kRunning;
    r->next_attempt_us = 0;
    r->attempts = 2;
    r->cancel_requested = true;
  });
  check("second claim");
  Transition(store.get(), 1,
             [](StateRecord* r) { r->status = TaskStatus::kCancelled; });
  check("cancel");
  std::string state_after;
  ASSERT_TRUE(
      store
          ->GetStoredForTesting(ColumnFamily::kTasks, StateKey(1), &state_after)
          .ok());
  EXPECT_NE(state_after, state_before);
  EXPECT_EQ(Mismatches(*store), 0u);
}

TEST_P(TaskStoreTest, ScanTasksGathersEachTasksValues) {
  auto store = OpenStore();
  // Tasks 1..7 with kFailures[id] failures; task 4 is deleted.
  const uint32_t kFailures[] = {0, 0, 1, 2, 3, 20, 0, 5};
  {
    WriteTxn txn(store.get());
    for (TaskId id = 1; id <= 7; ++id) {
      StoredTask t = NewTask(id, 0, txn.NextSequence());
      for (uint32_t f = 1; f <= kFailures[id]; ++f) {
        RecordFailure(&t.state, f, f, "task " + std::to_string(id));
      }
      InsertTask(&txn, t);
    }
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  {
    WriteTxn txn(store.get());
    StateRecord r;
    ASSERT_TRUE(txn.GetState(4, &r).ok());
    txn.Delete(4);
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  std::vector<TaskId> ids;
  Status s = store->ScanTasks(
      ColumnFamily::kTasks, 0,
      [&](TaskId id, TaskBytes& task, const Status& opened) {
        ids.push_back(id);
        EXPECT_TRUE(opened.ok()) << opened.ToString();
        EXPECT_TRUE(task.has_spec());
        EXPECT_TRUE(task.has_state());
        uint32_t kept = std::min(kFailures[id], kMaxFailureHistory);
        EXPECT_EQ(task.failure_count(), kept) << id;
        Status v = task.Verify(id);
        EXPECT_TRUE(v.ok()) << v.ToString();
        if (v.ok()) {
          uint32_t first = kFailures[id] - kept + 1;
          EXPECT_EQ(
              FailureAttempts(task.view()),
              kept == 0 ? std::vector<uint32_t>{} : Range(first, kFailures[id]))
              << id;
          TaskInfo info;
          FillTaskInfo(task.view(), &info);
          EXPECT_EQ(info.payload, "p" + std::to_string(id));
        }
        return true;
      });
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ids, (std::vector<TaskId>{1, 2, 3, 5, 6, 7}));

  auto collect = [&](TaskId from, size_t stop_after) {
    std::vector<TaskId> got;
    EXPECT_TRUE(store
                    ->ScanTasks(ColumnFamily::kTasks, from,
                                [&](TaskId id, TaskBytes&, const Status&) {
                                  got.push_back(id);
                                  return got.size() < stop_after;
                                })
                    .ok());
    return got;
  };
  EXPECT_EQ(collect(4, 100), (std::vector<TaskId>{5, 6, 7}));
  EXPECT_EQ(collect(6, 100), (std::vector<TaskId>{6, 7}));
  EXPECT_EQ(collect(8, 100), std::vector<TaskId>{});
  EXPECT_EQ(collect(0, 2), (std::vector<TaskId>{1, 2}));
  EXPECT_EQ(collect(0, 6), (std::vector<TaskId>{1, 2, 3, 5, 6, 7}));
  EXPECT_TRUE(collect(0, 1) == std::vector<TaskId>{1});
  ids.clear();
  ASSERT_TRUE(store
                  ->ScanTasks(ColumnFamily::kCorrupt, 0,
                              [&](TaskId id, TaskBytes&, const Status&) {
                                ids.push_back(id);
                                return true;
                              })
                  .ok());
  EXPECT_TRUE(ids.empty());
  EXPECT_TRUE(
      store
          ->ScanTasks(ColumnFamily::kIndex, 0,
                      [](TaskId, TaskBytes&, const Status&) { return true; })
          .IsInvalidArgument());

  // GetTask into one reused TaskBytes: nothing of the previous task stays.
  TaskBytes reused;
  ASSERT_TRUE(ReadVerified(*store, 5, &reused).ok());
  EXPECT_EQ(reused.failure_count(), kMaxFailureHistory);
  ASSERT_TRUE(ReadVerified(*store, 1, &reused).ok());
  EXPECT_EQ(reused.failure_count(), 0u);
  EXPECT_TRUE(reused.view().failures->empty());
  ASSERT_TRUE(ReadVerified(*store, 7, &reused).ok());
  EXPECT_EQ(FailureAttempts(reused.view()), Range(1, 5));

  // A damaged value is passed on, opened but not verified: the visitor's
  // Verify says so.
  ASSERT_TRUE(store->PutRawForTesting(StateKey(5), "damaged").ok());
  ids.clear();
  ASSERT_TRUE(store
                  ->ScanTasks(ColumnFamily::kTasks, 5,
                              [&](TaskId id, TaskBytes& task, const Status&) {
                                ids.push_back(id);
                                EXPECT_EQ(task.Verify(id).ok(), id != 5) << id;
                                return true;
                              })
                  .ok());
  EXPECT_EQ(ids, (std::vector<TaskId>{5, 6, 7}));
}

// Inserts, updates and deletes at random, several to a task in one
// transaction; after every commit the index family must be exactly what
// the states imply (computed here from the documented layout), CheckIndexes
// must agree, and so must the counts and the values in `tasks`.
TEST_P(TaskStoreTest, IndexMatchesTheModelAfterRandomOperations) {
  auto store = OpenStore();
  std::mt19937_64 rng(GetParam() == Durability::kMemory ? 99 : 7);
  const char* const kTypes[] = {"alpha", "beta", "gamma"};
  const char* const kGroups[] = {"", "g1", "g2"};
  std::map<TaskId, StateRecord> model;
  TaskId next_id = 1;
  int64_t now = 1000;
  for (int round = 0; round < 80; ++round) {
    WriteTxn txn(store.get());
    std::map<TaskId, StateRecord> staged = model;
    int ops = 1 + static_cast<int>(rng() % 30);
    for (int i = 0; i < ops; ++i) {
      int op = static_cast<int>(rng() % 10);
      if (op < 3 || staged.empty()) {
        TaskId id = next_id++;
        StoredTask t = PendingTask(id, kTypes[rng() % 3], txn.NextSequence(),
                                   "payload " + std::to_string(id));
        t.spec.group = kGroups[rng() % 3];
        t.state.stored_group = t.spec.group;
        t.state.priority = static_cast<int32_t>(rng() % 5) - 2;
        if (rng() % 3 == 0) {
          t.spec.dedup_key = "d" + std::to_string(id);
          t.state.stored_dedup_key = t.spec.dedup_key;
        }
        if (rng() % 4 == 0) t.state.next_attempt_us = 5000 + rng() % 1000;
        if (rng() % 5 == 0 && id > 1) {
          t.state.status = TaskStatus::kWaiting;
          t.state.depends_on = {1 + rng() % (id - 1)};
          if (rng() % 2 && id > 2 && t.state.depends_on[0] != id - 2) {
            t.state.depends_on.push_back(id - 2);
          }
        }
        StateRecord copy = t.state;
        copy.new_failures.clear();
        staged[id] = copy;
        InsertTask(&txn, std::move(t));
        continue;
      }
      auto it = staged.begin();
      std::advance(it, rng() % staged.size());
      TaskId id = it->first;
      StateRecord r;
      Status s = txn.GetState(id, &r);
      ASSERT_TRUE(s.ok()) << id << ": " << s.ToString();
      if (op == 9) {
        txn.Delete(id);
        staged.erase(id);
        continue;
      }
      r.status = static_cast<TaskStatus>(rng() % kTaskStatusCount);
      r.next_attempt_us = rng() % 2 ? 0 : 6000 + rng() % 1000;
      r.updated_us = ++now;
      r.depends_on.clear();
      if (r.status == TaskStatus::kWaiting && id > 1) {
        r.depends_on = {1 + rng() % (id - 1)};
      }
      if (op == 8) RecordFailure(&r, r.attempts + 1, now, "failed");
      StateRecord copy = r;
      copy.new_failures.clear();
      staged[id] = copy;
      txn.Update(std::move(r));
    }
    Status s = store->Commit(&txn);
    ASSERT_TRUE(s.ok()) << s.ToString();
    model = std::move(staged);

    Entries want;
    std::array<uint64_t, kTaskStatusCount> counts{};
    for (const auto& [id, state] : model) {
      Entries e = ExpectedIndexOf(state);
      want.insert(e.begin(), e.end());
      ++counts[static_cast<size_t>(state.status)];
      // IndexEntriesOf says the same.
      Entries derived;
      for (const IndexEntry& entry : IndexEntriesOf(state)) {
        derived[entry.key] = entry.value;
      }
      ASSERT_EQ(derived, e) << "task " << id;
    }
    Entries index = Family(*store, ColumnFamily::kIndex);
    ASSERT_EQ(index.size(), want.size()) << "round " << round;
    ASSERT_EQ(index, want) << "round " << round;
    std::vector<std::string> problems;
    ASSERT_EQ(Mismatches(*store, &problems), 0u)
        << "round " << round << ": " << (problems.empty() ? "" : problems[0]);
    for (size_t i = 0; i < kTaskStatusCount; ++i) {
      ASSERT_EQ(store->CountOf(static_cast<TaskStatus>(i)), counts[i])
          << "round " << round << " status " << i;
    }
  }
  // The values in `tasks` are exactly the model's tasks, each with its
  // state as the model has it.
  std::set<TaskId> listed;
  ASSERT_TRUE(store
                  ->ScanTasks(ColumnFamily::kTasks, 0,
                              [&](TaskId id, TaskBytes& task, const Status& o) {
                                EXPECT_TRUE(o.ok());
                                listed.insert(id);
                                StateRecord state;
                                EXPECT_TRUE(
                                    DecodeState(id, task.state(), &state).ok());
                                auto it = model.find(id);
                                if (it == model.end()) {
                                  ADD_FAILURE() << "deleted task " << id;
                                  return true;
                                }
                                EXPECT_EQ(state.status, it->second.status);
                                EXPECT_EQ(state.failures_total,
                                          it->second.failures_total);
                                EXPECT_EQ(task.failure_count(),
                                          std::min(it->second.failures_total,
                                                   kMaxFailureHistory));
                                EXPECT_TRUE(task.Verify(id).ok());
                                return true;
                              })
                  .ok());
  EXPECT_EQ(listed.size(), model.size());
  TypeCounts by_type;
  ASSERT_TRUE(store->NewReadView()->CountByType(&by_type).ok());
  TypeCounts want_types;
  for (const auto& [id, state] : model) {
    ++want_types[state.type][static_cast<size_t>(state.status)];
  }
  EXPECT_EQ(by_type, want_types);
}

TEST_P(TaskStoreTest, CheckIndexesFindsWrongMissingAndExtraEntries) {
  auto store = OpenStore();
  {
    WriteTxn txn(store.get());
    InsertTask(&txn, NewTask(1, 0, txn.NextSequence()));
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  // A state rewritten behind the index's back: its old entry has no task,
  // its new one is missing.
  StateRecord r;
  ASSERT_TRUE(store->ReadState(1, &r).ok());
  r.status = TaskStatus::kRunning;
  ASSERT_TRUE(store->PutRawForTesting(StateKey(1), EncodeState(r)).ok());
  std::vector<std::string> problems;
  EXPECT_EQ(Mismatches(*store, &problems), 2u);
  size_t without = 0, missing = 0;
  for (const std::string& p : problems) {
    without += p.find("entry without a task") != std::string::npos;
    missing += p.find("missing entry") != std::string::npos;
  }
  EXPECT_EQ(without, 1u);
  EXPECT_EQ(missing, 1u);
  // The same key with another value.
  r.status = TaskStatus::kPending;
  r.priority = 9;
  ASSERT_TRUE(store->PutRawForTesting(StateKey(1), EncodeState(r)).ok());
  EXPECT_EQ(Mismatches(*store, &problems), 1u);
  EXPECT_NE(problems[0].find("wrong value"), std::string::npos) << problems[0];
}

// The writer keeps the committed states of running tasks, so that an
// outcome reads nothing; a raw write drops what it keeps.
TEST_P(TaskStoreTest, RunningStatesAreCachedUntilARawWrite) {
  auto store = OpenStore();
  {
    WriteTxn txn(store.get());
    InsertTask(&txn, NewTask(1, 0, txn.NextSequence()));
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  Transition(store.get(), 1, [](StateRecord* r) {
    r->status = TaskStatus::kRunning;
    r->attempts = 1;
    RecordFailure(r, 0, 1, "earlier");
  });
  {
    WriteTxn txn(store.get());
    StateRecord r;
    ASSERT_TRUE(txn.GetState(1, &r).ok());
    EXPECT_EQ(r.status, TaskStatus::kRunning);
    EXPECT_EQ(r.failures_total, 1u);
    EXPECT_TRUE(r.new_failures.empty());
  }
  ASSERT_TRUE(store->PutRawForTesting(StateKey(1), "garbage").ok());
  WriteTxn txn(store.get());
  StateRecord r;
  EXPECT_TRUE(txn.GetState(1, &r).IsCorruption());
}

TEST_P(TaskStoreTest, ForEachEntryStopsAtTheFirstError) {
  auto store = OpenStore();
  {
    WriteTxn txn(store.get());
    for (TaskId id = 1; id <= 3; ++id) {
      InsertTask(&txn, NewTask(id, 0, txn.NextSequence()));
    }
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  size_t calls = 0;
  Status s = store->ForEachEntry(
      ColumnFamily::kIndex, StatusIndexPrefix(TaskStatus::kPending),
      [&](std::string_view, std::string_view) {
        return ++calls == 2 ? Status::Aborted("stop") : Status::OK();
      });
  EXPECT_TRUE(s.IsAborted()) << s.ToString();
  EXPECT_EQ(calls, 2u);
  size_t visited = 0;
  ASSERT_TRUE(store
                  ->Scan(ColumnFamily::kIndex,
                         StatusIndexPrefix(TaskStatus::kPending),
                         StatusIndexKey(TaskStatus::kPending, "t", 2),
                         [&](std::string_view, std::string_view) {
                           ++visited;
                           return true;
                         })
                  .ok());
  EXPECT_EQ(visited, 2u);
}

// Quarantine moves every value of a task aside, as stored; Reinstate moves
// them back with the state it is given and the index entries that state
// implies.
TEST_P(TaskStoreTest, QuarantineAndReinstateMoveEveryValue) {
  auto store = OpenStore();
  {
    WriteTxn txn(store.get());
    StoredTask t = NewTask(1, 0, txn.NextSequence());
    t.spec.group = "g";
    t.spec.dedup_key = "dk";
    t.state.stored_group = "g";
    t.state.stored_dedup_key = "dk";
    for (uint32_t i = 1; i <= 3; ++i) RecordFailure(&t.state, i, i, "e");
    InsertTask(&txn, t);
    InsertTask(&txn, NewTask(2, 0, txn.NextSequence()));
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  Entries before = Family(*store, ColumnFamily::kTasks, TaskPrefix(1));
  ASSERT_EQ(before.size(), 5u);
  {
    // As the writer sets aside a task whose spec a worker could not read:
    // its state is readable, so every index entry is known.
    WriteTxn txn(store.get());
    StateRecord r;
    ASSERT_TRUE(txn.GetState(1, &r).ok());
    std::vector<std::string> keys;
    for (IndexEntry& e : IndexEntriesOf(r)) keys.push_back(e.key);
    txn.Quarantine(1, keys);
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  EXPECT_TRUE(KeysOf(*store, ColumnFamily::kTasks, 1).empty());
  EXPECT_EQ(Family(*store, ColumnFamily::kCorrupt), before);
  EXPECT_EQ(Mismatches(*store), 0u);
  EXPECT_EQ(Family(*store, ColumnFamily::kIndex).size(), 2u);
  TaskBytes task;
  Status missing = store->GetTask(1, &task);
  ASSERT_TRUE(missing.IsNotFound());
  Status explained = store->NewReadView()->ExplainMissing(1, missing);
  EXPECT_NE(explained.message().find("can be now; Release(1)"),
            std::string::npos)
      << explained.ToString();

  // The writer reads it back from `corrupt`.
  StateRecord stored;
  size_t visits = 0;
  ASSERT_TRUE(
      store
          ->ScanTasks(ColumnFamily::kCorrupt, 1,
                      [&](TaskId id, TaskBytes& values, const Status& opened) {
                        ++visits;
                        EXPECT_EQ(id, 1u);
                        EXPECT_TRUE(opened.ok());
                        EXPECT_EQ(values.failure_count(), 3u);
                        EXPECT_TRUE(values.Verify(id).ok());
                        EXPECT_TRUE(
                            DecodeState(id, values.state(), &stored).ok());
                        return false;
                      })
          .ok());
  EXPECT_EQ(visits, 1u);
  {
    WriteTxn txn(store.get());
    StateRecord r;
    ASSERT_TRUE(txn.GetState(1, &r).IsNotFound());
    StateRecord changed = stored;
    changed.status = TaskStatus::kHeld;
    txn.Reinstate(changed, stored);
    ASSERT_TRUE(txn.GetState(1, &r).ok());
    EXPECT_EQ(r.status, TaskStatus::kHeld);
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  EXPECT_TRUE(Family(*store, ColumnFamily::kCorrupt).empty());
  Entries after = Family(*store, ColumnFamily::kTasks, TaskPrefix(1));
  ASSERT_EQ(after.size(), 5u);
  for (const auto& [key, value] : before) {
    if (key == StateKey(1)) continue;
    EXPECT_EQ(after[key], value) << TaskValueName(key) << " moved as it was";
  }
  ASSERT_TRUE(ReadVerified(*store, 1, &task).ok());
  EXPECT_EQ(StatusOf(*task.view().state), TaskStatus::kHeld);
  EXPECT_EQ(FailureAttempts(task.view()), Range(1, 3));
  EXPECT_EQ(Mismatches(*store), 0u);
  std::string value;
  ASSERT_TRUE(
      store->GetEntry(ColumnFamily::kIndex, GroupIndexKey("g", 1), &value)
          .ok());
  EXPECT_EQ(value, std::string(1, char(TaskStatus::kHeld)));
  // The counts were off while it was aside; the next open counts again.
  ASSERT_TRUE(store->Reopen().ok());
  EXPECT_EQ(store->CountOf(TaskStatus::kHeld), 1u);
  EXPECT_EQ(store->CountOf(TaskStatus::kPending), 1u);
  EXPECT_EQ(Mismatches(*store), 0u);
}

// A task set aside with its index entries unknown (they stay behind) and
// reinstated in another status: the stale entries go, the new ones come.
TEST_P(TaskStoreTest, ReinstateReplacesTheEntriesLeftBehind) {
  auto store = OpenStore();
  {
    WriteTxn txn(store.get());
    StoredTask t = NewTask(1, 0, txn.NextSequence());
    t.state.stored_group = "g";
    t.state.next_attempt_us = 4000;
    InsertTask(&txn, t);
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  {
    WriteTxn txn(store.get());
    txn.Quarantine(1, {});
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  // Status, type, group and due entries left behind.
  EXPECT_EQ(Family(*store, ColumnFamily::kIndex).size(), 4u);
  EXPECT_EQ(Mismatches(*store), 4u);
  StateRecord stored;
  ASSERT_TRUE(
      store
          ->ScanTasks(ColumnFamily::kCorrupt, 0,
                      [&](TaskId id, TaskBytes& values, const Status&) {
                        EXPECT_TRUE(
                            DecodeState(id, values.state(), &stored).ok());
                        return false;
                      })
          .ok());
  {
    WriteTxn txn(store.get());
    StateRecord changed = stored;
    changed.status = TaskStatus::kCancelled;
    changed.next_attempt_us = 0;
    txn.Reinstate(changed, stored);
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  EXPECT_EQ(Mismatches(*store), 0u);
  EXPECT_TRUE(Family(*store, ColumnFamily::kIndex, DueIndexPrefix()).empty());
  EXPECT_EQ(Family(*store, ColumnFamily::kIndex).size(), 3u);
  ASSERT_TRUE(store->Reopen().ok());
  EXPECT_EQ(Mismatches(*store), 0u);
  EXPECT_EQ(store->CountOf(TaskStatus::kPending), 0u);
  EXPECT_EQ(store->CountOf(TaskStatus::kCancelled), 1u);
}

INSTANTIATE_TEST_SUITE_P(AllModes, TaskStoreTest,
                         ::testing::Values(Durability::kSync,
                                           Durability::kRelaxed,
                                           Durability::kMemory),
                         [](const auto& param_info) {
                           return std::string(DurabilityName(param_info.param));
                         });

// Tests of behaviour that does not depend on the durability mode.
class TaskStoreMemoryTest : public ::testing::Test {
 protected:
  std::unique_ptr<TaskStore> OpenStore() {
    return OpenStoreAt(dir_.Sub("db"), Durability::kMemory);
  }
  TempDir dir_;
};

// The writer reinstates a task that was running as a crash leaves it: the
// attempt is interrupted (actors/transitions.cc Interrupt), which records a
// failure on the state with RecordFailure before WriteTxn::Reinstate.
TEST_F(TaskStoreMemoryTest, ReinstateWritesTheFailuresTheStateRecorded) {
  auto store = OpenStore();
  {
    WriteTxn txn(store.get());
    StoredTask t = NewTask(1, 0, txn.NextSequence());
    t.state.status = TaskStatus::kRunning;
    t.state.attempts = 3;
    RecordFailure(&t.state, 1, 10, "first");
    RecordFailure(&t.state, 2, 20, "second");
    InsertTask(&txn, t);
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  {
    WriteTxn txn(store.get());
    txn.Quarantine(1, {});
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  StateRecord stored;
  ASSERT_TRUE(
      store
          ->ScanTasks(ColumnFamily::kCorrupt, 0,
                      [&](TaskId id, TaskBytes& values, const Status&) {
                        EXPECT_TRUE(
                            DecodeState(id, values.state(), &stored).ok());
                        return false;
                      })
          .ok());
  ASSERT_EQ(stored.failures_total, 2u);
  {
    WriteTxn txn(store.get());
    StateRecord interrupted = stored;
    interrupted.status = TaskStatus::kRetryScheduled;
    RecordFailure(&interrupted, 3, 30, "interrupted");
    txn.Reinstate(interrupted, stored);
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  TaskBytes task;
  ASSERT_TRUE(ReadVerified(*store, 1, &task).ok());
  EXPECT_EQ(task.view().state->failures_total(), 3u);
  // The interrupted attempt's failure is written after those moved back:
  // no hole at number 2 that failures_total counts.
  EXPECT_EQ(FailureAttempts(task.view()), Range(1, 3));
  EXPECT_EQ(KeysOf(*store, ColumnFamily::kTasks, 1), ExpectedKeys(1, 3));
  // And the next failure goes after it.
  Transition(store.get(), 1, [](StateRecord* r) {
    r->status = TaskStatus::kFailed;
    RecordFailure(r, 4, 40, "fourth");
  });
  ASSERT_TRUE(ReadVerified(*store, 1, &task).ok());
  EXPECT_EQ(FailureAttempts(task.view()), Range(1, 4));
}

// Once a task is quarantined in a transaction it is gone from `tasks` when
// the transaction commits, so later reads in the same transaction must not
// offer its state for an Update (actors/writer.cc SetAside quarantines a
// task whose state it has read; a later command in the same batch may load
// the task again).
TEST_F(TaskStoreMemoryTest, AQuarantinedTaskIsGoneForTheRestOfTheTransaction) {
  auto store = OpenStore();
  {
    WriteTxn txn(store.get());
    InsertTask(&txn, NewTask(1, 0, txn.NextSequence()));
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  WriteTxn txn(store.get());
  StateRecord r;
  ASSERT_TRUE(txn.GetState(1, &r).ok());
  std::vector<std::string> keys;
  for (IndexEntry& e : IndexEntriesOf(r)) keys.push_back(e.key);
  txn.Quarantine(1, keys);
  Status s = txn.GetState(1, &r);
  // Set aside, it is gone for the rest of the transaction: an Update staged
  // on it would commit index entries for a task no longer in `tasks`.
  EXPECT_FALSE(s.ok()) << "GetState after Quarantine returned the state";
  if (s.ok()) {
    r.status = TaskStatus::kCancelled;
    txn.Update(r);
  }
  ASSERT_TRUE(store->Commit(&txn).ok());
  TaskBytes task;
  EXPECT_TRUE(store->GetTask(1, &task).IsNotFound());
  std::vector<std::string> problems;
  EXPECT_EQ(Mismatches(*store, &problems), 0u)
      << (problems.empty() ? "" : problems[0]);
}

// A dedup key changes hands in one transaction: the task holding it ends,
// and another task (here one with a lower id, e.g. a failed task retried by
// hand) takes it. The removal must not be applied after the new entry.
TEST_F(TaskStoreMemoryTest, ADedupKeyChangingHandsInOneTransactionStays) {
  auto store = OpenStore();
  {
    WriteTxn txn(store.get());
    StoredTask earlier = NewTask(5, 0, txn.NextSequence());
    earlier.spec.dedup_key = "k";
    earlier.state.stored_dedup_key = "k";
    earlier.state.status = TaskStatus::kFailed;
    InsertTask(&txn, earlier);
    StoredTask holder = NewTask(9, 0, txn.NextSequence());
    holder.spec.dedup_key = "k";
    holder.state.stored_dedup_key = "k";
    InsertTask(&txn, holder);
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  std::string value;
  ASSERT_TRUE(
      store->GetEntry(ColumnFamily::kIndex, DedupIndexKey("k"), &value).ok());
  EXPECT_EQ(value, IdValue(9));
  {
    WriteTxn txn(store.get());
    StateRecord holder;
    ASSERT_TRUE(txn.GetState(9, &holder).ok());
    holder.status = TaskStatus::kCancelled;
    txn.Update(holder);
    // The key is free as the transaction sees it...
    EXPECT_TRUE(txn.GetIndex(DedupIndexKey("k"), &value).IsNotFound());
    StateRecord earlier;
    ASSERT_TRUE(txn.GetState(5, &earlier).ok());
    earlier.status = TaskStatus::kPending;
    txn.Update(earlier);
    // ...and then held by task 5.
    ASSERT_TRUE(txn.GetIndex(DedupIndexKey("k"), &value).ok());
    EXPECT_EQ(value, IdValue(5));
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  // Removals go before puts: task 9's SingleDelete of the dedup entry must
  // not remove task 5's Put of the same key, staged earlier in id order.
  Status s = store->GetEntry(ColumnFamily::kIndex, DedupIndexKey("k"), &value);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(value, IdValue(5));
  std::vector<std::string> problems;
  EXPECT_EQ(Mismatches(*store, &problems), 0u)
      << (problems.empty() ? "" : problems[0]);
}

// Prefetch reads the states of several tasks in one lookup; GetState then
// finds them, and reports what could not be read as it would have.
TEST_F(TaskStoreMemoryTest, PrefetchedStatesAreWhatGetStateReturns) {
  StoreOptions options;
  options.path = dir_.Sub("prefetch");
  options.durability = Durability::kMemory;
  options.state_cache_entries = 0;
  std::unique_ptr<TaskStore> store;
  ASSERT_TRUE(TaskStore::Open(options, &store).ok());
  {
    WriteTxn txn(store.get());
    for (TaskId id = 1; id <= 4; ++id) {
      InsertTask(&txn,
                 NewTask(id, static_cast<int32_t>(id), txn.NextSequence()));
    }
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  ASSERT_TRUE(store->PutRawForTesting(StateKey(4), "garbage").ok());
  WriteTxn txn(store.get());
  StateRecord r;
  ASSERT_TRUE(txn.GetState(2, &r).ok());
  r.status = TaskStatus::kRunning;
  txn.Update(r);
  ASSERT_TRUE(txn.Prefetch({1, 2, 3, 4, 99}).ok());
  ASSERT_TRUE(txn.GetState(1, &r).ok());
  EXPECT_EQ(r.priority, 1);
  EXPECT_TRUE(r.new_failures.empty());
  // A staged state is not replaced by the stored one.
  ASSERT_TRUE(txn.GetState(2, &r).ok());
  EXPECT_EQ(r.status, TaskStatus::kRunning);
  ASSERT_TRUE(txn.GetState(3, &r).ok());
  EXPECT_EQ(r.priority, 3);
  EXPECT_TRUE(txn.GetState(4, &r).IsCorruption());
  EXPECT_TRUE(txn.GetState(99, &r).IsNotFound());
  // A prefetched state is the `before` of a later Update.
  ASSERT_TRUE(txn.GetState(3, &r).ok());
  r.status = TaskStatus::kHeld;
  txn.Update(r);
  ASSERT_TRUE(txn.entries().at(3).before.has_value());
  EXPECT_EQ(txn.entries().at(3).before->status, TaskStatus::kPending);
  ASSERT_TRUE(store->Commit(&txn).ok());
  EXPECT_EQ(Mismatches(*store), 2u)
      << "only task 4's unreadable state, under its status and type entries";
  EXPECT_EQ(store->CountOf(TaskStatus::kPending), 2u);
  EXPECT_EQ(store->CountOf(TaskStatus::kHeld), 1u);
}

TEST(TaskStoreDiskTest, ReopenKeepsMetaAndReservesIds) {
  TempDir dir;
  StoreOptions options;
  options.path = dir.Sub("db");
  uint64_t reserved = 0;
  uint64_t batches = 0;
  {
    std::unique_ptr<TaskStore> store;
    ASSERT_TRUE(TaskStore::Open(options, &store).ok());
    EXPECT_EQ(store->reserved_ids(), 1u);
    WriteTxn txn(store.get());
    InsertTask(&txn, NewTask(5, 0, txn.NextSequence()));
    ASSERT_TRUE(store->Commit(&txn).ok());
    reserved = store->reserved_ids();
    EXPECT_GE(reserved, 5 + kIdReservationBlock / 2);
    batches = store->committed_batches();
    EXPECT_GE(batches, 1u);
  }
  std::unique_ptr<TaskStore> store;
  ASSERT_TRUE(TaskStore::Open(options, &store).ok());
  EXPECT_EQ(store->reserved_ids(), reserved);
  EXPECT_EQ(store->committed_batches(), batches);
  EXPECT_EQ(store->CountOf(TaskStatus::kPending), 1u);
  {
    WriteTxn txn(store.get());
    EXPECT_EQ(txn.NextSequence(), 2u);
  }
  // Reopen in place keeps the same.
  ASSERT_TRUE(store->Reopen().ok());
  EXPECT_EQ(store->reserved_ids(), reserved);
  EXPECT_EQ(store->CountOf(TaskStatus::kPending), 1u);
  {
    WriteTxn txn(store.get());
    EXPECT_EQ(txn.NextSequence(), 2u);
  }
  TaskBytes task;
  ASSERT_TRUE(ReadVerified(*store, 5, &task).ok());
  // The counts by type were loaded too: a transition moves them on.
  Transition(store.get(), 5,
             [](StateRecord* r) { r->status = TaskStatus::kRunning; });
  store.reset();
  ASSERT_TRUE(TaskStore::Open(options, &store).ok());
  TypeCounts by_type;
  ASSERT_TRUE(store->NewReadView()->CountByType(&by_type).ok());
  std::array<uint64_t, kTaskStatusCount> running{};
  running[static_cast<size_t>(TaskStatus::kRunning)] = 1;
  EXPECT_EQ(by_type["t"], running);
  EXPECT_EQ(CountIn(*store, TaskStatus::kRunning), 1u);
  EXPECT_EQ(CountIn(*store, TaskStatus::kPending), 0u);
}

// Inserts tasks 1 to 3, pending, each with one failure in its history.
void InsertThreeWithAFailure(TaskStore* store) {
  WriteTxn txn(store);
  for (TaskId id = 1; id <= 3; ++id) {
    StoredTask t = NewTask(id, 0, txn.NextSequence());
    RecordFailure(&t.state, 1, 1, "with a history");
    InsertTask(&txn, t);
  }
  ASSERT_TRUE(store->Commit(&txn).ok());
}

// After a quarantine, the next open counts the tasks again from RocksDB's
// iterator, whose bytes need not be aligned for FlatBuffers (UBSan reported
// a misaligned load in verification under the ASan+UBSan build).
TEST(TaskStoreDiskTest, ReopenAfterAQuarantineCountsTheRemainingTasks) {
  TempDir dir;
  StoreOptions options;
  options.path = dir.Sub("db");
  {
    std::unique_ptr<TaskStore> store;
    ASSERT_TRUE(TaskStore::Open(options, &store).ok());
    InsertThreeWithAFailure(store.get());
    ASSERT_TRUE(store->Flush().ok());
    ASSERT_TRUE(store->PutRawForTesting(StateKey(2), "garbage").ok());
    WriteTxn quarantine(store.get());
    StateRecord r;
    ASSERT_TRUE(quarantine.GetState(2, &r).IsCorruption());
    quarantine.Quarantine(2, {});
    ASSERT_TRUE(store->Commit(&quarantine).ok());
  }
  std::unique_ptr<TaskStore> store;
  ASSERT_TRUE(TaskStore::Open(options, &store).ok());
  EXPECT_EQ(CountIn(*store, TaskStatus::kPending), 2u);
  EXPECT_EQ(Mismatches(*store), 0u);
  EXPECT_EQ(KeysOf(*store, ColumnFamily::kCorrupt, 2), ExpectedKeys(2, 1));
}

// A task that fails verification at open (written behind the store's back)
// is set aside with all its values when the index is rebuilt.
TEST(TaskStoreDiskTest, OpenSetsAsideWhatCannotBeRead) {
  TempDir dir;
  StoreOptions options;
  options.path = dir.Sub("db");
  {
    std::unique_ptr<TaskStore> store;
    ASSERT_TRUE(TaskStore::Open(options, &store).ok());
    InsertThreeWithAFailure(store.get());
    // Task 3's spec damaged, and a quarantine (of task 1's state) that makes
    // the next open rebuild the index.
    ASSERT_TRUE(store->PutRawForTesting(SpecKey(3), "garbage").ok());
    ASSERT_TRUE(store->PutRawForTesting(StateKey(1), "garbage").ok());
    WriteTxn quarantine(store.get());
    quarantine.Quarantine(1, {});
    ASSERT_TRUE(store->Commit(&quarantine).ok());
  }
  std::unique_ptr<TaskStore> store;
  ASSERT_TRUE(TaskStore::Open(options, &store).ok());
  EXPECT_EQ(KeysOf(*store, ColumnFamily::kCorrupt, 3), ExpectedKeys(3, 1));
  EXPECT_TRUE(KeysOf(*store, ColumnFamily::kTasks, 3).empty());
  EXPECT_EQ(KeysOf(*store, ColumnFamily::kTasks, 2), ExpectedKeys(2, 1));
  EXPECT_EQ(Mismatches(*store), 0u);
  EXPECT_EQ(store->CountOf(TaskStatus::kPending), 1u);
}

TEST(TaskStoreDiskTest, SecondOpenOfTheSameDirectoryIsBusy) {
  TempDir dir;
  StoreOptions options;
  options.path = dir.Sub("db");
  std::unique_ptr<TaskStore> first;
  ASSERT_TRUE(TaskStore::Open(options, &first).ok());
  std::unique_ptr<TaskStore> second;
  Status s = TaskStore::Open(options, &second);
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  EXPECT_NE(s.message().find("in use"), std::string::npos);
}

// A counts-only reader (read_scope kCounts) of a store its writer still
// holds: it sees the writer's counts, also those committed after it opened,
// and refuses every read of the families it did not open.
TEST(TaskStoreDiskTest, ACountsOnlyReaderOpensMetaAlone) {
  TempDir dir;
  StoreOptions options;
  options.path = dir.Sub("db");
  options.durability = Durability::kRelaxed;
  std::unique_ptr<TaskStore> writer;
  ASSERT_TRUE(TaskStore::Open(options, &writer).ok());
  auto insert = [&](TaskId from, TaskId to) {
    WriteTxn txn(writer.get());
    for (TaskId id = from; id <= to; ++id) {
      InsertTask(&txn,
                 PendingTask(id, id % 2 ? "odd" : "even", txn.NextSequence()));
    }
    ASSERT_TRUE(writer->Commit(&txn).ok());
  };
  insert(1, 5);

  StoreOptions counts_only = options;
  counts_only.read_only = true;
  counts_only.read_scope = ReadOnlyScope::kCounts;
  std::unique_ptr<TaskStore> reader;
  Status s = TaskStore::Open(counts_only, &reader);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(reader->HasFamily(ColumnFamily::kMeta));
  EXPECT_FALSE(reader->HasFamily(ColumnFamily::kTasks));
  EXPECT_FALSE(reader->HasFamily(ColumnFamily::kIndex));
  EXPECT_FALSE(reader->HasFamily(ColumnFamily::kCorrupt));
  std::array<uint64_t, kTaskStatusCount> counts{};
  ASSERT_TRUE(reader->NewReadView()->CountByStatus(&counts).ok());
  EXPECT_EQ(counts[static_cast<size_t>(TaskStatus::kPending)], 5u);

  insert(6, 8);
  ASSERT_TRUE(reader->CatchUp().ok());
  auto view = reader->NewReadView();
  ASSERT_TRUE(view->CountByStatus(&counts).ok());
  EXPECT_EQ(counts[static_cast<size_t>(TaskStatus::kPending)], 8u);
  TypeCounts by_type;
  ASSERT_TRUE(view->CountByType(&by_type).ok());
  EXPECT_EQ(by_type["odd"][0], 4u);
  EXPECT_EQ(by_type["even"][0], 4u);

  auto refused = [](const Status& status, const char* family) {
    EXPECT_TRUE(status.IsFailedPrecondition()) << status.ToString();
    EXPECT_NE(status.message().find(std::string("the ") + family + " family"),
              std::string::npos)
        << status.ToString();
  };
  TaskBytes task;
  refused(view->GetTask(1, &task), "tasks");
  std::string value;
  refused(view->GetEntry(ColumnFamily::kIndex, "x", &value), "index");
  refused(view->Scan(ColumnFamily::kIndex, "", "",
                     [](std::string_view, std::string_view) { return true; }),
          "index");
  refused(
      view->ScanTasks(ColumnFamily::kCorrupt, 0,
                      [](TaskId, TaskBytes&, const Status&) { return true; }),
      "corrupt");
  size_t mismatches = 0;
  refused(view->CheckIndexes(&mismatches, nullptr), "tasks");
  view.reset();
  refused(reader->GetSpec(1, &value), "tasks");

  // A writable open of any other scope is refused.
  StoreOptions writable = options;
  writable.path = dir.Sub("other");
  writable.read_scope = ReadOnlyScope::kCounts;
  std::unique_ptr<TaskStore> bad;
  s = TaskStore::Open(writable, &bad);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
}

TEST(TaskStoreDiskTest, ColumnFamiliesHaveTheirNames) {
  EXPECT_STREQ(ColumnFamilyName(ColumnFamily::kTasks), "tasks");
  EXPECT_STREQ(ColumnFamilyName(ColumnFamily::kIndex), "index");
  EXPECT_STREQ(ColumnFamilyName(ColumnFamily::kMeta), "meta");
  EXPECT_STREQ(ColumnFamilyName(ColumnFamily::kCorrupt), "corrupt");
  EXPECT_STREQ(ColumnFamilyName(ColumnFamily::kApp), "app");
  EXPECT_STREQ(ColumnFamilyName(ColumnFamily::kCount), "invalid");
  // A new store has exactly those families (and RocksDB's default).
  TempDir dir;
  StoreOptions options;
  options.path = dir.Sub("db");
  {
    std::unique_ptr<TaskStore> store;
    ASSERT_TRUE(TaskStore::Open(options, &store).ok());
  }
  std::vector<std::string> names;
  ASSERT_TRUE(
      rocksdb::DB::ListColumnFamilies(rocksdb::Options(), options.path, &names)
          .ok());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"app", "corrupt", "default",
                                             "index", "meta", "tasks"}));
}

// ---- Schema versions ----

// Opens the RocksDB directory at `path` with `families` (created when
// missing) and runs `fn` on it.
void WithRawDb(
    const std::string& path, std::vector<std::string> families,
    const std::function<
        void(rocksdb::DB*,
             const std::map<std::string, rocksdb::ColumnFamilyHandle*>&)>& fn) {
  rocksdb::DBOptions db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  if (std::find(families.begin(), families.end(),
                rocksdb::kDefaultColumnFamilyName) == families.end()) {
    families.insert(families.begin(), rocksdb::kDefaultColumnFamilyName);
  }
  for (const std::string& name : families) {
    descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions());
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s =
      rocksdb::DB::Open(db_options, path, descriptors, &handles, &db);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::map<std::string, rocksdb::ColumnFamilyHandle*> by_name;
  for (size_t i = 0; i < families.size(); ++i)
    by_name[families[i]] = handles[i];
  fn(db, by_name);
  for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
  delete db;
}

std::vector<std::string> FamiliesOf(const std::string& path) {
  std::vector<std::string> names;
  EXPECT_TRUE(
      rocksdb::DB::ListColumnFamilies(rocksdb::Options(), path, &names).ok());
  std::sort(names.begin(), names.end());
  return names;
}

std::string BigEndian32(uint32_t v) {
  std::string out;
  PutBigEndian32(&out, v);
  return out;
}

const std::vector<std::string> kVersion1Families = {
    "tasks",    "ready", "scheduled",  "running", "by_status", "by_type",
    "by_group", "dedup", "waiting_on", "meta",    "corrupt"};

// A directory as spool 0.1 (schema version 1) left it: its families, a
// record under the 8-byte id, and its version in meta.
void MakeVersion1Store(const std::string& path, bool with_version) {
  WithRawDb(path, kVersion1Families, [&](rocksdb::DB* db, const auto& cf) {
    std::string key;
    PutBigEndian64(&key, 1);
    ASSERT_TRUE(
        db->Put(rocksdb::WriteOptions(), cf.at("tasks"), key, "old record")
            .ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), cf.at("ready"), "r", "").ok());
    if (with_version) {
      ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), cf.at("meta"),
                          "schema_version", BigEndian32(1))
                      .ok());
    }
  });
}

TEST(TaskStoreSchemaTest, AVersion1StoreIsRefusedNamingBothVersions) {
  for (bool with_version : {true, false}) {
    SCOPED_TRACE(with_version ? "version in meta" : "no version entry");
    TempDir dir;
    StoreOptions options;
    options.path = dir.Sub("db");
    MakeVersion1Store(options.path, with_version);
    std::vector<std::string> families = FamiliesOf(options.path);
    std::unique_ptr<TaskStore> store;
    Status s = TaskStore::Open(options, &store);
    EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
    EXPECT_FALSE(store);
    EXPECT_NE(s.message().find("schema version 1"), std::string::npos)
        << s.ToString();
    EXPECT_NE(s.message().find("schema version 3"), std::string::npos)
        << s.ToString();
    EXPECT_NE(s.message().find(options.path), std::string::npos);
    // Refused before anything was changed: no new family, the old data
    // still there.
    EXPECT_EQ(FamiliesOf(options.path), families);
    WithRawDb(options.path, kVersion1Families,
              [&](rocksdb::DB* db, const auto& cf) {
                std::string key;
                PutBigEndian64(&key, 1);
                std::string value;
                ASSERT_TRUE(
                    db->Get(rocksdb::ReadOptions(), cf.at("tasks"), key, &value)
                        .ok());
                EXPECT_EQ(value, "old record");
              });
    // And again: the refusal is stable.
    s = TaskStore::Open(options, &store);
    EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
  }
}

TEST(TaskStoreSchemaTest, ANewerSchemaVersionIsRefusedNamingBothVersions) {
  TempDir dir;
  StoreOptions options;
  options.path = dir.Sub("db");
  {
    std::unique_ptr<TaskStore> store;
    ASSERT_TRUE(TaskStore::Open(options, &store).ok());
    WriteTxn txn(store.get());
    InsertTask(&txn, NewTask(1, 0, txn.NextSequence()));
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  std::vector<std::string> families = FamiliesOf(options.path);
  // Rewrite the version as a future spool would.
  WithRawDb(options.path, families, [&](rocksdb::DB* db, const auto& cf) {
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), cf.at("meta"),
                        "schema_version", BigEndian32(kSchemaVersion + 1))
                    .ok());
  });
  std::unique_ptr<TaskStore> store;
  Status s = TaskStore::Open(options, &store);
  EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
  EXPECT_NE(s.message().find("schema version 4"), std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("schema version 3"), std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("newer"), std::string::npos) << s.ToString();

  // A newer version with a family of its own is refused the same way,
  // before RocksDB is asked to open a family this code does not know.
  families.push_back("future");
  WithRawDb(options.path, families, [](rocksdb::DB*, const auto&) {});
  s = TaskStore::Open(options, &store);
  EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
  EXPECT_NE(s.message().find("schema version 4"), std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("schema version 3"), std::string::npos)
      << s.ToString();
}

// A store with one task, closed, whose meta entry `key` is then set to
// `value` (or removed, when it is nullopt) behind the store's back.
void StoreWithOneTaskAndMeta(const std::string& path, const std::string& key,
                             std::optional<std::string> value) {
  {
    StoreOptions options;
    options.path = path;
    std::unique_ptr<TaskStore> store;
    ASSERT_TRUE(TaskStore::Open(options, &store).ok());
    WriteTxn txn(store.get());
    InsertTask(&txn, NewTask(1, 0, txn.NextSequence()));
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  WithRawDb(path, FamiliesOf(path), [&](rocksdb::DB* db, const auto& cf) {
    rocksdb::Status s =
        value ? db->Put(rocksdb::WriteOptions(), cf.at("meta"), key, *value)
              : db->Delete(rocksdb::WriteOptions(), cf.at("meta"), key);
    ASSERT_TRUE(s.ok()) << s.ToString();
  });
}

TEST(TaskStoreSchemaTest, TasksWithoutASchemaVersionAreCorruption) {
  TempDir dir;
  StoreOptions options;
  options.path = dir.Sub("db");
  StoreWithOneTaskAndMeta(options.path, "schema_version", std::nullopt);
  std::unique_ptr<TaskStore> store;
  Status s = TaskStore::Open(options, &store);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("no schema version"), std::string::npos)
      << s.ToString();
  // A malformed version entry, likewise.
  WithRawDb(options.path, FamiliesOf(options.path),
            [](rocksdb::DB* db, const auto& cf) {
              ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), cf.at("meta"),
                                  "schema_version", "2")
                              .ok());
            });
  s = TaskStore::Open(options, &store);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
}

TEST(TaskStoreSchemaTest, AMalformedWriterStateIsCorruption) {
  TempDir dir;
  StoreOptions options;
  options.path = dir.Sub("db");
  StoreWithOneTaskAndMeta(options.path, "writer_state", "short");
  std::unique_ptr<TaskStore> store;
  Status s = TaskStore::Open(options, &store);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("malformed"), std::string::npos) << s.ToString();
}

TEST(TaskStoreSchemaTest, ANewStoreRecordsVersion3) {
  TempDir dir;
  StoreOptions options;
  options.path = dir.Sub("db");
  std::unique_ptr<TaskStore> store;
  ASSERT_TRUE(TaskStore::Open(options, &store).ok());
  std::string version;
  ASSERT_TRUE(
      store->GetEntry(ColumnFamily::kMeta, "schema_version", &version).ok());
  EXPECT_EQ(version, BigEndian32(3));
  EXPECT_EQ(kSchemaVersion, 3u);
}

// A store as spool with schema version 2 left it: one task, no `app`
// family, version 2 in meta.
void MakeVersion2Store(const std::string& path) {
  {
    StoreOptions options;
    options.path = path;
    std::unique_ptr<TaskStore> store;
    ASSERT_TRUE(TaskStore::Open(options, &store).ok());
    WriteTxn txn(store.get());
    InsertTask(&txn, NewTask(1, 0, txn.NextSequence()));
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  WithRawDb(path, FamiliesOf(path), [&](rocksdb::DB* db, const auto& cf) {
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), cf.at("meta"),
                        "schema_version", BigEndian32(2))
                    .ok());
    ASSERT_TRUE(db->DropColumnFamily(cf.at("app")).ok());
  });
  ASSERT_EQ(FamiliesOf(path),
            (std::vector<std::string>{"corrupt", "default", "index", "meta",
                                      "tasks"}));
}

TEST(TaskStoreSchemaTest, AVersion2StoreIsReadAsItIsAndUpgradedByAWriter) {
  TempDir dir;
  StoreOptions options;
  options.path = dir.Sub("db");
  MakeVersion2Store(options.path);

  // A reader changes nothing: no family added, the key space reads empty.
  {
    StoreOptions read_only = options;
    read_only.read_only = true;
    std::unique_ptr<TaskStore> reader;
    Status s = TaskStore::Open(read_only, &reader);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_FALSE(reader->HasFamily(ColumnFamily::kApp));
    auto view = reader->NewReadView();
    TaskBytes task;
    EXPECT_TRUE(view->GetTask(1, &task).ok());
    std::string value;
    EXPECT_TRUE(view->GetAppValue("k", &value).IsNotFound());
    std::vector<AppEntry> entries;
    bool more = true;
    EXPECT_TRUE(view->ScanAppValues(AppScan{}, &entries, &more).ok());
    EXPECT_TRUE(entries.empty());
    EXPECT_FALSE(more);
  }
  EXPECT_EQ(FamiliesOf(options.path).size(), 5u);

  // A writer adds the family and records version 3; the task is kept.
  {
    std::unique_ptr<TaskStore> store;
    Status s = TaskStore::Open(options, &store);
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::string version;
    ASSERT_TRUE(
        store->GetEntry(ColumnFamily::kMeta, "schema_version", &version).ok());
    EXPECT_EQ(version, BigEndian32(3));
    TaskBytes task;
    EXPECT_TRUE(store->GetTask(1, &task).ok());
    WriteTxn txn(store.get());
    txn.PutApp("k", std::string("v"));
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  EXPECT_EQ(FamiliesOf(options.path),
            (std::vector<std::string>{"app", "corrupt", "default", "index",
                                      "meta", "tasks"}));
  std::unique_ptr<TaskStore> store;
  ASSERT_TRUE(TaskStore::Open(options, &store).ok());
  std::string value;
  ASSERT_TRUE(store->NewReadView()->GetAppValue("k", &value).ok());
  EXPECT_EQ(value, "v");
}

// Application writes staged in a transaction land in the one batch with
// the tasks; a transaction discarded before Commit leaves neither.
TEST(TaskStoreAppTest, AppWritesCommitWithTheBatchOrNotAtAll) {
  TempDir dir;
  StoreOptions options;
  options.path = dir.Sub("db");
  std::unique_ptr<TaskStore> store;
  ASSERT_TRUE(TaskStore::Open(options, &store).ok());
  {
    WriteTxn discarded(store.get());
    InsertTask(&discarded, NewTask(1, 0, discarded.NextSequence()));
    discarded.PutApp("k", std::string("never"));
  }
  WriteTxn txn(store.get());
  EXPECT_TRUE(txn.empty());
  txn.PutApp("a", std::string("1"));
  EXPECT_FALSE(txn.empty());  // writes alone make a commit
  txn.PutApp("b", std::string("2"));
  txn.PutApp("b", std::nullopt);
  InsertTask(&txn, NewTask(2, 0, txn.NextSequence()));
  uint64_t batches = store->committed_batches();
  ASSERT_TRUE(store->Commit(&txn).ok());
  EXPECT_EQ(store->committed_batches(), batches + 1);
  auto view = store->NewReadView();
  std::string value;
  EXPECT_TRUE(view->GetAppValue("k", &value).IsNotFound());
  ASSERT_TRUE(view->GetAppValue("a", &value).ok());
  EXPECT_EQ(value, "1");
  EXPECT_TRUE(view->GetAppValue("b", &value).IsNotFound());
  TaskBytes task;
  EXPECT_TRUE(view->GetTask(2, &task).ok());
  EXPECT_TRUE(view->GetTask(1, &task).IsNotFound());
}

}  // namespace
}  // namespace spool::storage
