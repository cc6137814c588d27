// TaskStore with encryption at rest, on RocksDB on disk: sealed records,
// lookup tags in the indexes, the key check at open, plaintext stores, and
// records that cannot be opened.

#include <map>

#include <gtest/gtest.h>

#include "storage/crypto.h"
#include "storage/task_store.h"
#include "tests/testing.h"

namespace spool::storage {
namespace {

using spool::testing::TempDir;

std::shared_ptr<const KeyRing> Ring(const std::string& current,
                                    std::vector<std::string> previous = {}) {
  std::shared_ptr<const KeyRing> ring;
  Status s = KeyRing::Create(current, previous, &ring);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return ring;
}

TaskRecord NewRecord(TaskId id, uint64_t sequence) {
  TaskRecord r;
  r.id = id;
  r.type = "t";
  r.payload = "payload-marker-" + std::to_string(id);
  r.sequence = sequence;
  r.max_attempts = 3;
  r.group = "group-marker";
  r.dedup_key = "dedup-marker-" + std::to_string(id);
  return r;
}

std::map<std::string, std::string> Family(const TaskStore& store,
                                          ColumnFamily family) {
  std::map<std::string, std::string> out;
  EXPECT_TRUE(
      store
          .ForEachIndexEntry(family,
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
  void InsertRecords(TaskStore* store, TaskId first, TaskId last) {
    WriteTxn txn(store);
    for (TaskId id = first; id <= last; ++id) {
      txn.Insert(NewRecord(id, txn.NextSequence()));
    }
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  static size_t Mismatches(const TaskStore& store) {
    size_t mismatches = 0;
    std::vector<std::string> problems;
    EXPECT_TRUE(store.CheckIndexes(&mismatches, &problems).ok());
    for (const std::string& p : problems) ADD_FAILURE() << p;
    return mismatches;
  }

  TempDir dir_;
  std::string key_a_ = NewRandomKey();
  std::string key_b_ = NewRandomKey();
};

TEST_F(EncryptedStoreTest, RecordsAreSealedAndIndexesHoldTagsOnly) {
  auto keys = Ring(key_a_);
  auto store = OpenOrDie(keys);
  InsertRecords(store.get(), 1, 2);

  std::string stored;
  ASSERT_TRUE(
      store->GetStoredForTesting(ColumnFamily::kTasks, 1, &stored).ok());
  EXPECT_TRUE(IsSealed(stored));
  EXPECT_EQ(SealedKeyId(stored), keys->current_id());
  EXPECT_EQ(stored.find("payload-marker"), std::string::npos);

  // Every reader still sees the plain record.
  std::string bytes;
  ASSERT_TRUE(store->GetRaw(1, &bytes).ok());
  TaskRecord record;
  ASSERT_TRUE(DecodeRecord(1, bytes, &record).ok());
  EXPECT_EQ(record.payload, "payload-marker-1");
  EXPECT_EQ(record.group, "group-marker");
  ASSERT_TRUE(store->NewReadView()->GetRaw(2, &bytes).ok());
  ASSERT_TRUE(DecodeRecord(2, bytes, &record).ok());
  size_t scanned = 0;
  ASSERT_TRUE(store
                  ->ForEachRecord([&](TaskId id, std::string_view b) {
                    TaskRecord r;
                    EXPECT_TRUE(DecodeRecord(id, b, &r).ok());
                    ++scanned;
                    return Status::OK();
                  })
                  .ok());
  EXPECT_EQ(scanned, 2u);

  // Groups and dedup keys appear as tags, and lookups use the tags.
  std::string group_tag = store->StoredGroup("group-marker");
  EXPECT_EQ(group_tag.size(), kLookupTagBytes);
  EXPECT_EQ(store->StoredGroup(""), "");
  EXPECT_EQ(store->NewReadView()->StoredGroup("group-marker"), group_tag);
  for (ColumnFamily family :
       {ColumnFamily::kByGroup, ColumnFamily::kDedup, ColumnFamily::kReady}) {
    for (const auto& [key, value] : Family(*store, family)) {
      EXPECT_EQ(key.find("marker"), std::string::npos);
      EXPECT_EQ(value.find("marker"), std::string::npos);
    }
  }
  size_t in_group = 0;
  ASSERT_TRUE(store
                  ->Scan(ColumnFamily::kByGroup, GroupIndexPrefix(group_tag),
                         "",
                         [&](std::string_view, std::string_view) {
                           ++in_group;
                           return true;
                         })
                  .ok());
  EXPECT_EQ(in_group, 2u);
  std::string holder;
  ASSERT_TRUE(
      store
          ->GetEntry(ColumnFamily::kDedup,
                     DedupIndexKey(store->StoredDedupKey("dedup-marker-2")),
                     &holder)
          .ok());
  EXPECT_EQ(holder, TaskKey(2));
  QueueValue queued;
  auto ready = Family(*store, ColumnFamily::kReady);
  ASSERT_TRUE(DecodeQueueValue(ready.begin()->second, &queued));
  EXPECT_EQ(queued.group, group_tag);
  EXPECT_EQ(queued.type, "t");
  EXPECT_EQ(Mismatches(*store), 0u);

  // The lookup key is the store's: the same tags after a reopen.
  store.reset();
  store = OpenOrDie(keys);
  EXPECT_EQ(store->StoredGroup("group-marker"), group_tag);
  EXPECT_EQ(Mismatches(*store), 0u);
}

TEST_F(EncryptedStoreTest, ARecordCopiedOntoAnotherIdFailsToOpen) {
  auto store = OpenOrDie(Ring(key_a_));
  InsertRecords(store.get(), 1, 2);
  std::string stored;
  ASSERT_TRUE(
      store->GetStoredForTesting(ColumnFamily::kTasks, 1, &stored).ok());
  ASSERT_TRUE(store->PutRawForTesting(2, stored).ok());
  std::string bytes;
  Status s = store->GetRaw(2, &bytes);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("task 2 cannot be decrypted"), std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("copied from another task"), std::string::npos);
  WriteTxn txn(store.get());
  TaskRecord record;
  EXPECT_TRUE(txn.Get(2, &record).IsCorruption());
  EXPECT_TRUE(txn.Get(1, &record).ok());
}

TEST_F(EncryptedStoreTest, AnAlteredRecordIsSetAsideSealedAndExplained) {
  auto store = OpenOrDie(Ring(key_a_));
  InsertRecords(store.get(), 1, 3);
  std::string stored;
  ASSERT_TRUE(
      store->GetStoredForTesting(ColumnFamily::kTasks, 2, &stored).ok());
  stored[stored.size() / 2] ^= 0x04;
  ASSERT_TRUE(store->PutRawForTesting(2, stored).ok());

  // As the writer does with a record it cannot read.
  WriteTxn txn(store.get());
  TaskRecord record;
  ASSERT_TRUE(txn.Get(2, &record).IsCorruption());
  txn.Quarantine(2, {});
  ASSERT_TRUE(store->Commit(&txn).ok());

  std::string aside;
  ASSERT_TRUE(
      store->GetStoredForTesting(ColumnFamily::kCorrupt, 2, &aside).ok());
  EXPECT_EQ(aside, stored) << "set aside unchanged, still sealed";
  std::string bytes;
  Status missing = store->GetRaw(2, &bytes);
  ASSERT_TRUE(missing.IsNotFound());
  Status explained = store->NewReadView()->ExplainMissing(2, missing);
  EXPECT_TRUE(explained.IsCorruption());
  EXPECT_NE(explained.message().find("task 2 is set aside"), std::string::npos)
      << explained.ToString();
  EXPECT_NE(explained.message().find("Release(2)"), std::string::npos);
  Status absent = store->NewReadView()->ExplainMissing(9, Status::NotFound(""));
  EXPECT_TRUE(absent.IsNotFound());

  // The others are untouched, and the next open drops the lost entries.
  EXPECT_TRUE(store->GetRaw(3, &bytes).ok());
  store.reset();
  store = OpenOrDie(Ring(key_a_));
  EXPECT_EQ(Mismatches(*store), 0u);
}

TEST_F(EncryptedStoreTest, OpenChecksTheKeyAndRotationReseals) {
  uint32_t id_a = Ring(key_a_)->current_id();
  uint32_t id_b = Ring(key_b_)->current_id();
  {
    auto store = OpenOrDie(Ring(key_a_));
    InsertRecords(store.get(), 1, 1);
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

  // B current, A previous: opens, reads A's record, writes with B.
  store = OpenOrDie(Ring(key_b_, {key_a_}));
  std::string group_tag = store->StoredGroup("group-marker");
  std::string bytes;
  ASSERT_TRUE(store->GetRaw(1, &bytes).ok());
  InsertRecords(store.get(), 2, 2);
  std::vector<TaskId> stale;
  TaskId last = 0;
  bool more = true;
  ASSERT_TRUE(
      store->FindStale(ColumnFamily::kTasks, 0, 10, &stale, &last, &more).ok());
  EXPECT_EQ(stale, std::vector<TaskId>{1});
  EXPECT_EQ(last, 2u);
  EXPECT_FALSE(more);
  stale.clear();
  ASSERT_TRUE(
      store->FindStale(ColumnFamily::kTasks, 0, 1, &stale, &last, &more).ok());
  EXPECT_EQ(last, 1u);
  EXPECT_TRUE(more);
  store.reset();

  // The lookup key was sealed again with B: B alone opens the store, with
  // the same tags, but A's record needs A.
  store = OpenOrDie(Ring(key_b_));
  EXPECT_EQ(store->StoredGroup("group-marker"), group_tag);
  s = store->GetRaw(1, &bytes);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("key id " + KeyIdHex(id_a) +
                             ", which is not configured"),
            std::string::npos)
      << s.ToString();
  EXPECT_TRUE(store->GetRaw(2, &bytes).ok());
}

TEST_F(EncryptedStoreTest, APlaintextStoreIsRefusedOrEncryptedInPlace) {
  {
    auto store = OpenOrDie(nullptr);
    InsertRecords(store.get(), 1, 3);
    EXPECT_EQ(store->StoredGroup("group-marker"), "group-marker");
  }
  std::unique_ptr<TaskStore> store;
  Status s = Open(Ring(key_a_), &store);
  EXPECT_TRUE(s.IsFailedPrecondition()) << s.ToString();
  EXPECT_NE(s.message().find("stored without encryption"), std::string::npos);
  EXPECT_NE(s.message().find("plaintext_records"), std::string::npos);

  store = OpenOrDie(Ring(key_a_), /*accept_plaintext=*/true);
  // The indexes were rebuilt with tags at open.
  EXPECT_EQ(Mismatches(*store), 0u);
  for (ColumnFamily family :
       {ColumnFamily::kByGroup, ColumnFamily::kDedup, ColumnFamily::kReady}) {
    for (const auto& [key, value] : Family(*store, family)) {
      EXPECT_EQ(key.find("marker"), std::string::npos);
      EXPECT_EQ(value.find("marker"), std::string::npos);
    }
  }
  std::string holder;
  EXPECT_TRUE(
      store
          ->GetEntry(ColumnFamily::kDedup,
                     DedupIndexKey(store->StoredDedupKey("dedup-marker-3")),
                     &holder)
          .ok());
  // Plaintext records read; a write seals.
  std::string bytes;
  ASSERT_TRUE(store->GetRaw(1, &bytes).ok());
  {
    WriteTxn txn(store.get());
    TaskRecord record;
    ASSERT_TRUE(txn.Get(1, &record).ok());
    txn.Update(record);
    ASSERT_TRUE(store->Commit(&txn).ok());
  }
  std::string stored;
  ASSERT_TRUE(
      store->GetStoredForTesting(ColumnFamily::kTasks, 1, &stored).ok());
  EXPECT_TRUE(IsSealed(stored));
  std::vector<TaskId> stale;
  TaskId last = 0;
  bool more = false;
  ASSERT_TRUE(
      store->FindStale(ColumnFamily::kTasks, 0, 10, &stale, &last, &more).ok());
  EXPECT_EQ(stale, (std::vector<TaskId>{2, 3}));
  store.reset();

  // Now an encrypted store: plaintext records left are refused unless
  // accepted, and no key at all is refused.
  store = OpenOrDie(Ring(key_a_));
  EXPECT_TRUE(store->GetRaw(1, &bytes).ok());
  s = store->GetRaw(2, &bytes);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("stored in plaintext"), std::string::npos);
  store.reset();
  EXPECT_TRUE(Open(nullptr, &store).IsInvalidArgument());
}

}  // namespace
}  // namespace spool::storage
