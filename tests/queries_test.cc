// Queries through the runtime: listings, counts, failure history, oldest and
// next due, JSON end to end, pagination while tasks run, the indexes after a
// random mix, and a concurrency stress of queries against enqueues.

#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include <spool/runtime.h>

#include <gtest/gtest.h>

#include "storage/json_writer.h"
#include "storage/task_store.h"
#include "tests/runtime_testing.h"

namespace spool {
namespace {
using spool::testing::Await;
using spool::testing::Ok;
using spool::testing::OpenOrDie;

using namespace std::chrono_literals;
using spool::testing::TempDir;

constexpr auto kWait = 60s;

Options TestOptions(const TempDir& dir, Durability durability) {
  Options options;
  options.path = dir.Sub("q");
  options.durability = durability;
  options.workers = 4;
  options.readers = 2;
  return options;
}

std::string DecodeBase64(std::string_view text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (char c : text) {
    int v = value(c);
    if (v < 0) continue;
    bits = (bits << 6) | static_cast<uint32_t>(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xff));
    }
  }
  return out;
}

// The value of string member `name` in `json` (first occurrence), raw, as
// written between the quotes.
std::string RawMember(const std::string& json, const std::string& name) {
  std::string key = "\"" + name + "\":\"";
  size_t at = json.find(key);
  if (at == std::string::npos) return "<missing " + name + ">";
  at += key.size();
  size_t end = at;
  while (end < json.size() && json[end] != '"') {
    end += json[end] == '\\' ? 2 : 1;
  }
  return json.substr(at, end - at);
}

// Every page of `query`, concatenated.
std::vector<TaskInfo> ListAll(Runtime* runtime, TaskQuery query,
                              size_t* pages = nullptr) {
  std::vector<TaskInfo> all;
  size_t count = 0;
  do {
    auto page = Await(runtime->ListTasks(query));
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    if (!page.ok()) break;
    all.insert(all.end(), page->tasks.begin(), page->tasks.end());
    query.cursor = page->next_cursor;
    ++count;
  } while (!query.cursor.empty());
  if (pages != nullptr) *pages = count;
  return all;
}

class QueriesRuntimeTest : public ::testing::TestWithParam<Durability> {
 protected:
  TempDir dir_;
};

