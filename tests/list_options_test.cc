// Listing options (issue 15): newest first, a created-time range and a
// projection without payloads, through the runtime on a real store, for
// every filter the indexes serve.

#include <algorithm>
#include <chrono>
#include <future>
#include <string>
#include <vector>

#include <spool/runtime.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/runtime_testing.h"

namespace spool {
namespace {

using namespace std::chrono_literals;
using spool::testing::Await;
using spool::testing::OpenOrDie;
using spool::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr auto kWait = 60s;
const Timestamp kStart = Timestamp(std::chrono::hours(24 * 365 * 50));

struct Fixture {
  TempDir dir;
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(kStart);
  std::unique_ptr<Runtime> runtime;

  explicit Fixture(Durability durability = Durability::kSync) {
    Options options;
    options.path = dir.Sub("q");
    options.durability = durability;
    options.clock = clock;
    runtime = OpenOrDie(options);
  }

  // Registers handlers for `types`, never started: their tasks stay pending.
  void Register(std::initializer_list<const char*> types) {
    for (const char* type : types) {
      EXPECT_TRUE(runtime->RegisterHandler(type, spool::testing::Ok).ok());
    }
  }
};

std::vector<TaskId> Ids(const std::vector<TaskInfo>& tasks) {
  std::vector<TaskId> ids;
  for (const TaskInfo& task : tasks) ids.push_back(task.id);
  return ids;
}

// Every page of `query`, concatenated; *pages counts them.
std::vector<TaskInfo> ListAll(Runtime* runtime, TaskQuery query,
                              size_t* pages = nullptr) {
  std::vector<TaskInfo> all;
  size_t count = 0;
  do {
    auto page = Await(runtime->ListTasks(query), kWait);
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    if (!page.ok()) break;
    all.insert(all.end(), page->tasks.begin(), page->tasks.end());
    query.cursor = page->next_cursor;
    ++count;
  } while (!query.cursor.empty() && count < 100000);
  if (pages != nullptr) *pages = count;
  return all;
}

// Tasks of two types, in two groups and none, in several statuses (pending,
// held, failed, succeeded), interleaved so that every index holds a mix.
std::vector<TaskId> EnqueueMix(Runtime* runtime) {
  EXPECT_TRUE(runtime
                  ->RegisterHandler("a",
                                    [](TaskContext& task) {
                                      return task.payload() == "fail"
                                                 ? Status::IOError("no")
                                                 : Status::OK();
                                    })
                  .ok());
  EXPECT_TRUE(runtime->RegisterHandler("b", spool::testing::Ok).ok());
  std::vector<TaskId> ids;
  for (int i = 0; i < 60; ++i) {
    EnqueueOptions options;
    options.retry = RetryPolicy::None();
    if (i % 3 == 1) options.group = "g1";
    if (i % 3 == 2) options.group = "g2";
    if (i % 7 == 0) options.delay = std::chrono::hours(1);
    const char* type = i % 2 == 0 ? "a" : "b";
    Ticket ticket = runtime->Enqueue(type, i % 5 == 0 ? "fail" : "ok", options);
    EXPECT_TRUE(Await(ticket.stored, kWait).ok());
    ids.push_back(ticket.id);
  }
  EXPECT_TRUE(Await(runtime->Hold(ids[9]), kWait).ok());
  EXPECT_TRUE(runtime->Start().ok());
  EXPECT_TRUE(Await(runtime->Drain(), kWait).ok());
  return ids;
}

TEST(ListOrderTest, NewestFirstIsOldestFirstReversedForEveryFilter) {
  Fixture f;
  EnqueueMix(f.runtime.get());

  std::vector<TaskQuery> queries;
  for (std::string type : {"", "a"}) {
    for (std::string group : {"", "g1"}) {
      for (std::optional<TaskStatus> status :
           {std::optional<TaskStatus>(), std::optional(TaskStatus::kFailed),
            std::optional(TaskStatus::kPending)}) {
        TaskQuery query;
        query.type = type;
        query.group = group;
        query.status = status;
        query.limit = 4;
        queries.push_back(query);
      }
    }
  }
  for (TaskQuery query : queries) {
    SCOPED_TRACE("type '" + query.type + "' group '" + query.group +
                 "' status " +
                 (query.status ? TaskStatusName(*query.status) : "any"));
    std::vector<TaskId> oldest = Ids(ListAll(f.runtime.get(), query));
    ASSERT_FALSE(oldest.empty());
    ASSERT_TRUE(std::is_sorted(oldest.begin(), oldest.end()));
    query.order = ListOrder::kNewestFirst;
    size_t pages = 0;
    std::vector<TaskId> newest = Ids(ListAll(f.runtime.get(), query, &pages));
    std::reverse(newest.begin(), newest.end());
    EXPECT_EQ(newest, oldest);
    EXPECT_EQ(pages, (oldest.size() + 3) / 4);

    // The JSON form lists the same ids, in the same order.
    query.limit = 1000;
    auto json = Await(f.runtime->ListTasksJson(query), kWait);
    ASSERT_TRUE(json.ok()) << json.status().ToString();
    std::vector<TaskId> in_json;
    for (size_t at = json->find("{\"id\":"); at != std::string::npos;
         at = json->find("{\"id\":", at + 1)) {
      in_json.push_back(std::stoull(json->substr(at + 6)));
    }
    std::reverse(in_json.begin(), in_json.end());
    EXPECT_EQ(in_json, oldest);
  }
  ASSERT_TRUE(Await(f.runtime->Close(), kWait).ok());
}

TEST(ListOrderTest, ANewestFirstCursorIsRefusedByAnOldestFirstQuery) {
  Fixture f;
  f.Register({"t"});
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(Await(f.runtime->Enqueue("t", "x").stored, kWait).ok());
  }
  TaskQuery query;
  query.order = ListOrder::kNewestFirst;
  query.limit = 2;
  auto page = Await(f.runtime->ListTasks(query), kWait);
  ASSERT_TRUE(page.ok());
  ASSERT_FALSE(page->next_cursor.empty());
  query.order = ListOrder::kOldestFirst;
  query.cursor = page->next_cursor;
  auto refused = Await(f.runtime->ListTasks(query), kWait);
  EXPECT_TRUE(refused.status().IsInvalidArgument());
  EXPECT_THAT(refused.status().ToString(), HasSubstr("other filters"));

