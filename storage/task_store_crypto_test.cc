// TaskStore with encryption at rest, on RocksDB on disk: sealed values,
// lookup tags in the index and the states, the key check at open, plaintext
// stores, values that cannot be opened, and re-encryption.

#include <map>

#include <gtest/gtest.h>

#include "storage/crypto.h"
#include "storage/task_record_generated.h"
#include "storage/task_store.h"
#include "tests/store_testing.h"

namespace spool::storage {
namespace {

using spool::testing::StoredTask;
using spool::testing::TempDir;

std::shared_ptr<const KeyRing> Ring(const std::string& current,
                                    std::vector<std::string> previous = {}) {
  std::shared_ptr<const KeyRing> ring;
  Status s = KeyRing::Create(current, previous, &ring);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return ring;
}

std::map<std::string, std::string> Family(const TaskStore& store,
                                          ColumnFamily family,
                                          std::string_view prefix = "") {
  std::map<std::string, std::string> out;
  EXPECT_TRUE(store
                  .ForEachEntry(family, prefix,
                                [&](std::string_view k, std::string_view v) {
                                  out.emplace(k, v);
                                  return Status::OK();
                                })
                  .ok());
  return out;
}

class EncryptedStoreTest : public ::testing::Test {
 protected:
  Status Open(std::shared_ptr<const KeyRing> keys,
              std::unique_ptr<TaskStore>* store,
              bool accept_plaintext = false) {
    StoreOptions options;
    options.path = dir_.Sub("db");
    options.keys = std::move(keys);
    options.accept_plaintext = accept_plaintext;
    return TaskStore::Open(options, store);
  }
  std::unique_ptr<TaskStore> OpenOrDie(std::shared_ptr<const KeyRing> keys,
                                       bool accept_plaintext = false) {
    std::unique_ptr<TaskStore> store;
    Status s = Open(std::move(keys), &store, accept_plaintext);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return store;
  }
  // A task with a group, a dedup key and `failures` failed attempts, its
  // stored forms as the store computes them.
  static StoredTask NewTask(const TaskStore& store, TaskId id,
                            uint64_t sequence, uint32_t failures) {
    StoredTask t = spool::testing::PendingTask(
        id, "t", sequence, "payload-marker-" + std::to_string(id));
    t.spec.group = "group-marker";
    t.spec.dedup_key = "dedup-marker-" + std::to_string(id);
    t.state.stored_group = store.StoredGroup(t.spec.group);
    t.state.stored_dedup_key = store.StoredDedupKey(t.spec.dedup_key);
    t.state.max_attempts = 3;
    for (uint32_t f = 1; f <= failures; ++f) {
      RecordFailure(&t.state, f, f, "error-marker-" + std::to_string(f));
    }
    return t;
  }
  void InsertTasks(TaskStore* store, TaskId first, TaskId last,
                   uint32_t failures = 2) {
    WriteTxn txn(store);
    for (TaskId id = first; id <= last; ++id) {
      spool::testing::InsertTask(
          &txn, NewTask(*store, id, txn.NextSequence(), failures));
    }
    Status s = store->Commit(&txn);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  static size_t Mismatches(const TaskStore& store) {
    size_t mismatches = 0;
    std::vector<std::string> problems;
    EXPECT_TRUE(store.CheckIndexes(&mismatches, &problems).ok());
    for (const std::string& p : problems) ADD_FAILURE() << p;
    return mismatches;
  }
  static std::string Stored(const TaskStore& store, ColumnFamily family,
                            const std::string& key) {
    std::string bytes;
    Status s = store.GetStoredForTesting(family, key, &bytes);
    EXPECT_TRUE(s.ok()) << TaskValueName(key) << ": " << s.ToString();
    return bytes;
  }
  static Status ReadVerified(const TaskStore& store, TaskId id,
                             TaskBytes* task) {
    Status s = store.GetTask(id, task);
    return s.ok() ? task->Verify(id) : s;
  }
  // The ids of tasks not sealed with the current key.
  static std::vector<TaskId> Stale(const TaskStore& store,
                                   ColumnFamily family = ColumnFamily::kTasks) {
    std::vector<TaskId> stale;
    TaskId last = 0;
    bool more = true;
    Status s = store.FindStale(family, 0, 100, &stale, &last, &more);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_FALSE(more);
    return stale;
  }
  // Seals every value of `ids` again, in one transaction.
  static void Reseal(TaskStore* store, const std::vector<TaskId>& ids,
                     bool set_aside = false) {
    WriteTxn txn(store);
    for (TaskId id : ids) txn.Reseal(id, set_aside);
    Status s = store->Commit(&txn);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  TempDir dir_;
  std::string key_a_ = NewRandomKey();
  std::string key_b_ = NewRandomKey();
};

TEST_F(EncryptedStoreTest, ValuesAreSealedAndIndexesHoldTagsOnly) {
  auto keys = Ring(key_a_);
  auto store = OpenOrDie(keys);
  InsertTasks(store.get(), 1, 2);

  // Every value of every task, spec, state and failures alike.
  auto values = Family(*store, ColumnFamily::kTasks);
  EXPECT_EQ(values.size(), 8u);
  for (const auto& [key, stored] : values) {
    EXPECT_TRUE(IsSealed(stored)) << TaskValueName(key);
    EXPECT_EQ(SealedKeyId(stored), keys->current_id());
    EXPECT_EQ(stored.find("marker"), std::string::npos) << TaskValueName(key);
  }

  // Every reader still sees the plain values.
  TaskBytes task;
  ASSERT_TRUE(ReadVerified(*store, 1, &task).ok());
  TaskInfo info;
  FillTaskInfo(task.view(), &info);
  EXPECT_EQ(info.payload, "payload-marker-1");
  EXPECT_EQ(info.group, "group-marker");
  EXPECT_EQ(info.dedup_key, "dedup-marker-1");
  ASSERT_EQ(info.failures.size(), 2u);
  EXPECT_EQ(info.failures[1].error, "error-marker-2");
  std::string spec;
  ASSERT_TRUE(store->GetSpec(2, &spec).ok());
  SpecRecord decoded;
  ASSERT_TRUE(DecodeSpec(2, spec, &decoded).ok());
  EXPECT_EQ(decoded.payload, "payload-marker-2");
  ASSERT_TRUE(store->NewReadView()->GetTask(2, &task).ok());
  ASSERT_TRUE(task.Verify(2).ok());
  size_t scanned = 0;
  ASSERT_TRUE(store
                  ->ScanTasks(ColumnFamily::kTasks, 0,
                              [&](TaskId id, TaskBytes& t, const Status& o) {
                                EXPECT_TRUE(o.ok()) << o.ToString();
                                EXPECT_TRUE(t.Verify(id).ok());
                                EXPECT_EQ(t.failure_count(), 2u);
                                ++scanned;
                                return true;
                              })
                  .ok());
  EXPECT_EQ(scanned, 2u);

  // Groups and dedup keys appear as tags, in the index and in the states,
  // and lookups use the tags.
  std::string group_tag = store->StoredGroup("group-marker");
  EXPECT_EQ(group_tag.size(), kLookupTagBytes);
  EXPECT_EQ(store->StoredGroup(""), "");
  EXPECT_EQ(store->StoredDedupKey(""), "");
  EXPECT_NE(store->StoredDedupKey("group-marker"), group_tag)
      << "groups and dedup keys are tagged apart";
  EXPECT_EQ(store->NewReadView()->StoredGroup("group-marker"), group_tag);
  StateRecord state;
  ASSERT_TRUE(store->ReadState(1, &state).ok());
  EXPECT_EQ(state.stored_group, group_tag);
  EXPECT_EQ(state.stored_dedup_key, store->StoredDedupKey("dedup-marker-1"));
  for (const auto& [key, value] : Family(*store, ColumnFamily::kIndex)) {
    EXPECT_EQ(key.find("marker"), std::string::npos);
    EXPECT_EQ(value.find("marker"), std::string::npos);
  }
  EXPECT_EQ(
      Family(*store, ColumnFamily::kIndex, GroupIndexPrefix(group_tag)).size(),
      2u);
  std::string holder;
  ASSERT_TRUE(
      store
          ->GetEntry(ColumnFamily::kIndex,
                     DedupIndexKey(store->StoredDedupKey("dedup-marker-2")),
                     &holder)
          .ok());
  EXPECT_EQ(holder, IdValue(2));
  QueueValue queued;
  auto ready = Family(*store, ColumnFamily::kIndex,
                      StatusIndexPrefix(TaskStatus::kPending));
  ASSERT_EQ(ready.size(), 2u);
  ASSERT_TRUE(DecodeQueueValue(ready.begin()->second, &queued));
  EXPECT_EQ(queued.group, group_tag);
  EXPECT_EQ(Mismatches(*store), 0u);

  // The lookup key is the store's: the same tags after a reopen.
  store.reset();
  store = OpenOrDie(keys);
  EXPECT_EQ(store->StoredGroup("group-marker"), group_tag);
  EXPECT_EQ(Mismatches(*store), 0u);
}

TEST_F(EncryptedStoreTest, AStateCopiedUnderAnotherTasksKeyFailsToOpen) {
  auto store = OpenOrDie(Ring(key_a_));
  InsertTasks(store.get(), 1, 2);
  ASSERT_TRUE(
      store
          ->PutRawForTesting(StateKey(2),
                             Stored(*store, ColumnFamily::kTasks, StateKey(1)))
          .ok());
  TaskBytes task;
  Status s = store->GetTask(2, &task);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("task 2's state cannot be decrypted"),
            std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("copied from another task"), std::string::npos);
  StateRecord state;
  EXPECT_TRUE(store->ReadState(2, &state).IsCorruption());
  WriteTxn txn(store.get());
  EXPECT_TRUE(txn.GetState(2, &state).IsCorruption());
  EXPECT_TRUE(txn.GetState(1, &state).ok());
  // A scan says which value no key opens, and goes on to the next task.
  std::map<TaskId, Status> opened;
  ASSERT_TRUE(store
                  ->ScanTasks(ColumnFamily::kTasks, 0,
                              [&](TaskId id, TaskBytes&, const Status& o) {
                                opened[id] = o;
                                return true;
                              })
                  .ok());
  ASSERT_EQ(opened.size(), 2u);
  EXPECT_TRUE(opened[1].ok());
  EXPECT_TRUE(opened[2].IsCorruption());
  EXPECT_NE(opened[2].message().find("task 2's state"), std::string::npos)
      << opened[2].ToString();
}

TEST_F(EncryptedStoreTest, ASpecCopiedUnderAStatesKeyFailsToOpen) {
  auto store = OpenOrDie(Ring(key_a_));
  InsertTasks(store.get(), 1, 1, /*failures=*/3);
  std::string spec = Stored(*store, ColumnFamily::kTasks, SpecKey(1));
  ASSERT_TRUE(store->PutRawForTesting(StateKey(1), spec).ok());
  TaskBytes task;
  Status s = store->GetTask(1, &task);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("task 1's state cannot be decrypted"),
            std::string::npos)
      << s.ToString();
  // GetSpec still opens the spec where it belongs.
  std::string bytes;
  EXPECT_TRUE(store->GetSpec(1, &bytes).ok());
  StateRecord state;
  EXPECT_TRUE(store->ReadState(1, &state).IsCorruption());
}

TEST_F(EncryptedStoreTest, AFailureEntryMovedToAnotherNumberFailsToOpen) {
  auto store = OpenOrDie(Ring(key_a_));
  InsertTasks(store.get(), 1, 2, /*failures=*/3);
  // Entry 0 replayed as entry 2: the same task and kind, another number.
  ASSERT_TRUE(store
                  ->PutRawForTesting(
                      FailureKey(1, 2),
                      Stored(*store, ColumnFamily::kTasks, FailureKey(1, 0)))
                  .ok());
  TaskBytes task;
  Status s = store->GetTask(1, &task);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("task 1's failure entry 2 cannot be decrypted"),
            std::string::npos)
      << s.ToString();
  // And one of another task's history, under the same number.
  ASSERT_TRUE(store
                  ->PutRawForTesting(
                      FailureKey(2, 1),
                      Stored(*store, ColumnFamily::kTasks, FailureKey(1, 1)))
                  .ok());
  s = store->GetTask(2, &task);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("task 2's failure entry 1"), std::string::npos)
      << s.ToString();
}