TEST_P(QueriesRuntimeTest, ListsCountsHistoryOldestAndNextDue) {
  auto runtime = OpenOrDie(TestOptions(dir_, GetParam()));
  HandlerOptions failing;
  failing.retry = RetryPolicy::Fixed(2, Duration(0));
  ASSERT_TRUE(runtime
                  ->RegisterHandler(
                      "a",
                      [](TaskContext& task) {
                        return Status::IOError("broke on attempt " +
                                               std::to_string(task.attempt()));
                      },
                      failing)
                  .ok());
  ASSERT_TRUE(runtime->RegisterHandler("b", Ok).ok());

  // Before Start: everything stays pending.
  std::vector<TaskId> a_ids;
  std::vector<TaskId> b_ids;
  for (int i = 0; i < 10; ++i) {
    a_ids.push_back(runtime->Enqueue("a", "x").id);
    if (i < 5) b_ids.push_back(runtime->Enqueue("b", "y").id);
  }
  EnqueueOptions later;
  later.delay = std::chrono::hours(2);
  TaskId late2 = runtime->Enqueue("a", "late", later).id;
  later.delay = std::chrono::hours(1);
  TaskId late1 = runtime->Enqueue("a", "late", later).id;
  Ticket last_b = runtime->Enqueue("b", "y");
  ASSERT_TRUE(Await(last_b.stored).ok());
  b_ids.push_back(last_b.id);

  auto oldest = Await(runtime->OldestTask(TaskStatus::kPending));
  ASSERT_TRUE(oldest.ok());
  ASSERT_TRUE(oldest->has_value());
  EXPECT_EQ((*oldest)->id, a_ids[0]);
  auto none = Await(runtime->OldestTask(TaskStatus::kFailed));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto due = Await(runtime->NextDueTask());
  ASSERT_TRUE(due.ok());
  ASSERT_TRUE(due->has_value());
  EXPECT_EQ((*due)->id, late1);
  ASSERT_TRUE((*due)->next_attempt_at.has_value());

  TaskQuery query;
  query.type = "a";
  query.limit = 5;
  size_t pages = 0;
  auto listed = ListAll(runtime.get(), query, &pages);
  ASSERT_EQ(listed.size(), 12u);
  EXPECT_EQ(pages, 3u);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(listed[i].id, a_ids[i]);
  EXPECT_EQ(listed[10].id, late2);
  EXPECT_EQ(listed[11].id, late1);
  query.type = "b";
  EXPECT_EQ(ListAll(runtime.get(), query).size(), 6u);

  auto by_type = Await(runtime->CountByType());
  ASSERT_TRUE(by_type.ok());
  EXPECT_EQ(by_type->size(), 2u);
  EXPECT_EQ(by_type->at("a").of(TaskStatus::kPending), 12u);
  EXPECT_EQ(by_type->at("b").of(TaskStatus::kPending), 6u);

  ASSERT_TRUE(runtime->Start().ok());
  ASSERT_TRUE(Await(runtime->Drain()).ok());

  query = TaskQuery{};
  query.status = TaskStatus::kFailed;
  auto failed = ListAll(runtime.get(), query);
  ASSERT_EQ(failed.size(), 10u);
  query.status = TaskStatus::kSucceeded;
  EXPECT_EQ(ListAll(runtime.get(), query).size(), 6u);
  query.status = TaskStatus::kPending;
  query.type = "a";
  auto still = ListAll(runtime.get(), query);
  ASSERT_EQ(still.size(), 2u);
  EXPECT_EQ(still[0].id, late2);

  auto history = Await(runtime->GetFailureHistory(a_ids[3]));
  ASSERT_TRUE(history.ok()) << history.status().ToString();
  EXPECT_EQ(history->status, TaskStatus::kFailed);
  EXPECT_EQ(history->attempts, 2u);
  ASSERT_EQ(history->failures.size(), 2u);
  EXPECT_EQ(history->failures[0].attempt, 1u);
  EXPECT_EQ(history->failures[0].error, "broke on attempt 1");
  EXPECT_EQ(history->failures[1].error, "broke on attempt 2");
  EXPECT_EQ(history->last_error, "broke on attempt 2");
  auto clean = Await(runtime->GetFailureHistory(b_ids[0]));
  ASSERT_TRUE(clean.ok());
  EXPECT_TRUE(clean->failures.empty());
  EXPECT_TRUE(Await(runtime->GetFailureHistory(999999)).status().IsNotFound());

  by_type = Await(runtime->CountByType());
  ASSERT_TRUE(by_type.ok());
  EXPECT_EQ(by_type->at("a").of(TaskStatus::kFailed), 10u);
  EXPECT_EQ(by_type->at("a").of(TaskStatus::kPending), 2u);
  EXPECT_EQ(by_type->at("b").of(TaskStatus::kSucceeded), 6u);
  EXPECT_EQ(by_type->at("b").total(), 6u);
  ASSERT_TRUE(Await(runtime->Close()).ok());
}

TEST_P(QueriesRuntimeTest, BadQueriesAndClosedRuntime) {
  auto runtime = OpenOrDie(TestOptions(dir_, GetParam()));
  TaskQuery query;
  query.limit = 0;
  EXPECT_TRUE(Await(runtime->ListTasks(query)).status().IsInvalidArgument());
  query.limit = 10;
  query.cursor = "nonsense";
  EXPECT_TRUE(
      Await(runtime->ListTasksJson(query)).status().IsInvalidArgument());
  EXPECT_TRUE(runtime->WatchList(query, [](const Result<TaskPage>&) {})
                  .status()
                  .IsInvalidArgument());
  EXPECT_TRUE(runtime->WatchTask(1, nullptr).status().IsInvalidArgument());
  EXPECT_TRUE(runtime->DeclareJsonPayload("").IsInvalidArgument());
  EXPECT_TRUE(Await(runtime->GetTaskJson(42)).status().IsNotFound());
  auto empty = Await(runtime->ListTasksJson(TaskQuery{}));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, R"({"tasks":[],"next_cursor":null,"unreadable":[]})");
  ASSERT_TRUE(Await(runtime->Close()).ok());
  EXPECT_TRUE(Await(runtime->ListTasks(TaskQuery{})).status().IsClosed());
  EXPECT_TRUE(Await(runtime->CountByType()).status().IsClosed());
  EXPECT_TRUE(Await(runtime->NextDueTask()).status().IsClosed());
  EXPECT_TRUE(runtime->WatchCountByStatus([](const Result<StatusCounts>&) {})
                  .status()
                  .IsClosed());
  EXPECT_TRUE(runtime->DeclareJsonPayload("x").IsClosed());
}