  query.order = static_cast<ListOrder>(7);
  query.cursor.clear();
  auto bad = Await(f.runtime->ListTasks(query), kWait);
  EXPECT_TRUE(bad.status().IsInvalidArgument());
  EXPECT_THAT(bad.status().ToString(), HasSubstr("order"));
  ASSERT_TRUE(Await(f.runtime->Close(), kWait).ok());
}

TEST(CreatedRangeTest, KeepsOnlyTasksCreatedInTheRange) {
  Fixture f;
  f.Register({"a", "b"});
  std::vector<TaskId> hours[3];
  for (int hour = 0; hour < 3; ++hour) {
    f.clock->Set(kStart + std::chrono::hours(hour));
    for (int i = 0; i < 10; ++i) {
      Ticket ticket = f.runtime->Enqueue(i % 2 ? "a" : "b", "p");
      ASSERT_TRUE(Await(ticket.stored, kWait).ok());
      hours[hour].push_back(ticket.id);
    }
  }
  TaskQuery query;
  query.created_from = kStart + 1h;
  query.created_before = kStart + 2h;
  query.limit = 3;
  EXPECT_EQ(Ids(ListAll(f.runtime.get(), query)), hours[1]);
  query.order = ListOrder::kNewestFirst;
  std::vector<TaskId> newest = Ids(ListAll(f.runtime.get(), query));
  std::reverse(newest.begin(), newest.end());
  EXPECT_EQ(newest, hours[1]);

  // With a filter, and with one bound only (from is inclusive, before is
  // exclusive).
  query.order = ListOrder::kOldestFirst;
  query.type = "a";
  std::vector<TaskId> expected;
  for (size_t i = 1; i < hours[1].size(); i += 2)
    expected.push_back(hours[1][i]);
  EXPECT_EQ(Ids(ListAll(f.runtime.get(), query)), expected);
  query.type.clear();
  query.created_before.reset();
  EXPECT_EQ(ListAll(f.runtime.get(), query).size(), 20u);
  query.created_from.reset();
  query.created_before = kStart + 1h;
  EXPECT_EQ(Ids(ListAll(f.runtime.get(), query)), hours[0]);

  // A range's cursor belongs to that range.
  query.limit = 4;
  auto page = Await(f.runtime->ListTasks(query), kWait);
  ASSERT_TRUE(page.ok());
  ASSERT_FALSE(page->next_cursor.empty());
  query.cursor = page->next_cursor;
  query.created_before = kStart + 2h;
  EXPECT_TRUE(
      Await(f.runtime->ListTasks(query), kWait).status().IsInvalidArgument());

  query.cursor.clear();
  query.created_from = kStart + 2h;
  query.created_before = kStart + 2h;
  auto empty_range = Await(f.runtime->ListTasks(query), kWait);
  EXPECT_TRUE(empty_range.status().IsInvalidArgument());
  EXPECT_THAT(empty_range.status().ToString(), HasSubstr("created_before"));
  ASSERT_TRUE(Await(f.runtime->Close(), kWait).ok());
}

TEST(CreatedRangeTest, ARangeMissingMostTasksReturnsShortPagesWithinTheBudget) {
  // The range is checked on records: past kMaxPageScan entries a page stops
  // short with a cursor instead of reading on.
  Fixture f(Durability::kMemory);
  f.Register({"t"});
  std::vector<TaskSpec> old_tasks(kMaxPageScan + 500, TaskSpec{"t", "p", {}});
  ASSERT_TRUE(
      Await(f.runtime->EnqueueBatch(std::move(old_tasks)).stored, kWait).ok());
  f.clock->Set(kStart + 1h);
  std::vector<TaskId> recent;
  for (int i = 0; i < 5; ++i) {
    Ticket ticket = f.runtime->Enqueue("t", "p");
    ASSERT_TRUE(Await(ticket.stored, kWait).ok());
    recent.push_back(ticket.id);
  }
  TaskQuery query;
  query.created_from = kStart + 1h;
  auto first = Await(f.runtime->ListTasks(query), kWait);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->tasks.empty());
  EXPECT_FALSE(first->next_cursor.empty());
  size_t pages = 0;
  EXPECT_EQ(Ids(ListAll(f.runtime.get(), query, &pages)), recent);
  EXPECT_EQ(pages, 2u);
  // Newest first finds them on the first page.
  query.order = ListOrder::kNewestFirst;
  query.limit = 5;
  auto newest = Await(f.runtime->ListTasks(query), kWait);
  ASSERT_TRUE(newest.ok());
  EXPECT_EQ(newest->tasks.size(), 5u);
  ASSERT_TRUE(Await(f.runtime->Close(), kWait).ok());
}

