// The transactional outbox under SIGKILL: a real process commits batches
// of one application key and one task (tests/outbox_child.cc) and is
// killed mid-stream; every acknowledged batch survives whole, and no batch
// survives in part.

#include <map>
#include <set>
#include <string>

#include <spool/app_batch.h>
#include <spool/runtime.h>

#include <gtest/gtest.h>

#include "tests/child_process.h"
#include "tests/runtime_testing.h"

namespace spool {
namespace {

using namespace std::chrono_literals;
using testing::Await;
using testing::ChildProcess;
using testing::TempDir;

TEST(OutboxCrashTest, BatchesSurviveSigkillWholeOrNotAtAll) {
  TempDir dir;
  // Key -> task id, of the acknowledged batches.
  std::map<std::string, TaskId> acked;
  for (int round = 0; round < 3; ++round) {
    ChildProcess child(
        {SPOOL_OUTBOX_CHILD, dir.Sub("q"), std::to_string(round)});
    // Kill at a different depth each round, while batches are in flight.
    size_t target = acked.size() + 40 + 400 * round;
    while (acked.size() < target) {
      auto line = child.ReadLine(60s);
      ASSERT_TRUE(line.has_value()) << "child stopped acknowledging";
      ASSERT_EQ(line->rfind("ack ", 0), 0u) << *line;
      size_t space = line->find(' ', 4);
      ASSERT_NE(space, std::string::npos) << *line;
      std::string key =
          "order/" + std::to_string(round) + "/" + line->substr(4, space - 4);
      acked[key] = std::stoull(line->substr(space + 1));
    }
    child.Kill();
  }

  Options options;
  options.path = dir.Sub("q");
  std::unique_ptr<Runtime> runtime = testing::OpenOrDie(options);
  ASSERT_NE(runtime, nullptr);
  // Every acknowledged task is there (its key is checked below).
  for (const auto& [key, id] : acked) {
    Result<TaskInfo> task = Await(runtime->GetTask(id));
    ASSERT_TRUE(task.ok()) << "acknowledged task " << id
                           << " is missing: " << task.status().ToString();
    EXPECT_EQ(task->payload, key);
  }
  // Every batch stored its key and its task, or neither: the keys stored
  // are exactly the tasks' payloads, acknowledged or not.
  std::set<std::string> keys;
  AppScan scan;
  scan.prefix = "order/";
  scan.limit = AppScan::kMaxLimit;
  for (;;) {
    Result<AppPage> page = Await(runtime->ScanAppValues(scan));
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    for (const AppEntry& e : page->entries) {
      EXPECT_EQ(e.value, "paid");
      keys.insert(e.key);
    }
    if (!page->more) break;
    scan.start_after = page->entries.back().key;
  }
  std::set<std::string> payloads;
  TaskQuery query;
  query.limit = kMaxPageSize;
  for (;;) {
    Result<TaskPage> page = Await(runtime->ListTasks(query));
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    for (const TaskInfo& t : page->tasks) payloads.insert(t.payload);
    if (page->next_cursor.empty()) break;
    query.cursor = page->next_cursor;
  }
  EXPECT_EQ(keys, payloads);
  EXPECT_GE(keys.size(), acked.size());
  for (const auto& [key, id] : acked) EXPECT_EQ(keys.count(key), 1u) << key;
  EXPECT_TRUE(Await(runtime->Close()).ok());
}

}  // namespace
}  // namespace spool