TEST_F(EncryptedStoreTest, AnAlteredValueIsSetAsideSealedAndExplained) {
  auto store = OpenOrDie(Ring(key_a_));
  InsertTasks(store.get(), 1, 3);
  std::string altered = Stored(*store, ColumnFamily::kTasks, StateKey(2));
  altered[altered.size() / 2] ^= 0x04;
  ASSERT_TRUE(store->PutRawForTesting(StateKey(2), altered).ok());
  auto before = Family(*store, ColumnFamily::kTasks, TaskPrefix(2));
  ASSERT_EQ(before.size(), 4u);

  // As the writer does with a task it cannot read.
  WriteTxn txn(store.get());
  StateRecord state;
  ASSERT_TRUE(txn.GetState(2, &state).IsCorruption());
  txn.Quarantine(2, {});
  ASSERT_TRUE(store->Commit(&txn).ok());

  EXPECT_EQ(Family(*store, ColumnFamily::kCorrupt), before)
      << "set aside unchanged, still sealed";
  EXPECT_TRUE(Family(*store, ColumnFamily::kTasks, TaskPrefix(2)).empty());
  TaskBytes task;
  Status missing = store->GetTask(2, &task);
  ASSERT_TRUE(missing.IsNotFound());
  Status explained = store->NewReadView()->ExplainMissing(2, missing);
  EXPECT_TRUE(explained.IsCorruption());
  EXPECT_NE(explained.message().find("task 2 is set aside"), std::string::npos)
      << explained.ToString();
  EXPECT_NE(explained.message().find("cannot be decrypted"), std::string::npos)
      << explained.ToString();
  EXPECT_NE(explained.message().find("Release(2)"), std::string::npos);
  Status absent = store->NewReadView()->ExplainMissing(9, Status::NotFound(""));
  EXPECT_TRUE(absent.IsNotFound());

  // The others are untouched, and the next open drops the lost entries.
  EXPECT_TRUE(ReadVerified(*store, 3, &task).ok());
  store.reset();
  store = OpenOrDie(Ring(key_a_));
  EXPECT_EQ(Mismatches(*store), 0u);
  EXPECT_EQ(store->CountOf(TaskStatus::kPending), 2u);
}