TEST(PageBytesTest, APageStopsAtItsByteBudgetAndTheCursorListsTheRest) {
  TempDir dir;
  Options options;
  options.path = dir.Sub("q");
  options.durability = Durability::kRelaxed;
  options.max_payload_bytes = kMaxPageBytes + (size_t{1} << 20);
  std::unique_ptr<Runtime> runtime = OpenOrDie(options);
  ASSERT_TRUE(runtime->RegisterHandler("big", spool::testing::Ok).ok());
  // 40 MB of payloads: at most 16 of them fit one page's budget.
  constexpr size_t kTasks = 40;
  const std::string payload(1000000, 'p');
  std::vector<TaskId> ids;
  for (size_t i = 0; i < kTasks; ++i) {
    Ticket ticket = runtime->Enqueue("big", payload);
    ASSERT_TRUE(Await(ticket.stored, kWait).ok());
    ids.push_back(ticket.id);
  }
  // One task larger than the whole budget still makes a page.
  Ticket huge = runtime->Enqueue("big", std::string(kMaxPageBytes + 1, 'h'));
  ASSERT_TRUE(Await(huge.stored, kWait).ok());
  ids.push_back(huge.id);

  TaskQuery query;
  query.limit = kMaxPageSize;
  size_t pages = 0;
  std::vector<TaskInfo> all = ListAll(runtime.get(), query, &pages);
  EXPECT_EQ(Ids(all), ids);
  EXPECT_GE(pages, 4u);
  auto first = Await(runtime->ListTasks(query), kWait);
  ASSERT_TRUE(first.ok());
  size_t bytes = 0;
  for (const TaskInfo& task : first->tasks) bytes += task.payload.size();
  EXPECT_LE(bytes, kMaxPageBytes);
  EXPECT_GE(first->tasks.size(), 10u);
  EXPECT_FALSE(first->next_cursor.empty());

  // Without payloads, every task fits one page.
  query.include_payload = false;
  auto bare = Await(runtime->ListTasks(query), kWait);
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(Ids(bare->tasks), ids);
  EXPECT_TRUE(bare->next_cursor.empty());
  ASSERT_TRUE(Await(runtime->Close(), kWait).ok());
}

