// Listings over the index families against a model, pagination while the
// store changes between pages, the scan budget, cursors, the JSON page, and
// the indexes against a full scan after random operations.

#include "storage/queries.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "storage/json_writer.h"
#include "storage/record.h"
#include "storage/task_record_generated.h"
#include "tests/testing.h"

namespace spool::storage {
namespace {

using spool::testing::TempDir;

const char* const kTypes[] = {"alpha", "beta", "gamma"};
const char* const kGroups[] = {"", "g1", "g2"};

class QueriesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions options;
    options.path = dir_.Sub("db");
    options.durability = Durability::kMemory;
    Status s = TaskStore::Open(options, &store_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  TaskRecord Make(TaskId id, std::string type, TaskStatus status,
                  std::string group = "") {
    TaskRecord r;
    r.id = id;
    r.type = std::move(type);
    r.payload = "payload " + std::to_string(id);
    r.status = status;
    r.group = std::move(group);
    r.max_attempts = 3;
    r.created_us = 1700000000000000 + static_cast<int64_t>(id);
    r.updated_us = r.created_us;
    return r;
  }

  // Stores `records` in one commit, inserting or updating each, and keeps
  // the model in step.
  void Put(std::vector<TaskRecord> records) {
    WriteTxn txn(store_.get());
    for (TaskRecord& r : records) {
      TaskRecord existing;
      if (txn.Get(r.id, &existing).ok()) {
        r.sequence = existing.sequence;
        model_[r.id] = r;
        txn.Update(std::move(r));
      } else {
        r.sequence = txn.NextSequence();
        model_[r.id] = r;
        txn.Insert(std::move(r));
      }
    }
    Status s = store_->Commit(&txn);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  void Remove(TaskId id) {
    WriteTxn txn(store_.get());
    TaskRecord existing;
    ASSERT_TRUE(txn.Get(id, &existing).ok());
    txn.Delete(id);
    ASSERT_TRUE(store_->Commit(&txn).ok());
    model_.erase(id);
  }

  static bool Matches(const TaskRecord& r, const ListSpec& spec) {
    return (!spec.status || r.status == *spec.status) &&
           (spec.type.empty() || r.type == spec.type) &&
           (spec.group.empty() || r.group == spec.group);
  }

  std::vector<TaskId> Expected(const ListSpec& spec) const {
    std::vector<TaskId> ids;
    for (const auto& [id, r] : model_) {
      if (Matches(r, spec)) ids.push_back(id);
    }
    return ids;
  }

  // One page: the ids, in order.
  std::vector<TaskId> Page(const ListSpec& spec, PageInfo* info) {
    std::vector<TaskId> ids;
    auto view = store_->NewReadView();
    Status s = ListPage(
        *view, spec,
        [&](std::string_view, const fb::TaskRecord& r) {
          ids.push_back(r.id());
        },
        info);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return ids;
  }

  // Every page of `query`, concatenated; `between` runs between pages.
  std::vector<TaskId> All(TaskQuery query,
                          const std::function<void()>& between = nullptr,
                          size_t* pages = nullptr) {
    std::vector<TaskId> ids;
    size_t count = 0;
    while (true) {
      ListSpec spec;
      Status s = ParseTaskQuery(query, &spec);
      EXPECT_TRUE(s.ok()) << s.ToString();
      if (!s.ok()) break;
      PageInfo info;
      auto page = Page(spec, &info);
      EXPECT_LE(page.size(), query.limit);
      ids.insert(ids.end(), page.begin(), page.end());
      ++count;
      if (info.next_cursor.empty() || count > 100000) break;
      query.cursor = info.next_cursor;
      if (between) between();
    }
    if (pages != nullptr) *pages = count;
    return ids;
  }

  void Fill(size_t n, std::mt19937_64* rng) {
    std::vector<TaskRecord> records;
    for (TaskId id = 1; id <= n; ++id) {
      records.push_back(Make(id, kTypes[(*rng)() % 3],
                             static_cast<TaskStatus>((*rng)() % 8),
                             kGroups[(*rng)() % 3]));
    }
    Put(std::move(records));
  }

  static std::vector<TaskQuery> AllFilters() {
    std::vector<TaskQuery> queries;
    std::vector<std::optional<TaskStatus>> statuses = {
        std::nullopt, TaskStatus::kPending, TaskStatus::kFailed};
    for (const auto& status : statuses) {
      for (std::string type : {"", "alpha", "gamma"}) {
        for (std::string group : {"", "g1"}) {
          TaskQuery q;
          q.status = status;
          q.type = type;
          q.group = group;
          queries.push_back(q);
        }
      }
    }
    return queries;
  }

  TempDir dir_;
  std::unique_ptr<TaskStore> store_;
  std::map<TaskId, TaskRecord> model_;
};

TEST_F(QueriesTest, EveryFilterCombinationMatchesTheModelAtEveryPageSize) {
  std::mt19937_64 rng(7);
  Fill(600, &rng);
  for (const TaskQuery& base : AllFilters()) {
    ListSpec spec;
    ASSERT_TRUE(ParseTaskQuery(base, &spec).ok());
    std::vector<TaskId> expected = Expected(spec);
    for (size_t limit : {1, 7, 100, 1000}) {
      TaskQuery q = base;
      q.limit = limit;
      size_t pages = 0;
      EXPECT_EQ(All(q, nullptr, &pages), expected)
          << "status " << (base.status ? TaskStatusName(*base.status) : "*")
          << " type '" << base.type << "' group '" << base.group << "' limit "
          << limit;
      // Exactly the pages needed, plus none: the last full page already
      // knows whether more follow.
      size_t needed =
          std::max<size_t>(1, (expected.size() + limit - 1) / limit);
      EXPECT_EQ(pages, needed) << "limit " << limit;
    }
  }
}

TEST_F(QueriesTest, PagesNeverRepeatOrSkipTasksThatMatchThroughout) {
  // Between pages, tasks change status, new tasks arrive and old ones are
  // deleted. Each page is its own snapshot. The guarantee: ids strictly
  // increase, and every task that matched from start to end appears.
  std::mt19937_64 rng(11);
  Fill(800, &rng);
  TaskId next_id = 801;
  for (const TaskQuery& base : AllFilters()) {
    ListSpec spec;
    ASSERT_TRUE(ParseTaskQuery(base, &spec).ok());
    std::set<TaskId> before;
    for (TaskId id : Expected(spec)) before.insert(id);
    std::set<TaskId> changed;
    auto churn = [&] {
      std::vector<TaskRecord> updates;
      for (int i = 0; i < 20; ++i) {
        TaskId id = 1 + rng() % (next_id - 1);
        auto it = model_.find(id);
        if (it == model_.end()) continue;
        TaskRecord r = it->second;
        r.status = static_cast<TaskStatus>(rng() % 8);
        r.updated_us += 1;
        changed.insert(id);
        updates.push_back(r);
      }
      for (int i = 0; i < 5; ++i) {
        updates.push_back(Make(next_id++, kTypes[rng() % 3],
                               static_cast<TaskStatus>(rng() % 8),
                               kGroups[rng() % 3]));
      }
      Put(std::move(updates));
      TaskId victim = 1 + rng() % (next_id - 1);
      if (model_.count(victim) != 0) {
        changed.insert(victim);
        Remove(victim);
      }
    };
    TaskQuery q = base;
    q.limit = 13;
    std::vector<TaskId> listed = All(q, churn);
    for (size_t i = 1; i < listed.size(); ++i) {
      ASSERT_LT(listed[i - 1], listed[i]) << "ids must strictly increase";
    }
    std::set<TaskId> seen(listed.begin(), listed.end());
    // Tasks that changed meanwhile may or may not appear (at most once,
    // which the strict order already shows); the others must.
    for (TaskId id : before) {
      if (changed.count(id) == 0) {
        EXPECT_EQ(seen.count(id), 1u) << "task " << id << " was skipped";
      }
    }
  }
}

TEST_F(QueriesTest, ScanBudgetEndsAPageEarlyButTheListingCompletes) {
  // 30,000 tasks in one group, of which only the last three are failed: a
  // group + status page must stop after its budget, hand back a cursor,
  // and the listing must still find all three.
  std::vector<TaskRecord> records;
  for (TaskId id = 1; id <= 30000; ++id) {
    TaskStatus status =
        id > 29997 ? TaskStatus::kFailed : TaskStatus::kSucceeded;
    records.push_back(Make(id, "alpha", status, "big"));
  }
  Put(std::move(records));
  TaskQuery q;
  q.group = "big";
  q.status = TaskStatus::kFailed;
  q.limit = 10;
  ListSpec spec;
  ASSERT_TRUE(ParseTaskQuery(q, &spec).ok());
  PageInfo info;
  EXPECT_TRUE(Page(spec, &info).empty());
  EXPECT_FALSE(info.next_cursor.empty());
  EXPECT_LE(info.examined, q.limit + kMaxPageScan + 1);
  size_t pages = 0;
  std::vector<TaskId> all = All(q, nullptr, &pages);
  EXPECT_EQ(all, (std::vector<TaskId>{29998, 29999, 30000}));
  EXPECT_GE(pages, 3u);
  // A type filter with a group reads records, within the same budget.
  q.status.reset();
  q.type = "beta";
  EXPECT_TRUE(All(q).empty());
}

TEST_F(QueriesTest, CursorsAreCheckedAndOpaque) {
  std::mt19937_64 rng(3);
  Fill(50, &rng);
  TaskQuery q;
  q.type = "alpha";
  q.limit = 2;
  ListSpec spec;
  ASSERT_TRUE(ParseTaskQuery(q, &spec).ok());
  PageInfo info;
  Page(spec, &info);
  ASSERT_FALSE(info.next_cursor.empty());
  for (char c : info.next_cursor) {
    EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z')) << c;
  }
  TaskQuery next = q;
  next.cursor = info.next_cursor;
  next.limit = 5;  // the limit may change between pages
  EXPECT_TRUE(ParseTaskQuery(next, &spec).ok());
  TaskQuery other = next;
  other.type = "beta";
  Status s = ParseTaskQuery(other, &spec);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  other = next;
  other.status = TaskStatus::kPending;
  EXPECT_TRUE(ParseTaskQuery(other, &spec).IsInvalidArgument());
  for (const std::string& bad : std::vector<std::string>{
           "x", "c1", "c1zzzzzzzzzzzzzzzz00000000", info.next_cursor + "0"}) {
    other = q;
    other.cursor = bad;
    EXPECT_TRUE(ParseTaskQuery(other, &spec).IsInvalidArgument()) << bad;
  }
  q.limit = 0;
  EXPECT_TRUE(ParseTaskQuery(q, &spec).IsInvalidArgument());
  q.limit = kMaxPageSize + 1;
  EXPECT_TRUE(ParseTaskQuery(q, &spec).IsInvalidArgument());
  q.limit = kMaxPageSize;
  EXPECT_TRUE(ParseTaskQuery(q, &spec).ok());
}

TEST_F(QueriesTest, JsonPageIsValidAndHoldsEveryTaskOnce) {
  std::mt19937_64 rng(5);
  Fill(120, &rng);
  TaskQuery q;
  q.limit = 100;
  ListSpec spec;
  ASSERT_TRUE(ParseTaskQuery(q, &spec).ok());
  std::string json;
  auto view = store_->NewReadView();
  JsonPayloadTypes none;
  ASSERT_TRUE(ListPageJson(*view, spec, &none, &json).ok());
  EXPECT_TRUE(IsValidJson(json)) << json.substr(0, 200);
  EXPECT_EQ(json.rfind("{\"tasks\":[{\"id\":1,", 0), 0u) << json.substr(0, 80);
  EXPECT_NE(json.find("\"next_cursor\":\"c1"), std::string::npos);
  EXPECT_NE(json.find("\"unreadable\":[]}"), std::string::npos);
  size_t objects = 0;
  for (size_t at = json.find("{\"id\":"); at != std::string::npos;
       at = json.find("{\"id\":", at + 1)) {
    ++objects;
  }
  EXPECT_EQ(objects, 100u);
  // The last page says it is the last.
  q.cursor = json.substr(json.find("\"next_cursor\":\"") + 15, 26);
  ASSERT_TRUE(ParseTaskQuery(q, &spec).ok());
  json.clear();
  ASSERT_TRUE(ListPageJson(*view, spec, &none, &json).ok());
  EXPECT_TRUE(IsValidJson(json));
  EXPECT_NE(json.find("\"next_cursor\":null"), std::string::npos);
}

TEST_F(QueriesTest, DamagedRecordsAreReportedNotHidingTheRest) {
  std::vector<TaskRecord> records;
  for (TaskId id = 1; id <= 5; ++id) {
    records.push_back(Make(id, "alpha", TaskStatus::kPending));
  }
  Put(std::move(records));
  ASSERT_TRUE(store_->PutRawForTesting(3, "not a flatbuffer").ok());
  for (bool by_index : {false, true}) {
    TaskQuery q;
    if (by_index) q.status = TaskStatus::kPending;
    ListSpec spec;
    ASSERT_TRUE(ParseTaskQuery(q, &spec).ok());
    PageInfo info;
    EXPECT_EQ(Page(spec, &info), (std::vector<TaskId>{1, 2, 4, 5}));
    EXPECT_EQ(info.unreadable, (std::vector<TaskId>{3}));
  }
}

TEST_F(QueriesTest, OldestOfAStatusAndNextDue) {
  auto view = store_->NewReadView();
  std::optional<TaskId> id;
  ASSERT_TRUE(OldestWithStatus(*view, TaskStatus::kPending, &id).ok());
  EXPECT_FALSE(id);
  ASSERT_TRUE(NextDue(*view, &id).ok());
  EXPECT_FALSE(id);
  std::vector<TaskRecord> records;
  for (TaskId n = 1; n <= 6; ++n) {
    TaskRecord r = Make(
        n, "alpha", n % 2 ? TaskStatus::kPending : TaskStatus::kRetryScheduled);
    // Tasks 2, 4, 6 wait for a time; 4 is due first.
    if (n % 2 == 0) r.next_attempt_us = 1000 + (n == 4 ? 0 : 100 * n);
    records.push_back(r);
  }
  Put(std::move(records));
  view = store_->NewReadView();
  ASSERT_TRUE(OldestWithStatus(*view, TaskStatus::kPending, &id).ok());
  EXPECT_EQ(id, std::optional<TaskId>(1));
  ASSERT_TRUE(OldestWithStatus(*view, TaskStatus::kRetryScheduled, &id).ok());
  EXPECT_EQ(id, std::optional<TaskId>(2));
  ASSERT_TRUE(OldestWithStatus(*view, TaskStatus::kFailed, &id).ok());
  EXPECT_FALSE(id);
  ASSERT_TRUE(NextDue(*view, &id).ok());
  EXPECT_EQ(id, std::optional<TaskId>(4));
}

TEST_F(QueriesTest, IndexesMatchAFullScanAfterRandomOperations) {
  // Random inserts, status changes (with and without a due time), group,
  // type and dedup changes, dependencies and deletions, in random batches;
  // after each batch, every index family must equal what the records
  // imply.
  std::mt19937_64 rng(42);
  TaskId next_id = 1;
  for (int round = 0; round < 60; ++round) {
    WriteTxn txn(store_.get());
    int ops = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < ops; ++i) {
      int op = static_cast<int>(rng() % 10);
      TaskRecord r;
      if (op < 4 || next_id == 1) {
        r = Make(next_id, kTypes[rng() % 3], TaskStatus::kPending,
                 kGroups[rng() % 3]);
        r.priority = static_cast<int32_t>(rng() % 5) - 2;
        if (rng() % 3 == 0) r.dedup_key = "d" + std::to_string(next_id);
        if (rng() % 4 == 0) r.next_attempt_us = 5000 + rng() % 1000;
        r.sequence = txn.NextSequence();
        ++next_id;
        txn.Insert(std::move(r));
        continue;
      }
      TaskId id = 1 + rng() % (next_id - 1);
      if (!txn.Get(id, &r).ok()) continue;
      if (op == 9) {
        txn.Delete(id);
        continue;
      }
      r.status = static_cast<TaskStatus>(rng() % kTaskStatusCount);
      r.next_attempt_us = rng() % 2 ? 0 : 6000 + rng() % 1000;
      if (op == 5) r.group = kGroups[rng() % 3];
      if (op == 6) r.type = kTypes[rng() % 3];
      if (op == 7) r.priority = static_cast<int32_t>(rng() % 5) - 2;
      r.depends_on.clear();
      if (r.status == TaskStatus::kWaiting && id > 1) {
        r.depends_on = {1 + rng() % (id - 1)};
      }
      txn.Update(std::move(r));
    }
    ASSERT_TRUE(store_->Commit(&txn).ok());
    size_t mismatches = 1;
    std::vector<std::string> problems;
    ASSERT_TRUE(store_->CheckIndexes(&mismatches, &problems).ok());
    ASSERT_EQ(mismatches, 0u)
        << "round " << round << ": " << (problems.empty() ? "" : problems[0]);
  }
  // And the listings agree with the records.
  std::map<TaskId, TaskRecord> records;
  ASSERT_TRUE(store_
                  ->ForEachRecord([&](TaskId id, std::string_view bytes) {
                    TaskRecord r;
                    EXPECT_TRUE(DecodeRecord(id, bytes, &r).ok());
                    records[id] = r;
                    return Status::OK();
                  })
                  .ok());
  model_ = records;
  for (const TaskQuery& base : AllFilters()) {
    ListSpec spec;
    ASSERT_TRUE(ParseTaskQuery(base, &spec).ok());
    TaskQuery q = base;
    q.limit = 50;
    EXPECT_EQ(All(q), Expected(spec));
  }
}

TEST(JsonPayloadTypesTest, SortedSetWithoutDuplicates) {
  JsonPayloadTypes types;
  EXPECT_FALSE(types.Contains("a"));
  types = types.With("b").With("a").With("b").With("c");
  EXPECT_EQ(types.size(), 3u);
  EXPECT_TRUE(types.Contains("a"));
  EXPECT_TRUE(types.Contains("c"));
  EXPECT_FALSE(types.Contains("d"));
  EXPECT_EQ(types.FormatOf("b"), PayloadFormat::kJson);
  EXPECT_EQ(types.FormatOf("bb"), PayloadFormat::kBinary);
}

}  // namespace
}  // namespace spool::storage