TEST_F(EncryptedStoreTest, OpenChecksTheKeyAndRotationReseals) {
  uint32_t id_a = Ring(key_a_)->current_id();
  uint32_t id_b = Ring(key_b_)->current_id();
  {
    auto store = OpenOrDie(Ring(key_a_));
    InsertTasks(store.get(), 1, 1);
  }
  std::unique_ptr<TaskStore> store;
  Status s = Open(Ring(key_b_), &store);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("wrong encryption key"), std::string::npos);
  EXPECT_NE(s.message().find(KeyIdHex(id_a)), std::string::npos);
  EXPECT_NE(s.message().find(KeyIdHex(id_b)), std::string::npos);

  s = Open(nullptr, &store);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("is encrypted (key id " + KeyIdHex(id_a)),
            std::string::npos)
      << s.ToString();

  // B current, A previous: opens, reads A's values, writes with B.
  store = OpenOrDie(Ring(key_b_, {key_a_}));
  std::string group_tag = store->StoredGroup("group-marker");
  TaskBytes task;
  ASSERT_TRUE(ReadVerified(*store, 1, &task).ok());
  InsertTasks(store.get(), 2, 3);
  std::vector<TaskId> stale;
  TaskId last = 0;
  bool more = true;
  ASSERT_TRUE(
      store->FindStale(ColumnFamily::kTasks, 0, 10, &stale, &last, &more).ok());
  EXPECT_EQ(stale, std::vector<TaskId>{1});
  EXPECT_EQ(last, 3u);
  EXPECT_FALSE(more);
  stale.clear();
  ASSERT_TRUE(
      store->FindStale(ColumnFamily::kTasks, 0, 1, &stale, &last, &more).ok());
  EXPECT_EQ(stale, std::vector<TaskId>{1});
  EXPECT_EQ(last, 1u);
  EXPECT_TRUE(more);
  stale.clear();
  ASSERT_TRUE(
      store->FindStale(ColumnFamily::kTasks, 1, 1, &stale, &last, &more).ok());
  EXPECT_TRUE(stale.empty());
  EXPECT_EQ(last, 2u);
  EXPECT_TRUE(more);
  EXPECT_TRUE(store->FindStale(ColumnFamily::kIndex, 0, 1, &stale, &last, &more)
                  .IsInvalidArgument());

  // A state-only transition seals the new state with B and leaves the spec
  // and failures as they were: the task is still stale.
  {
    WriteTxn txn(store.get());
    StateRecord state;
    ASSERT_TRUE(txn.GetState(1, &state).ok());
    state.status = TaskStatus::kHeld;
    txn.Update(state);
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  EXPECT_EQ(SealedKeyId(Stored(*store, ColumnFamily::kTasks, StateKey(1))),
            id_b);
  EXPECT_EQ(SealedKeyId(Stored(*store, ColumnFamily::kTasks, SpecKey(1))),
            id_a);
  EXPECT_EQ(Stale(*store), std::vector<TaskId>{1});

  // Re-encryption seals every value of the task again, in place, and
  // changes nothing they hold.
  std::string plain_spec;
  ASSERT_TRUE(store->GetSpec(1, &plain_spec).ok());
  Reseal(store.get(), {1});
  EXPECT_TRUE(Stale(*store).empty());
  for (const auto& [key, stored] :
       Family(*store, ColumnFamily::kTasks, TaskPrefix(1))) {
    EXPECT_EQ(SealedKeyId(stored), id_b) << TaskValueName(key);
  }
  std::string resealed_spec;
  ASSERT_TRUE(store->GetSpec(1, &resealed_spec).ok());
  EXPECT_EQ(resealed_spec, plain_spec);
  ASSERT_TRUE(ReadVerified(*store, 1, &task).ok());
  EXPECT_EQ(StatusOf(*task.view().state), TaskStatus::kHeld);
  EXPECT_EQ(task.failure_count(), 2u);
  EXPECT_EQ(Mismatches(*store), 0u);
  store.reset();

  // The lookup key was sealed again with B: B alone opens the store, with
  // the same tags, and every task.
  store = OpenOrDie(Ring(key_b_));
  EXPECT_EQ(store->StoredGroup("group-marker"), group_tag);
  for (TaskId id = 1; id <= 3; ++id) {
    EXPECT_TRUE(ReadVerified(*store, id, &task).ok()) << id;
  }
}