TEST(ListProjectionTest, WithoutPayloadsListingsCarryNone) {
  Fixture f;
  f.Register({"json", "bytes"});
  ASSERT_TRUE(f.runtime->DeclareJsonPayload("json").ok());
  ASSERT_TRUE(
      Await(f.runtime->Enqueue("json", R"({"big":"payload"})").stored, kWait)
          .ok());
  ASSERT_TRUE(Await(f.runtime->Enqueue("bytes", "opaque").stored, kWait).ok());

  TaskQuery query;
  auto with = Await(f.runtime->ListTasks(query), kWait);
  ASSERT_TRUE(with.ok());
  ASSERT_EQ(with->tasks.size(), 2u);
  EXPECT_EQ(with->tasks[1].payload, "opaque");
  auto with_json = Await(f.runtime->ListTasksJson(query), kWait);
  ASSERT_TRUE(with_json.ok());
  EXPECT_THAT(*with_json, HasSubstr("\"payload\":{\"big\""));
  EXPECT_THAT(*with_json, HasSubstr("\"payload_base64\""));

  query.include_payload = false;
  auto without = Await(f.runtime->ListTasks(query), kWait);
  ASSERT_TRUE(without.ok());
  ASSERT_EQ(without->tasks.size(), 2u);
  for (const TaskInfo& task : without->tasks) {
    EXPECT_TRUE(task.payload.empty());
    EXPECT_FALSE(task.type.empty());
  }
  auto without_json = Await(f.runtime->ListTasksJson(query), kWait);
  ASSERT_TRUE(without_json.ok());
  EXPECT_THAT(*without_json, Not(HasSubstr("payload")));
  EXPECT_THAT(*without_json, HasSubstr("\"type\":\"bytes\""));

  // A live listing without payloads, beside one with them: each delivers
  // its own form.
  std::promise<std::string> bare;
  std::promise<std::string> full;
  auto bare_done = bare.get_future();
  auto full_done = full.get_future();
  bool bare_set = false;
  bool full_set = false;
  auto watch_bare =
      f.runtime->WatchListJson(query, [&](const Result<std::string>& page) {
        if (!bare_set && page.ok()) bare.set_value(*page), bare_set = true;
      });
  ASSERT_TRUE(watch_bare.ok());
  query.include_payload = true;
  auto watch_full =
      f.runtime->WatchListJson(query, [&](const Result<std::string>& page) {
        if (!full_set && page.ok()) full.set_value(*page), full_set = true;
      });
  ASSERT_TRUE(watch_full.ok());
  ASSERT_EQ(bare_done.wait_for(kWait), std::future_status::ready);
  ASSERT_EQ(full_done.wait_for(kWait), std::future_status::ready);
  EXPECT_THAT(bare_done.get(), Not(HasSubstr("payload")));
  EXPECT_THAT(full_done.get(), HasSubstr("payload"));
  watch_bare->Unsubscribe();
  watch_full->Unsubscribe();
  ASSERT_TRUE(Await(f.runtime->Close(), kWait).ok());
}

}  // namespace
}  // namespace spool