TEST_P(QueriesRuntimeTest, JsonEndToEndEscapesEveryControlCharAndBadUtf8) {
  auto runtime = OpenOrDie(TestOptions(dir_, GetParam()));
  // Every control character, the two characters JSON escapes, and invalid
  // UTF-8: a lone continuation byte, an overlong NUL, a surrogate, a
  // truncated sequence, 0xFF; then U+2028 and valid multibyte text.
  std::string nasty;
  for (int c = 0; c < 0x20; ++c) nasty.push_back(static_cast<char>(c));
  nasty += "\"\\/";
  nasty += "\x80|\xC0\x80|\xED\xA0\x80|\xE2\x82|\xFF|\xE2\x80\xA8|\xC3\xA9";

  std::string expected_error;
  const char* short_forms[] = {"\\b", "\\t", "\\n", nullptr, "\\f", "\\r"};
  for (int c = 0; c < 0x20; ++c) {
    if (c >= 8 && c <= 13 && short_forms[c - 8] != nullptr) {
      expected_error += short_forms[c - 8];
    } else {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
      expected_error += buffer;
    }
  }
  const std::string kFffd = "\xEF\xBF\xBD";
  expected_error += "\\\"\\\\/";
  // One U+FFFD per maximal subpart: 80 | C0 | 80 | ED | A0 | 80 | E2 82 | FF.
  expected_error += kFffd + "|" + kFffd + kFffd + "|" + kFffd + kFffd + kFffd +
                    "|" + kFffd + "|" + kFffd + "|\\u2028|\xC3\xA9";

  HandlerOptions once;
  once.retry = RetryPolicy::None();
  ASSERT_TRUE(runtime
                  ->RegisterHandler(
                      "nasty",
                      [&nasty](TaskContext&) { return Status::IOError(nasty); },
                      once)
                  .ok());
  ASSERT_TRUE(runtime->RegisterHandler("doc", Ok).ok());
  ASSERT_TRUE(runtime->DeclareJsonPayload("doc").ok());
  ASSERT_TRUE(runtime->Start().ok());

  TaskId binary = runtime->Enqueue("nasty", nasty).id;
  TaskId doc = runtime->Enqueue("doc", "  {\"k\": [1, \"\\u0001\"]}\n").id;
  TaskId not_json = runtime->Enqueue("doc", "{\"k\": ").id;
  ASSERT_TRUE(Await(runtime->Drain()).ok());

  auto json = Await(runtime->GetTaskJson(binary));
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  EXPECT_TRUE(storage::IsValidJson(*json)) << *json;
  EXPECT_EQ(DecodeBase64(RawMember(*json, "payload_base64")), nasty);
  EXPECT_EQ(RawMember(*json, "last_error"), expected_error);
  EXPECT_EQ(json->find("\"payload\":"), std::string::npos);
  EXPECT_NE(json->find("\"status\":\"failed\""), std::string::npos);
  EXPECT_NE(json->find("\"failures\":[{\"attempt\":1,\"at\":\""),
            std::string::npos);

  json = Await(runtime->GetTaskJson(doc));
  ASSERT_TRUE(json.ok());
  EXPECT_TRUE(storage::IsValidJson(*json)) << *json;
  EXPECT_NE(json->find("\"payload\":{\"k\": [1, \"\\u0001\"]}}"),
            std::string::npos)
      << *json;
  json = Await(runtime->GetTaskJson(not_json));
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(DecodeBase64(RawMember(*json, "payload_base64")), "{\"k\": ");

  // The list holds the same objects, byte for byte.
  auto list = Await(runtime->ListTasksJson(TaskQuery{}));
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(storage::IsValidJson(*list));
  for (TaskId id : {binary, doc, not_json}) {
    auto one = Await(runtime->GetTaskJson(id));
    ASSERT_TRUE(one.ok());
    EXPECT_NE(list->find(*one), std::string::npos) << "task " << id;
  }
  ASSERT_TRUE(Await(runtime->Close()).ok());
}