TEST_F(EncryptedStoreTest, AValueOfARetiredKeySaysWhichKeyItNeeds) {
  uint32_t id_a = Ring(key_a_)->current_id();
  {
    auto store = OpenOrDie(Ring(key_a_));
    InsertTasks(store.get(), 1, 1);
  }
  {
    auto store = OpenOrDie(Ring(key_b_, {key_a_}));
    InsertTasks(store.get(), 2, 2);
  }
  auto store = OpenOrDie(Ring(key_b_));
  TaskBytes task;
  Status s = store->GetTask(1, &task);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("key id " + KeyIdHex(id_a) +
                             ", which is not configured"),
            std::string::npos)
      << s.ToString();
  std::string bytes;
  EXPECT_TRUE(store->GetSpec(1, &bytes).IsCorruption());
  EXPECT_TRUE(ReadVerified(*store, 2, &task).ok());
}

// A state-only transition in an encrypted store leaves the sealed spec
// bytes as they were: neither read nor sealed again.
TEST_F(EncryptedStoreTest, TransitionsLeaveTheSealedSpecUntouched) {
  auto store = OpenOrDie(Ring(key_a_));
  InsertTasks(store.get(), 1, 1, /*failures=*/0);
  std::string spec = Stored(*store, ColumnFamily::kTasks, SpecKey(1));
  std::string state = Stored(*store, ColumnFamily::kTasks, StateKey(1));
  for (TaskStatus status : {TaskStatus::kRunning, TaskStatus::kRetryScheduled,
                            TaskStatus::kRunning, TaskStatus::kFailed}) {
    WriteTxn txn(store.get());
    StateRecord r;
    ASSERT_TRUE(txn.GetState(1, &r).ok());
    r.status = status;
    if (status == TaskStatus::kRetryScheduled) {
      RecordFailure(&r, 1, 5, "error-marker");
    }
    txn.Update(r);
    ASSERT_TRUE(store->Commit(&txn).ok());
    EXPECT_EQ(Stored(*store, ColumnFamily::kTasks, SpecKey(1)), spec)
        << TaskStatusName(status);
    std::string now = Stored(*store, ColumnFamily::kTasks, StateKey(1));
    EXPECT_NE(now, state) << "a new state is sealed with a fresh nonce";
    state = now;
  }
  std::string failure = Stored(*store, ColumnFamily::kTasks, FailureKey(1, 0));
  EXPECT_TRUE(IsSealed(failure));
  EXPECT_EQ(failure.find("error-marker"), std::string::npos);
}

