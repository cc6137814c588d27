// Listings over the index family against a model, pagination while the
// store changes between pages, the scan budget, cursors, the JSON page, and
// the indexes against a full scan after random operations.

#include "storage/queries.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "storage/crypto.h"
#include "storage/json_writer.h"
#include "storage/record.h"
#include "storage/task_record_generated.h"
#include "tests/store_testing.h"

namespace spool::storage {
namespace {

using spool::testing::StoredTask;
using spool::testing::TempDir;

const char* const kTypes[] = {"alpha", "beta", "gamma"};
const char* const kGroups[] = {"", "g1", "g2"};

class QueriesTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(nullptr); }

  void Open(std::shared_ptr<const KeyRing> keys,
            const std::string& name = "db") {
    store_.reset();
    model_.clear();
    StoreOptions options;
    options.path = dir_.Sub(name);
    options.durability = Durability::kMemory;
    options.keys = std::move(keys);
    Status s = TaskStore::Open(options, &store_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  StoredTask Make(TaskId id, std::string type, TaskStatus status,
                  std::string group = "") {
    StoredTask t = spool::testing::PendingTask(id, type, 0,
                                               "payload " + std::to_string(id));
    t.spec.group = group;
    t.spec.created_us = 1700000000000000 + static_cast<int64_t>(id);
    t.state.stored_group = store_->StoredGroup(group);
    t.state.status = status;
    t.state.max_attempts = 3;
    t.state.updated_us = t.spec.created_us;
    return t;
  }

  // Stores `tasks` in one commit, inserting new ones and updating the state
  // of existing ones (a spec is written once), and keeps the model in step.
  void Put(std::vector<StoredTask> tasks) {
    WriteTxn txn(store_.get());
    for (StoredTask& t : tasks) {
      StateRecord existing;
      if (txn.GetState(t.state.id, &existing).ok()) {
        t.state.sequence = existing.sequence;
        t.spec = model_[t.state.id].spec;
        model_[t.state.id] = t;
        model_[t.state.id].state.new_failures.clear();
        txn.Update(std::move(t.state));
      } else {
        t.state.sequence = txn.NextSequence();
        model_[t.state.id] = t;
        model_[t.state.id].state.new_failures.clear();
        spool::testing::InsertTask(&txn, std::move(t));
      }
    }
    Status s = store_->Commit(&txn);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  void Remove(TaskId id) {
    WriteTxn txn(store_.get());
    StateRecord existing;
    ASSERT_TRUE(txn.GetState(id, &existing).ok());
    txn.Delete(id);
    ASSERT_TRUE(store_->Commit(&txn).ok());
    model_.erase(id);
  }

  static bool Matches(const StoredTask& t, const ListSpec& spec) {
    return (!spec.status || t.state.status == *spec.status) &&
           (spec.type.empty() || t.spec.type == spec.type) &&
           (spec.group.empty() || t.spec.group == spec.group);
  }

  std::vector<TaskId> Expected(const ListSpec& spec) const {
    std::vector<TaskId> ids;
    for (const auto& [id, t] : model_) {
      if (Matches(t, spec)) ids.push_back(id);
    }
    return ids;
  }

  // One page: the ids, in order. Each task must be what the model says.
  std::vector<TaskId> Page(const ListSpec& spec, PageInfo* info) {
    std::vector<TaskId> ids;
    auto view = store_->NewReadView();
    Status s = ListPage(
        *view, spec,
        [&](const TaskBytes& task) {
          const TaskView& v = task.view();
          TaskId id = v.spec->id();
          EXPECT_EQ(v.state->id(), id);
          auto it = model_.find(id);
          if (it != model_.end()) {
            EXPECT_EQ(StatusOf(*v.state), it->second.state.status) << id;
            EXPECT_EQ(TypeOf(v), it->second.spec.type) << id;
          }
          ids.push_back(id);
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
      EXPECT_TRUE(info.unreadable.empty());
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
    std::vector<StoredTask> tasks;
    for (TaskId id = 1; id <= n; ++id) {
      StoredTask t =
          Make(id, kTypes[(*rng)() % 3], static_cast<TaskStatus>((*rng)() % 8),
               kGroups[(*rng)() % 3]);
      // Some with a failure history, which the listings read too.
      if ((*rng)() % 4 == 0) {
        RecordFailure(&t.state, 1, t.spec.created_us, "failed once");
      }
      tasks.push_back(std::move(t));
    }
    Put(std::move(tasks));
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
  std::map<TaskId, StoredTask> model_;
};

std::string Describe(const TaskQuery& q) {
  return std::string("status ") + (q.status ? TaskStatusName(*q.status) : "*") +
         " type '" + q.type + "' group '" + q.group + "'";
}

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
          << Describe(base) << " limit " << limit;
      // Exactly the pages needed, plus none: the last full page already
      // knows whether more follow.
      size_t needed =
          std::max<size_t>(1, (expected.size() + limit - 1) / limit);
      EXPECT_EQ(pages, needed) << Describe(base) << " limit " << limit;
    }
  }
}

// Every status, one at a time, with and without a type and a group: the
// filters the combinations above do not reach.
TEST_F(QueriesTest, EveryStatusAloneAndWithTypeAndGroup) {
  std::mt19937_64 rng(17);
  Fill(400, &rng);
  for (size_t s = 0; s < kTaskStatusCount; ++s) {
    for (std::string type : {"", "beta"}) {
      for (std::string group : {"", "g2"}) {
        TaskQuery q;
        q.status = static_cast<TaskStatus>(s);
        q.type = type;
        q.group = group;
        q.limit = 9;
        ListSpec spec;
        ASSERT_TRUE(ParseTaskQuery(q, &spec).ok());
        EXPECT_EQ(All(q), Expected(spec)) << Describe(q);
      }
    }
  }
  // A type or group no task has.
  TaskQuery q;
  q.type = "delta";
  EXPECT_TRUE(All(q).empty());
  q.type.clear();
  q.group = "g3";
  EXPECT_TRUE(All(q).empty());
  q.type = "alpha";
  EXPECT_TRUE(All(q).empty());
}

// A status listing merges the status's per-type ranges, found by skipping
// from one type to the next; types of every length and byte, one task or
// many each, must all be found, in id order, page after page.
TEST_F(QueriesTest, AStatusListingFindsEveryTypeInIt) {
  std::vector<std::string> types = {"a",
                                    "b",
                                    "\xff",
                                    "aa",
                                    "a\xff",
                                    std::string("\0", 1),
                                    "ab",
                                    "\xff\xff\xff",
                                    "zzzzzzzzzzzzzzzzzzz"};
  for (int i = 0; i < 40; ++i) types.push_back("type-" + std::to_string(i));
  std::mt19937_64 rng(29);
  std::vector<StoredTask> tasks;
  for (TaskId id = 1; id <= 700; ++id) {
    // Type "a" gets many tasks, the others few.
    std::string type = rng() % 3 == 0 ? "a" : types[rng() % types.size()];
    TaskStatus status =
        rng() % 2 ? TaskStatus::kRunning : static_cast<TaskStatus>(rng() % 8);
    tasks.push_back(Make(id, type, status));
  }
  Put(std::move(tasks));
  for (size_t s = 0; s < kTaskStatusCount; ++s) {
    for (size_t limit : {1, 3, 50, 1000}) {
      TaskQuery q;
      q.status = static_cast<TaskStatus>(s);
      q.limit = limit;
      ListSpec spec;
      ASSERT_TRUE(ParseTaskQuery(q, &spec).ok());
      EXPECT_EQ(All(q), Expected(spec)) << Describe(q) << " limit " << limit;
    }
  }
  for (const std::string& type : types) {
    TaskQuery q;
    q.type = type;
    q.limit = 7;
    ListSpec spec;
    ASSERT_TRUE(ParseTaskQuery(q, &spec).ok());
    EXPECT_EQ(All(q), Expected(spec)) << Describe(q);
    q.status = TaskStatus::kRunning;
    ASSERT_TRUE(ParseTaskQuery(q, &spec).ok());
    EXPECT_EQ(All(q), Expected(spec)) << Describe(q);
  }
  // The oldest of a status is the lowest id over all its types.
  auto view = store_->NewReadView();
  for (size_t s = 0; s < kTaskStatusCount; ++s) {
    auto status = static_cast<TaskStatus>(s);
    std::optional<TaskId> oldest;
    for (const auto& [id, t] : model_) {
      if (t.state.status == status) {
        oldest = id;
        break;
      }
    }
    std::optional<TaskId> id;
    ASSERT_TRUE(OldestWithStatus(*view, status, &id).ok());
    EXPECT_EQ(id, oldest) << TaskStatusName(status);
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
      std::vector<StoredTask> updates;
      std::set<TaskId> picked;
      for (int i = 0; i < 20; ++i) {
        TaskId id = 1 + rng() % (next_id - 1);
        auto it = model_.find(id);
        if (it == model_.end() || !picked.insert(id).second) continue;
        StoredTask t = it->second;
        t.state.status = static_cast<TaskStatus>(rng() % 8);
        t.state.updated_us += 1;
        changed.insert(id);
        updates.push_back(t);
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
        EXPECT_EQ(seen.count(id), 1u)
            << "task " << id << " was skipped, " << Describe(base);
      }
    }
  }
}

TEST_F(QueriesTest, ScanBudgetEndsAPageEarlyButTheListingCompletes) {
  // 30,000 tasks in one group, of which only the last three are failed: a
  // group + status page must stop after its budget, hand back a cursor,
  // and the listing must still find all three.
  std::vector<StoredTask> tasks;
  for (TaskId id = 1; id <= 30000; ++id) {
    TaskStatus status =
        id > 29997 ? TaskStatus::kFailed : TaskStatus::kSucceeded;
    tasks.push_back(Make(id, "alpha", status, "big"));
  }
  Put(std::move(tasks));
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
  // A type filter with a group reads states, within the same budget.
  q.status.reset();
  q.type = "beta";
  EXPECT_TRUE(All(q).empty());
  q.type = "alpha";
  q.limit = kMaxPageSize;
  EXPECT_EQ(All(q).size(), 30000u);
}

// The entry past the budget is not examined; the next page starts with it,
// so a listing never skips it.
TEST_F(QueriesTest, TheEntryThatSpendsTheBudgetIsNotSkipped) {
  const size_t kLimit = 10;
  const TaskId kAtBudget = kLimit + kMaxPageScan + 1;
  std::vector<StoredTask> tasks;
  for (TaskId id = 1; id <= kAtBudget + 5; ++id) {
    TaskStatus status =
        id == kAtBudget ? TaskStatus::kFailed : TaskStatus::kSucceeded;
    tasks.push_back(
        Make(id, id == kAtBudget ? "beta" : "alpha", status, "big"));
  }
  Put(std::move(tasks));
  TaskQuery q;
  q.group = "big";
  q.status = TaskStatus::kFailed;
  q.limit = kLimit;
  ListSpec spec;
  ASSERT_TRUE(ParseTaskQuery(q, &spec).ok());
  PageInfo info;
  Page(spec, &info);
  EXPECT_EQ(info.examined, kAtBudget - 1);
  EXPECT_EQ(All(q), std::vector<TaskId>{kAtBudget});
  q.status.reset();
  q.type = "beta";
  EXPECT_EQ(All(q), std::vector<TaskId>{kAtBudget});
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
  std::vector<TaskId> first = Page(spec, &info);
  ASSERT_EQ(first.size(), 2u);
  ASSERT_FALSE(info.next_cursor.empty());
  EXPECT_EQ(info.next_cursor, EncodeCursor(spec, first.back()));
  for (char c : info.next_cursor) {
    EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z')) << c;
  }
  TaskQuery next = q;
  next.cursor = info.next_cursor;
  next.limit = 5;  // the limit may change between pages
  ASSERT_TRUE(ParseTaskQuery(next, &spec).ok());
  EXPECT_EQ(spec.after, first.back());
  TaskQuery other = next;
  other.type = "beta";
  Status s = ParseTaskQuery(other, &spec);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  other = next;
  other.status = TaskStatus::kPending;
  EXPECT_TRUE(ParseTaskQuery(other, &spec).IsInvalidArgument());
  other = next;
  other.group = "g1";
  EXPECT_TRUE(ParseTaskQuery(other, &spec).IsInvalidArgument());
  for (const std::string& bad : std::vector<std::string>{
           "x", "c1", "c1zzzzzzzzzzzzzzzz00000000", info.next_cursor + "0",
           "c2" + info.next_cursor.substr(2)}) {
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
  q.type = std::string(kMaxKeyString + 1, 't');
  EXPECT_TRUE(ParseTaskQuery(q, &spec).IsInvalidArgument());
  q.type.clear();
  q.status = static_cast<TaskStatus>(kTaskStatusCount);
  EXPECT_TRUE(ParseTaskQuery(q, &spec).IsInvalidArgument());
  // A cursor at the largest id: an empty, complete page.
  ListSpec end;
  end.after = UINT64_MAX;
  PageInfo end_info;
  EXPECT_TRUE(Page(end, &end_info).empty());
  EXPECT_TRUE(end_info.next_cursor.empty());
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
  // Failure histories are read with the task.
  EXPECT_NE(json.find("\"error\":\"failed once\""), std::string::npos);
  // The last page says it is the last.
  q.cursor = json.substr(json.find("\"next_cursor\":\"") + 15, 26);
  ASSERT_TRUE(ParseTaskQuery(q, &spec).ok());
  json.clear();
  ASSERT_TRUE(ListPageJson(*view, spec, &none, &json).ok());
  EXPECT_TRUE(IsValidJson(json));
  EXPECT_NE(json.find("\"next_cursor\":null"), std::string::npos);
  objects = 0;
  for (size_t at = json.find("{\"id\":"); at != std::string::npos;
       at = json.find("{\"id\":", at + 1)) {
    ++objects;
  }
  EXPECT_EQ(objects, 20u);
}

TEST_F(QueriesTest, JsonPayloadsFollowTheDeclaredTypes) {
  std::vector<StoredTask> tasks;
  for (TaskId id = 1; id <= 4; ++id) {
    StoredTask t = Make(id, id % 2 ? "json" : "bin", TaskStatus::kPending);
    t.spec.payload = "{\"n\":" + std::to_string(id) + "}";
    tasks.push_back(t);
  }
  Put(std::move(tasks));
  JsonPayloadTypes types = JsonPayloadTypes().With("json");
  ListSpec spec;
  std::string json;
  ASSERT_TRUE(ListPageJson(*store_->NewReadView(), spec, &types, &json).ok());
  EXPECT_TRUE(IsValidJson(json)) << json;
  EXPECT_NE(json.find("\"payload\":{\"n\":1}"), std::string::npos) << json;
  EXPECT_NE(json.find("\"payload\":{\"n\":3}"), std::string::npos);
  EXPECT_EQ(json.find("\"payload\":{\"n\":2}"), std::string::npos);
  EXPECT_NE(json.find("\"payload_base64\":\"eyJuIjoyfQ==\""), std::string::npos)
      << json;
  // PageJsonWriter by hand, with a cursor and unreadable tasks.
  std::string out;
  PageJsonWriter writer(&out);
  TaskBytes task;
  ASSERT_TRUE(ReadTask(*store_->NewReadView(), 1, &task).ok());
  writer.Add(task.view(), FormatOf(task.view(), &types));
  PageInfo info;
  info.next_cursor = "c1abc";
  info.unreadable = {7, 9};
  writer.Finish(info);
  EXPECT_TRUE(IsValidJson(out)) << out;
  EXPECT_NE(out.find("],\"next_cursor\":\"c1abc\",\"unreadable\":[7,9]}"),
            std::string::npos)
      << out;
  EXPECT_EQ(FormatOf(task.view(), nullptr), PayloadFormat::kBinary);
}

TEST_F(QueriesTest, DamagedTasksAreReportedNotHidingTheRest) {
  std::vector<StoredTask> tasks;
  for (TaskId id = 1; id <= 6; ++id) {
    tasks.push_back(Make(id, "alpha", TaskStatus::kPending, "g1"));
  }
  Put(std::move(tasks));
  // Task 3's state and task 5's spec are damaged.
  ASSERT_TRUE(store_->PutRawForTesting(StateKey(3), "not a flatbuffer").ok());
  ASSERT_TRUE(store_->PutRawForTesting(SpecKey(5), "not a flatbuffer").ok());
  for (int filter = 0; filter < 5; ++filter) {
    TaskQuery q;
    if (filter == 1) q.status = TaskStatus::kPending;
    if (filter == 2) q.type = "alpha";
    if (filter == 3) {
      q.type = "alpha";
      q.status = TaskStatus::kPending;
    }
    if (filter == 4) q.group = "g1";
    ListSpec spec;
    ASSERT_TRUE(ParseTaskQuery(q, &spec).ok());
    PageInfo info;
    EXPECT_EQ(Page(spec, &info), (std::vector<TaskId>{1, 2, 4, 6}))
        << Describe(q);
    EXPECT_EQ(info.unreadable, (std::vector<TaskId>{3, 5})) << Describe(q);
    // An unreadable task counts towards the page: the cursor covers it.
    q.limit = 3;
    ASSERT_TRUE(ParseTaskQuery(q, &spec).ok());
    EXPECT_EQ(Page(spec, &info), (std::vector<TaskId>{1, 2}));
    EXPECT_EQ(info.unreadable, (std::vector<TaskId>{3}));
    EXPECT_EQ(info.next_cursor, EncodeCursor(spec, 3));
  }
  auto view = store_->NewReadView();
  TaskBytes task;
  EXPECT_TRUE(ReadTask(*view, 3, &task).IsCorruption());
  EXPECT_TRUE(ReadTask(*view, 5, &task).IsCorruption());
  EXPECT_TRUE(ReadTask(*view, 99, &task).IsNotFound());
  ASSERT_TRUE(ReadTask(*view, 4, &task).ok());
  EXPECT_EQ(task.view().spec->id(), 4u);
}

// An index entry whose task is gone (set aside with its entries unknown) is
// listed as unreadable by the index listings; the unfiltered listing reads
// `tasks` itself and does not see it.
TEST_F(QueriesTest, IndexEntriesWithoutATaskAreUnreadable) {
  std::vector<StoredTask> tasks;
  for (TaskId id = 1; id <= 3; ++id) {
    tasks.push_back(Make(id, "alpha", TaskStatus::kPending));
  }
  Put(std::move(tasks));
  {
    WriteTxn txn(store_.get());
    txn.Quarantine(2, {});
    ASSERT_TRUE(store_->Commit(&txn).ok());
  }
  TaskQuery q;
  ListSpec spec;
  ASSERT_TRUE(ParseTaskQuery(q, &spec).ok());
  PageInfo info;
  EXPECT_EQ(Page(spec, &info), (std::vector<TaskId>{1, 3}));
  EXPECT_TRUE(info.unreadable.empty());
  q.status = TaskStatus::kPending;
  ASSERT_TRUE(ParseTaskQuery(q, &spec).ok());
  EXPECT_EQ(Page(spec, &info), (std::vector<TaskId>{1, 3}));
  EXPECT_EQ(info.unreadable, std::vector<TaskId>{2});
}

TEST_F(QueriesTest, OldestOfAStatusAndNextDue) {
  auto view = store_->NewReadView();
  std::optional<TaskId> id;
  ASSERT_TRUE(OldestWithStatus(*view, TaskStatus::kPending, &id).ok());
  EXPECT_FALSE(id);
  ASSERT_TRUE(NextDue(*view, &id).ok());
  EXPECT_FALSE(id);
  std::vector<StoredTask> tasks;
  for (TaskId n = 1; n <= 6; ++n) {
    StoredTask t = Make(
        n, "alpha", n % 2 ? TaskStatus::kPending : TaskStatus::kRetryScheduled);
    // Tasks 2, 4, 6 wait for a time; 4 is due first.
    if (n % 2 == 0) t.state.next_attempt_us = 1000 + (n == 4 ? 0 : 100 * n);
    tasks.push_back(t);
  }
  Put(std::move(tasks));
  view = store_->NewReadView();
  ASSERT_TRUE(OldestWithStatus(*view, TaskStatus::kPending, &id).ok());
  EXPECT_EQ(id, std::optional<TaskId>(1));
  ASSERT_TRUE(OldestWithStatus(*view, TaskStatus::kRetryScheduled, &id).ok());
  EXPECT_EQ(id, std::optional<TaskId>(2));
  ASSERT_TRUE(OldestWithStatus(*view, TaskStatus::kFailed, &id).ok());
  EXPECT_FALSE(id);
  ASSERT_TRUE(NextDue(*view, &id).ok());
  EXPECT_EQ(id, std::optional<TaskId>(4));
  // The oldest pending task of another type that sorts first: still 1.
  Put({Make(7, "aaaa-first", TaskStatus::kPending),
       Make(8, "0", TaskStatus::kFailed), Make(9, "zz", TaskStatus::kFailed)});
  view = store_->NewReadView();
  ASSERT_TRUE(OldestWithStatus(*view, TaskStatus::kPending, &id).ok());
  EXPECT_EQ(id, std::optional<TaskId>(1));
  ASSERT_TRUE(OldestWithStatus(*view, TaskStatus::kFailed, &id).ok());
  EXPECT_EQ(id, std::optional<TaskId>(8));
  // Claimed: no longer due; the next one is.
  StoredTask four = model_[4];
  four.state.status = TaskStatus::kRunning;
  Put({four});
  view = store_->NewReadView();
  ASSERT_TRUE(NextDue(*view, &id).ok());
  EXPECT_EQ(id, std::optional<TaskId>(2));
}

TEST_F(QueriesTest, IndexesMatchAFullScanAfterRandomOperations) {
  // Random inserts, status changes (with and without a due time),
  // dependencies, failures and deletions, in random batches; after each
  // batch, the index family must equal what the states imply.
  std::mt19937_64 rng(42);
  TaskId next_id = 1;
  for (int round = 0; round < 60; ++round) {
    WriteTxn txn(store_.get());
    int ops = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < ops; ++i) {
      int op = static_cast<int>(rng() % 10);
      if (op < 4 || next_id == 1) {
        StoredTask t = Make(next_id, kTypes[rng() % 3], TaskStatus::kPending,
                            kGroups[rng() % 3]);
        t.state.priority = static_cast<int32_t>(rng() % 5) - 2;
        if (rng() % 3 == 0) {
          t.spec.dedup_key = "d" + std::to_string(next_id);
          t.state.stored_dedup_key = t.spec.dedup_key;
        }
        if (rng() % 4 == 0) t.state.next_attempt_us = 5000 + rng() % 1000;
        t.state.sequence = txn.NextSequence();
        ++next_id;
        spool::testing::InsertTask(&txn, std::move(t));
        continue;
      }
      TaskId id = 1 + rng() % (next_id - 1);
      StateRecord r;
      if (!txn.GetState(id, &r).ok()) continue;
      if (op == 9) {
        txn.Delete(id);
        continue;
      }
      r.status = static_cast<TaskStatus>(rng() % kTaskStatusCount);
      r.next_attempt_us = rng() % 2 ? 0 : 6000 + rng() % 1000;
      if (op == 7) RecordFailure(&r, r.attempts + 1, 10, "failed");
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
  // And the listings agree with the stored tasks.
  std::map<TaskId, StoredTask> stored;
  ASSERT_TRUE(
      store_
          ->ScanTasks(ColumnFamily::kTasks, 0,
                      [&](TaskId id, TaskBytes& task, const Status& o) {
                        EXPECT_TRUE(o.ok());
                        StoredTask t;
                        EXPECT_TRUE(DecodeSpec(id, task.spec(), &t.spec).ok());
                        EXPECT_TRUE(
                            DecodeState(id, task.state(), &t.state).ok());
                        stored[id] = t;
                        return true;
                      })
          .ok());
  model_ = stored;
  for (const TaskQuery& base : AllFilters()) {
    ListSpec spec;
    ASSERT_TRUE(ParseTaskQuery(base, &spec).ok());
    TaskQuery q = base;
    q.limit = 50;
    EXPECT_EQ(All(q), Expected(spec)) << Describe(base);
  }
}

// In an encrypted store a group listing looks up the group's tag; the JSON
// shows the application's group from the (sealed) spec.
TEST_F(QueriesTest, ListingsInAnEncryptedStore) {
  std::shared_ptr<const KeyRing> keys;
  ASSERT_TRUE(KeyRing::Create(NewRandomKey(), {}, &keys).ok());
  Open(keys, "encrypted");
  ASSERT_TRUE(store_->encrypted());
  std::mt19937_64 rng(23);
  Fill(200, &rng);
  EXPECT_NE(store_->StoredGroup("g1"), "g1");
  for (const TaskQuery& base : AllFilters()) {
    ListSpec spec;
    ASSERT_TRUE(ParseTaskQuery(base, &spec).ok());
    TaskQuery q = base;
    q.limit = 17;
    EXPECT_EQ(All(q), Expected(spec)) << Describe(base);
  }
  TaskQuery q;
  q.group = "g1";
  ListSpec spec;
  ASSERT_TRUE(ParseTaskQuery(q, &spec).ok());
  std::string json;
  ASSERT_TRUE(ListPageJson(*store_->NewReadView(), spec, nullptr, &json).ok());
  EXPECT_TRUE(IsValidJson(json));
  EXPECT_NE(json.find("\"group\":\"g1\""), std::string::npos)
      << json.substr(0, 300);
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