TEST_P(QueriesRuntimeTest, PaginationWhileTasksRunAndArrive) {
  // Every task of type "p" matches a type listing in every status, so each
  // one enqueued before the listing began must appear exactly once, while
  // workers change statuses and another thread adds tasks.
  auto runtime = OpenOrDie(TestOptions(dir_, GetParam()));
  std::atomic<int> calls{0};
  HandlerOptions retry;
  retry.retry = RetryPolicy::Fixed(2, Duration(0));
  ASSERT_TRUE(runtime
                  ->RegisterHandler(
                      "p",
                      [&](TaskContext& task) {
                        return calls++ % 5 == 0 && task.attempt() == 1
                                   ? Status::IOError("again")
                                   : Status::OK();
                      },
                      retry)
                  .ok());
  std::vector<TaskSpec> specs(3000, TaskSpec{"p", "payload", {}});
  auto batch = runtime->EnqueueBatch(specs);
  ASSERT_TRUE(Await(batch.stored).ok());
  std::set<TaskId> initial(batch.ids.begin(), batch.ids.end());
  ASSERT_TRUE(runtime->Start().ok());

  std::atomic<bool> done{false};
  std::thread writer([&] {
    while (!done) {
      (void)runtime->Enqueue("p", "more").stored.WaitFor(kWait);
    }
  });
  for (int round = 0; round < 3; ++round) {
    for (bool json : {false, true}) {
      TaskQuery query;
      query.type = "p";
      query.limit = 37;
      std::vector<TaskId> ids;
      do {
        if (json) {
          auto page = Await(runtime->ListTasksJson(query));
          ASSERT_TRUE(page.ok());
          for (size_t at = page->find("{\"id\":"); at != std::string::npos;
               at = page->find("{\"id\":", at + 1)) {
            ids.push_back(std::stoull(page->substr(at + 6, 20)));
          }
          query.cursor = RawMember(*page, "next_cursor");
          if (query.cursor.rfind("<missing", 0) == 0) query.cursor.clear();
        } else {
          auto page = Await(runtime->ListTasks(query));
          ASSERT_TRUE(page.ok());
          for (const TaskInfo& task : page->tasks) ids.push_back(task.id);
          query.cursor = page->next_cursor;
        }
      } while (!query.cursor.empty());
      for (size_t i = 1; i < ids.size(); ++i) {
        ASSERT_LT(ids[i - 1], ids[i]) << "a task repeated or went back";
      }
      std::set<TaskId> seen(ids.begin(), ids.end());
      for (TaskId id : initial) {
        ASSERT_EQ(seen.count(id), 1u) << "task " << id << " was skipped";
      }
    }
    // A status listing: every task listed was in that status on its page.
    TaskQuery pending;
    pending.status = TaskStatus::kPending;
    pending.limit = 50;
    std::vector<TaskInfo> listed = ListAll(runtime.get(), pending);
    for (size_t i = 0; i < listed.size(); ++i) {
      EXPECT_EQ(listed[i].status, TaskStatus::kPending);
      if (i > 0) {
        EXPECT_LT(listed[i - 1].id, listed[i].id);
      }
    }
  }
  done = true;
  writer.join();
  ASSERT_TRUE(Await(runtime->Close()).ok());
}