TEST_F(EncryptedStoreTest, SetAsideValuesAreResealedInCorrupt) {
  {
    auto store = OpenOrDie(Ring(key_a_));
    InsertTasks(store.get(), 1, 2);
    WriteTxn txn(store.get());
    txn.Quarantine(2, {});
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  auto store = OpenOrDie(Ring(key_b_, {key_a_}));
  uint32_t id_b = Ring(key_b_)->current_id();
  EXPECT_EQ(Stale(*store, ColumnFamily::kCorrupt), std::vector<TaskId>{2});
  Reseal(store.get(), {2}, /*set_aside=*/true);
  EXPECT_TRUE(Stale(*store, ColumnFamily::kCorrupt).empty());
  auto aside = Family(*store, ColumnFamily::kCorrupt);
  EXPECT_EQ(aside.size(), 4u);
  for (const auto& [key, stored] : aside) {
    EXPECT_EQ(SealedKeyId(stored), id_b) << TaskValueName(key);
  }
  EXPECT_TRUE(Family(*store, ColumnFamily::kTasks, TaskPrefix(2)).empty())
      << "resealing in corrupt does not bring the task back";
  // Readable with B alone, from `corrupt`.
  store.reset();
  store = OpenOrDie(Ring(key_b_));
  size_t visits = 0;
  ASSERT_TRUE(store
                  ->ScanTasks(ColumnFamily::kCorrupt, 0,
                              [&](TaskId id, TaskBytes& t, const Status& o) {
                                ++visits;
                                EXPECT_TRUE(o.ok()) << o.ToString();
                                EXPECT_TRUE(t.Verify(id).ok());
                                return true;
                              })
                  .ok());
  EXPECT_EQ(visits, 1u);
}

// The writer batches commands: a re-encryption step and a transition of the
// same task can share one transaction (actors/writer.cc ReencryptStep
// stages Reseal in the batch's txn).
TEST_F(EncryptedStoreTest, ResealInTheSameTransactionAsATransitionKeepsIt) {
  {
    auto store = OpenOrDie(Ring(key_a_));
    InsertTasks(store.get(), 1, 2);
  }
  auto store = OpenOrDie(Ring(key_b_, {key_a_}));
  ASSERT_EQ(Stale(*store), (std::vector<TaskId>{1, 2}));
  {
    WriteTxn txn(store.get());
    StateRecord state;
    ASSERT_TRUE(txn.GetState(1, &state).ok());
    state.status = TaskStatus::kRunning;
    state.attempts = 1;
    txn.Update(state);
    txn.Reseal(1, false);
    ASSERT_TRUE(txn.GetState(2, &state).ok());
    txn.Delete(2);
    txn.Reseal(2, false);
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  StateRecord state;
  ASSERT_TRUE(store->ReadState(1, &state).ok());
  // Resealed values are the committed ones: what the same transaction
  // staged for the task (a transition, a deletion) comes after and wins.
  EXPECT_EQ(state.status, TaskStatus::kRunning);
  TaskBytes task;
  EXPECT_TRUE(store->GetTask(2, &task).IsNotFound());
  EXPECT_EQ(Mismatches(*store), 0u);
}

TEST_F(EncryptedStoreTest, APlaintextStoreIsRefusedOrEncryptedInPlace) {
  {
    auto store = OpenOrDie(nullptr);
    InsertTasks(store.get(), 1, 3);
    EXPECT_EQ(store->StoredGroup("group-marker"), "group-marker");
    EXPECT_FALSE(store->encrypted());
    std::vector<TaskId> stale;
    TaskId last = 0;
    bool more = false;
    EXPECT_TRUE(
        store->FindStale(ColumnFamily::kTasks, 0, 10, &stale, &last, &more)
            .IsFailedPrecondition());
  }
  std::unique_ptr<TaskStore> store;
  Status s = Open(Ring(key_a_), &store);
  EXPECT_TRUE(s.IsFailedPrecondition()) << s.ToString();
  EXPECT_NE(s.message().find("stored without encryption"), std::string::npos);
  EXPECT_NE(s.message().find("plaintext_records"), std::string::npos);

  store = OpenOrDie(Ring(key_a_), /*accept_plaintext=*/true);
  // The index was rebuilt with tags at open, and the states' stored forms
  // with it.
  EXPECT_EQ(Mismatches(*store), 0u);
  for (const auto& [key, value] : Family(*store, ColumnFamily::kIndex)) {
    EXPECT_EQ(key.find("marker"), std::string::npos);
    EXPECT_EQ(value.find("marker"), std::string::npos);
  }
  StateRecord state;
  ASSERT_TRUE(store->ReadState(3, &state).ok());
  EXPECT_EQ(state.stored_group, store->StoredGroup("group-marker"));
  EXPECT_EQ(state.stored_dedup_key, store->StoredDedupKey("dedup-marker-3"));
  std::string holder;
  EXPECT_TRUE(
      store
          ->GetEntry(ColumnFamily::kIndex,
                     DedupIndexKey(store->StoredDedupKey("dedup-marker-3")),
                     &holder)
          .ok());
  // Plaintext values read; a write seals what it writes.
  TaskBytes task;
  ASSERT_TRUE(ReadVerified(*store, 1, &task).ok());
  {
    WriteTxn txn(store.get());
    StateRecord record;
    ASSERT_TRUE(txn.GetState(1, &record).ok());
    txn.Update(record);
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  EXPECT_TRUE(IsSealed(Stored(*store, ColumnFamily::kTasks, StateKey(1))));
  EXPECT_FALSE(IsSealed(Stored(*store, ColumnFamily::kTasks, SpecKey(1))));
  // Task 1's spec and history are still plaintext, so it is stale too.
  EXPECT_EQ(Stale(*store), (std::vector<TaskId>{1, 2, 3}));
  Reseal(store.get(), {1});
  EXPECT_EQ(Stale(*store), (std::vector<TaskId>{2, 3}));
  for (const auto& [key, stored] :
       Family(*store, ColumnFamily::kTasks, TaskPrefix(1))) {
    EXPECT_TRUE(IsSealed(stored)) << TaskValueName(key);
    EXPECT_EQ(stored.find("marker"), std::string::npos);
  }
  store.reset();

  // Now an encrypted store: plaintext values left are refused unless
  // accepted, and no key at all is refused.
  store = OpenOrDie(Ring(key_a_));
  EXPECT_TRUE(ReadVerified(*store, 1, &task).ok());
  s = store->GetTask(2, &task);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("stored in plaintext"), std::string::npos)
      << s.ToString();
  store.reset();
  EXPECT_TRUE(Open(nullptr, &store).IsInvalidArgument());
}

}  // namespace
}  // namespace spool::storage