TEST_P(QueriesRuntimeTest, IndexesMatchAFullScanAfterARandomMix) {
  // Enqueues with random priorities and delays, handlers that fail at
  // random and retry, from several threads, with queries in between; then
  // every index family must equal what the records imply, and listings
  // must equal the records.
  Options options = TestOptions(dir_, GetParam());
  if (GetParam() == Durability::kMemory) GTEST_SKIP() << "reopened below";
  std::map<TaskId, TaskStatus> statuses;
  {
    auto runtime = OpenOrDie(options);
    std::atomic<uint64_t> seed{1};
    HandlerOptions retry;
    retry.retry = RetryPolicy::Fixed(3, Duration(0));
    for (std::string type : {"x", "y", "z"}) {
      ASSERT_TRUE(runtime
                      ->RegisterHandler(
                          type,
                          [&](TaskContext&) {
                            return seed.fetch_add(7919) % 3 == 0
                                       ? Status::IOError("random failure")
                                       : Status::OK();
                          },
                          retry)
                      .ok());
    }
    ASSERT_TRUE(runtime->Start().ok());
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 rng(t);
        for (int i = 0; i < 500; ++i) {
          EnqueueOptions o;
          o.priority = static_cast<int32_t>(rng() % 5) - 2;
          if (rng() % 10 == 0) o.delay = std::chrono::hours(1);
          auto ticket =
              runtime->Enqueue(std::string(1, "xyz"[rng() % 3]), "p", o);
          if (i % 50 == 0) {
            EXPECT_TRUE(ticket.stored.WaitFor(kWait));
            (void)runtime->ListTasks(TaskQuery{}).WaitFor(kWait);
          }
        }
      });
    }
    for (auto& thread : threads) thread.join();
    ASSERT_TRUE(Await(runtime->Drain()).ok());
    for (size_t s = 0; s < kTaskStatusCount; ++s) {
      TaskQuery query;
      query.status = static_cast<TaskStatus>(s);
      query.limit = 1000;
      for (const TaskInfo& task : ListAll(runtime.get(), query)) {
        EXPECT_EQ(statuses.count(task.id), 0u) << "listed twice";
        statuses[task.id] = task.status;
      }
    }
    auto counts = Await(runtime->CountByStatus());
    ASSERT_TRUE(counts.ok());
    EXPECT_EQ(counts->total(), statuses.size());
    EXPECT_EQ(counts->total(), 1500u);
    ASSERT_TRUE(Await(runtime->Close()).ok());
  }
  storage::StoreOptions store_options;
  store_options.path = options.path;
  store_options.durability = options.durability;
  std::unique_ptr<storage::TaskStore> store;
  ASSERT_TRUE(storage::TaskStore::Open(store_options, &store).ok());
  size_t mismatches = 1;
  std::vector<std::string> problems;
  ASSERT_TRUE(store->CheckIndexes(&mismatches, &problems).ok());
  EXPECT_EQ(mismatches, 0u) << (problems.empty() ? "" : problems[0]);
  size_t records = 0;
  ASSERT_TRUE(
      store
          ->ScanTasks(
              storage::ColumnFamily::kTasks, 0,
              [&](TaskId id, storage::TaskBytes& task, const Status& opened) {
                storage::StateRecord r;
                EXPECT_TRUE(opened.ok());
                EXPECT_TRUE(task.Verify(id).ok());
                EXPECT_TRUE(storage::DecodeState(id, task.state(), &r).ok());
                EXPECT_EQ(statuses[id], r.status) << "task " << id;
                ++records;
                return true;
              })
          .ok());
  EXPECT_EQ(records, statuses.size());
}

TEST_P(QueriesRuntimeTest, StressEightQueryThreadsFourEnqueueThreads) {
  // 8 threads of mixed queries (and short-lived watches) and 4 of enqueues
  // while tasks run and fail. Every future must resolve, within a bound,
  // with a sensible answer.
  Options options = TestOptions(dir_, GetParam());
  auto runtime = OpenOrDie(options);
  HandlerOptions retry;
  retry.retry = RetryPolicy::Fixed(2, Duration(0));
  std::atomic<uint64_t> n{0};
  ASSERT_TRUE(runtime
                  ->RegisterHandler(
                      "s",
                      [&](TaskContext&) {
                        return n++ % 4 == 0 ? Status::IOError("flaky")
                                            : Status::OK();
                      },
                      retry)
                  .ok());
  ASSERT_TRUE(runtime->RegisterHandler("t", Ok).ok());
  ASSERT_TRUE(runtime->Start().ok());
  std::atomic<TaskId> max_id{0};
  std::atomic<uint64_t> queries{0};
  std::atomic<uint64_t> enqueued{0};
  std::atomic<int> failures{0};
  auto check = [&](bool ok, const std::string& what) {
    if (!ok) {
      failures++;
      ADD_FAILURE() << what;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 750; ++i) {
        auto ticket = runtime->Enqueue(i % 3 ? "s" : "t", "payload");
        if (i % 25 == 0 || i == 749) {
          check(ticket.stored.WaitFor(kWait), "enqueue timed out");
          check(ticket.stored.Wait().ok(), "enqueue failed");
        }
        TaskId id = ticket.id;
        TaskId seen = max_id.load();
        while (id > seen && !max_id.compare_exchange_weak(seen, id)) {
        }
        enqueued++;
      }
      (void)t;
    });
  }
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      for (int i = 0; i < 400; ++i) {
        TaskId id = 1 + rng() % (max_id.load() + 1);
        int op = static_cast<int>(rng() % 10);
        bool answered = true;
        bool sane = true;
        std::string what = "op " + std::to_string(op);
        switch (op) {
          case 0: {
            auto f = runtime->GetTask(id);
            answered = f.WaitFor(kWait);
            sane =
                answered && (f.Wait().ok() || f.Wait().status().IsNotFound());
            break;
          }
          case 1: {
            auto f = runtime->GetTaskJson(id);
            answered = f.WaitFor(kWait);
            sane = answered &&
                   (f.Wait().status().IsNotFound() ||
                    (f.Wait().ok() && storage::IsValidJson(*f.Wait())));
            break;
          }
          case 2: {
            TaskQuery q;
            if (rng() % 2) q.status = static_cast<TaskStatus>(rng() % 5);
            if (rng() % 2) q.type = rng() % 2 ? "s" : "t";
            q.limit = 1 + rng() % 200;
            auto f = runtime->ListTasks(q);
            answered = f.WaitFor(kWait);
            sane =
                answered && f.Wait().ok() && f.Wait()->tasks.size() <= q.limit;
            break;
          }
          case 3: {
            TaskQuery q;
            q.limit = 500;
            auto f = runtime->ListTasksJson(q);
            answered = f.WaitFor(kWait);
            sane = answered && f.Wait().ok() && storage::IsValidJson(*f.Wait());
            break;
          }
          case 4: {
            auto f = runtime->CountByStatus();
            answered = f.WaitFor(kWait);
            sane = answered && f.Wait().ok() &&
                   f.Wait()->total() <= enqueued.load() + 1000;
            break;
          }
          case 5: {
            auto f = runtime->CountByType();
            answered = f.WaitFor(kWait);
            sane = answered && f.Wait().ok();
            break;
          }
          case 6: {
            auto f = runtime->GetFailureHistory(id);
            answered = f.WaitFor(kWait);
            sane =
                answered && (f.Wait().ok() || f.Wait().status().IsNotFound());
            break;
          }
          case 7: {
            auto f = runtime->OldestTask(TaskStatus::kPending);
            auto g = runtime->NextDueTask();
            answered = f.WaitFor(kWait) && g.WaitFor(kWait);
            sane = answered && f.Wait().ok() && g.Wait().ok();
            break;
          }
          default: {
            // A watch: its first result arrives, then it ends.
            Promise<void> first;
            auto watch = runtime->WatchTask(
                id, [first](const Result<TaskInfo>&) { first.Set(Status()); });
            sane = watch.ok();
            if (watch.ok()) {
              answered = first.GetFuture().WaitFor(kWait);
              watch->Unsubscribe();
            }
            break;
          }
        }
        check(answered, what + " never answered");
        check(!answered || sane, what + " gave a wrong answer");
        queries++;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(queries.load(), 3200u);
  EXPECT_EQ(enqueued.load(), 3000u);
  EXPECT_EQ(failures.load(), 0);
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  auto counts = Await(runtime->CountByStatus());
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->total(), 3000u);
  auto stats = Await(runtime->GetWatchStats());
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->subscriptions, 0u);
  ASSERT_TRUE(Await(runtime->Close()).ok());
}

INSTANTIATE_TEST_SUITE_P(AllModes, QueriesRuntimeTest,
                         ::testing::Values(Durability::kRelaxed,
                                           Durability::kMemory),
                         [](const auto& param_info) {
                           return std::string(DurabilityName(param_info.param));
                         });

}  // namespace
}  // namespace spool
