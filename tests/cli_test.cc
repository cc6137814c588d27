// Read-only inspection (Runtime::OpenReadOnly) and the `spool` tool, against
// real queue directories: one held and run by another process
// (live_queue_child), one no process holds, a damaged one, a foreign one,
// one of a newer schema version, and one that does not exist. The tool is
// run as the built binary, in a subprocess.

#include <algorithm>
#include <chrono>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <spool/encryption.h>
#include <spool/runtime.h>

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include "storage/keys.h"
#include "storage/task_store.h"
#include "tests/child_process.h"
#include "tests/testing.h"

namespace spool {
namespace {

using namespace std::chrono_literals;
using testing::ChildProcess;
using testing::TempDir;
using testing::WaitUntil;

// What a run of the tool left.
struct Outcome {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs the built `spool` with `args`, its stdout and stderr to files.
Outcome Spool(const std::vector<std::string>& args) {
  TempDir io;
  std::string out_path = io.Sub("out");
  std::string err_path = io.Sub("err");
  std::vector<std::string> argv = {SPOOL_CLI};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_t pid = fork();
  if (pid == 0) {
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    std::vector<char*> raw;
    for (std::string& arg : argv) raw.push_back(arg.data());
    raw.push_back(nullptr);
    execv(raw[0], raw.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  Outcome run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = Slurp(out_path);
  run.err = Slurp(err_path);
  return run;
}

// One line on stderr that contains every one of `parts`.
void ExpectOneLine(const Outcome& run, const std::vector<std::string>& parts) {
  ASSERT_FALSE(run.err.empty());
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  for (const std::string& part : parts) {
    EXPECT_NE(run.err.find(part), std::string::npos)
        << "'" << part << "' not in: " << run.err;
  }
}

// Every file under `dir` with its size and modification time: what a
// read-only open must leave as it was.
std::map<std::string, std::string> Listing(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    std::string what =
        entry.is_regular_file()
            ? std::to_string(entry.file_size()) + " " +
                  std::to_string(
                      entry.last_write_time().time_since_epoch().count())
            : "dir";
    files[entry.path().string()] = what;
  }
  return files;
}

// A queue no process holds, with `tasks` tasks (none run): every tenth of
// type "other", the rest "work".
void MakeQueue(const std::string& dir, int tasks) {
  Options options;
  options.path = dir;
  options.durability = Durability::kRelaxed;
  std::unique_ptr<Runtime> runtime;
  ASSERT_TRUE(Runtime::Open(options, &runtime).ok());
  ASSERT_TRUE(
      runtime
          ->RegisterHandler("work", [](TaskContext&) { return Status::OK(); })
          .ok());
  ASSERT_TRUE(
      runtime
          ->RegisterHandler("other", [](TaskContext&) { return Status::OK(); })
          .ok());
  std::vector<TaskSpec> batch;
  for (int i = 0; i < tasks; ++i) {
    batch.push_back(TaskSpec{
        i % 10 == 9 ? "other" : "work", "payload " + std::to_string(i), {}});
  }
  ASSERT_TRUE(runtime->EnqueueBatch(std::move(batch)).stored.Wait().ok());
  ASSERT_TRUE(runtime->Close().Wait().ok());
}

// A queue held by live_queue_child, with `tasks` stored before it returns.
class LiveQueue {
 public:
  LiveQueue(const std::string& dir, int tasks,
            const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {LIVE_QUEUE_CHILD, dir, "--tasks",
                                     std::to_string(tasks)};
    argv.insert(argv.end(), extra.begin(), extra.end());
    child_ = std::make_unique<ChildProcess>(argv);
    auto line = child_->ReadLine(60s);
    ready_ = line && *line == "ready " + std::to_string(tasks);
  }
  bool ready() const { return ready_; }

 private:
  std::unique_ptr<ChildProcess> child_;
  bool ready_ = false;
};

// DIR opened read-only, with the key file if one is given.
std::unique_ptr<Runtime> ReadOnlyAt(const std::string& path,
                                    const std::string& key_file = "") {
  std::unique_ptr<Runtime> runtime;
  Options options;
  options.path = path;
  options.encryption_key_file = key_file;
  Status s = Runtime::OpenReadOnly(options, &runtime);
  EXPECT_TRUE(s.ok()) << path << ": " << s.ToString();
  return runtime;
}

uint64_t Total(Runtime& runtime) {
  const auto& counts = runtime.CountByStatus().Wait();
  EXPECT_TRUE(counts.ok()) << counts.status().ToString();
  uint64_t total = 0;
  if (counts.ok()) {
    for (uint64_t n : counts->by_status) total += n;
  }
  return total;
}

// ---- Runtime::OpenReadOnly ----

TEST(ReadOnlyOpen, SeesALiveQueueGrowAndRefusesMutations) {
  TempDir dir;
  std::string path = dir.Sub("queue");
  LiveQueue live(path, 200);
  ASSERT_TRUE(live.ready());

  std::unique_ptr<Runtime> runtime = ReadOnlyAt(path);
  ASSERT_TRUE(runtime);
  uint64_t first = Total(*runtime);
  EXPECT_GE(first, 200u);
  // The holder keeps enqueuing and running; each query catches up.
  EXPECT_TRUE(WaitUntil([&] { return Total(*runtime) >= first + 20; }, 20s));
  EXPECT_TRUE(WaitUntil(
      [&] {
        const auto& counts = runtime->CountByStatus().Wait();
        return counts.ok() && counts->of(TaskStatus::kSucceeded) > 0;
      },
      20s));
  const auto& task = runtime->GetTask(1).Wait();
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  EXPECT_EQ(task->payload, "payload 0");
  const auto& page = runtime->ListTasks(TaskQuery{}).Wait();
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->tasks.size(), 100u);

  auto refused = [](const Status& status) {
    EXPECT_TRUE(status.IsFailedPrecondition()) << status.ToString();
    EXPECT_NE(status.message().find("read-only"), std::string::npos)
        << status.ToString();
  };
  refused(runtime->Enqueue("work", "x").stored.Wait().status());
  refused(runtime->EnqueueBatch({TaskSpec{"work", "x", {}}})
              .stored.Wait()
              .status());
  refused(runtime->Cancel(1).Wait().status());
  refused(runtime->Retry(1).Wait().status());
  refused(runtime->Delete(1).Wait().status());
  refused(runtime->Hold(1).Wait().status());
  refused(runtime->Purge().Wait().status());
  refused(runtime->Pause());
  refused(runtime->Start());
  refused(
      runtime->RegisterHandler("x", [](TaskContext&) { return Status::OK(); }));
  refused(runtime->Drain().Wait().status());
  refused(
      runtime->WatchCountByStatus([](const Result<StatusCounts>&) {}).status());
  EXPECT_TRUE(runtime->Close().Wait().ok());
}

// Waits at most 30 s for `future`; a timeout fails the test and yields an
// Aborted result, so that no test hangs on a query.
template <class T>
Result<T> Bounded(const Future<T>& future) {
  if (!future.WaitFor(30s)) {
    ADD_FAILURE() << "a query did not finish within 30 s";
    return Status::Aborted("timed out");
  }
  return future.Wait();
}

// A live queue of 200 tasks at `path`, and a read-only runtime of `scope`
// on it; null when either fails (the failure is reported).
std::unique_ptr<Runtime> ScopedOnALiveQueue(const std::string& path,
                                            ReadOnlyScope scope,
                                            std::unique_ptr<LiveQueue>* live) {
  *live = std::make_unique<LiveQueue>(path, 200);
  EXPECT_TRUE((*live)->ready());
  if (!(*live)->ready()) return nullptr;
  Options options;
  options.path = path;
  options.read_only_scope = scope;
  std::unique_ptr<Runtime> runtime;
  Status s = Runtime::OpenReadOnly(options, &runtime);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return runtime;
}

// A query refused at once for the scope: FailedPrecondition naming the
// call and what the scope lacks (`why`).
void ExpectRefused(const Status& status, const std::string& call,
                   const std::string& why) {
  EXPECT_TRUE(status.IsFailedPrecondition()) << status.ToString();
  EXPECT_NE(status.message().find(call), std::string::npos)
      << status.ToString();
  EXPECT_NE(status.message().find(why), std::string::npos) << status.ToString();
}

TEST(ReadOnlyOpen, CountsScopeReadsALiveQueuesCountsAndRefusesTheRest) {
  TempDir dir;
  std::unique_ptr<LiveQueue> live;
  std::unique_ptr<Runtime> runtime =
      ScopedOnALiveQueue(dir.Sub("queue"), ReadOnlyScope::kCounts, &live);
  ASSERT_TRUE(runtime);
  auto total = [&] {
    Result<StatusCounts> counts = Bounded(runtime->CountByStatus());
    EXPECT_TRUE(counts.ok()) << counts.status().ToString();
    uint64_t sum = 0;
    if (counts.ok()) {
      for (uint64_t n : counts->by_status) sum += n;
    }
    return sum;
  };
  uint64_t first = total();
  EXPECT_GE(first, 200u);
  // Each query catches up with the holder, as with the full scope.
  EXPECT_TRUE(WaitUntil([&] { return total() >= first + 20; }, 20s));
  Result<TypeCounts> by_type = Bounded(runtime->CountByType());
  ASSERT_TRUE(by_type.ok()) << by_type.status().ToString();
  ASSERT_EQ(by_type->count("work"), 1u);
  EXPECT_GE(
      by_type->at("work").by_status[static_cast<size_t>(TaskStatus::kPending)] +
          by_type->at("work")
              .by_status[static_cast<size_t>(TaskStatus::kSucceeded)],
      180u);

  // Every query of tasks or indexes is refused at once, naming itself and
  // the scope; mutations as on any read-only runtime.
  auto refused = [](const Status& status, const std::string& call) {
    ExpectRefused(status, call, "kCounts, which loads the task counts alone");
  };
  refused(Bounded(runtime->GetTask(1)).status(), "GetTask");
  refused(Bounded(runtime->GetTaskJson(1)).status(), "GetTaskJson");
  refused(Bounded(runtime->ListTasks(TaskQuery{})).status(), "ListTasks");
  refused(Bounded(runtime->ListTasksJson(TaskQuery{})).status(),
          "ListTasksJson");
  refused(Bounded(runtime->GetFailureHistory(1)).status(), "GetFailureHistory");
  refused(Bounded(runtime->OldestTask(TaskStatus::kPending)).status(),
          "OldestTask");
  refused(Bounded(runtime->NextDueTask()).status(), "NextDueTask");
  refused(Bounded(runtime->CheckConsistency()).status(), "CheckConsistency");
  refused(Bounded(runtime->ListSetAside(10)).status(), "ListSetAside");
  Status enqueue = Bounded(runtime->Enqueue("work", "x").stored).status();
  EXPECT_TRUE(enqueue.IsFailedPrecondition()) << enqueue.ToString();
  EXPECT_TRUE(Bounded(runtime->Close()).ok());

  // The scope is for read-only opens only.
  TempDir other;
  Options writable;
  writable.path = other.Sub("queue");
  writable.read_only_scope = ReadOnlyScope::kCounts;
  Status s = Runtime::Open(writable, &runtime);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("read_only_scope"), std::string::npos)
      << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(writable.path));
}

TEST(ReadOnlyOpen, TasksScopeReadsTasksOfALiveQueueAndRefusesTheIndex) {
  TempDir dir;
  std::unique_ptr<LiveQueue> live;
  std::unique_ptr<Runtime> runtime =
      ScopedOnALiveQueue(dir.Sub("queue"), ReadOnlyScope::kTasks, &live);
  ASSERT_TRUE(runtime);
  Result<TaskInfo> task = Bounded(runtime->GetTask(1));
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  EXPECT_EQ(task->payload, "payload 0");
  EXPECT_TRUE(Bounded(runtime->GetTaskJson(1)).ok());
  EXPECT_TRUE(Bounded(runtime->GetFailureHistory(1)).ok());
  EXPECT_TRUE(Bounded(runtime->ListSetAside(10)).ok());
  Result<TaskPage> page = Bounded(runtime->ListTasks(TaskQuery{}));
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(page->tasks.size(), 100u);
  EXPECT_EQ(page->tasks.front().id, 1u);
  // Later pages see the tasks the holder stored after the open.
  TaskQuery all;
  all.limit = 10000;
  Result<std::string> json = Bounded(runtime->ListTasksJson(all));
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  EXPECT_GE(nlohmann::json::parse(*json)["tasks"].size(), 200u);
  Result<StatusCounts> counts = Bounded(runtime->CountByStatus());
  EXPECT_TRUE(counts.ok()) << counts.status().ToString();

  auto refused = [](const Status& status, const std::string& call) {
    ExpectRefused(status, call, "kTasks, which loads no index");
  };
  TaskQuery by_status;
  by_status.status = TaskStatus::kSucceeded;
  refused(Bounded(runtime->ListTasks(by_status)).status(), "ListTasks");
  TaskQuery by_type;
  by_type.type = "work";
  refused(Bounded(runtime->ListTasksJson(by_type)).status(), "ListTasksJson");
  refused(Bounded(runtime->OldestTask(TaskStatus::kPending)).status(),
          "OldestTask");
  refused(Bounded(runtime->NextDueTask()).status(), "NextDueTask");
  refused(Bounded(runtime->CheckConsistency()).status(), "CheckConsistency");
  EXPECT_TRUE(Bounded(runtime->Close()).ok());
}

TEST(ReadOnlyOpen, MissingDirectoryIsNotFoundAndNotCreated) {
  TempDir dir;
  Options options;
  options.path = dir.Sub("nothing-here");
  std::unique_ptr<Runtime> runtime;
  Status s = Runtime::OpenReadOnly(options, &runtime);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find(options.path), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(options.path));
}

TEST(ReadOnlyOpen, WritesNothingIntoADirectoryNoProcessHolds) {
  TempDir dir;
  std::string path = dir.Sub("queue");
  MakeQueue(path, 50);
  auto before = Listing(path);
  {
    std::unique_ptr<Runtime> runtime = ReadOnlyAt(path);
    ASSERT_TRUE(runtime);
    EXPECT_EQ(Total(*runtime), 50u);
    ASSERT_TRUE(runtime->Close().Wait().ok());
  }
  EXPECT_EQ(Listing(path), before);
}

TEST(ReadOnlyOpen, ReadsAnEncryptedLiveQueueWithItsKey) {
  TempDir dir;
  std::string path = dir.Sub("queue");
  std::string key = GenerateEncryptionKey();
  std::string key_file = dir.Sub("keys");
  std::ofstream(key_file) << EncryptionKeyToHex(key) << "\n";
  std::filesystem::permissions(
      key_file,
      std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  LiveQueue live(path, 20, {"--key-file", key_file});
  ASSERT_TRUE(live.ready());

  std::unique_ptr<Runtime> runtime = ReadOnlyAt(path, key_file);
  ASSERT_TRUE(runtime);
  const auto& task = runtime->GetTask(3).Wait();
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  EXPECT_EQ(task->payload, "payload 2");
  TaskQuery by_group;
  by_group.group = "g0";
  const auto& page = runtime->ListTasks(by_group).Wait();
  ASSERT_TRUE(page.ok());
  EXPECT_FALSE(page->tasks.empty());
  runtime.reset();

  Options no_key;
  no_key.path = path;
  Status s = Runtime::OpenReadOnly(no_key, &runtime);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("encrypted"), std::string::npos) << s.ToString();
  Options wrong_key = no_key;
  wrong_key.encryption_key = GenerateEncryptionKey();
  s = Runtime::OpenReadOnly(wrong_key, &runtime);
  EXPECT_FALSE(s.ok());
}

// ---- The spool tool ----

TEST(SpoolCli, StatsListShowHistoryOnALiveQueue) {
  TempDir dir;
  std::string path = dir.Sub("queue");
  LiveQueue live(path, 300);
  ASSERT_TRUE(live.ready());

  Outcome stats = Spool({"stats", path, "--json"});
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  auto json = nlohmann::json::parse(stats.out);
  EXPECT_EQ(json["schema_version"], 3);
  EXPECT_GE(json["total"].get<uint64_t>(), 300u);
  EXPECT_GE(json["by_type"]["flaky"]["pending"].get<uint64_t>() +
                json["by_type"]["flaky"]["running"].get<uint64_t>() +
                json["by_type"]["flaky"]["failed"].get<uint64_t>(),
            30u);
  EXPECT_GT(json["size_bytes"].get<uint64_t>(), 0u);
  // Later, more: the holder keeps enqueuing.
  EXPECT_TRUE(WaitUntil(
      [&] {
        Outcome again = Spool({"stats", path, "--json"});
        return again.exit_code == 0 &&
               nlohmann::json::parse(again.out)["total"].get<uint64_t>() >
                   json["total"].get<uint64_t>();
      },
      20s));

  Outcome text = Spool({"stats", path});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("schema version  3"), std::string::npos) << text.out;

  Outcome list =
      Spool({"list", path, "--type", "flaky", "--limit", "5", "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  auto page = nlohmann::json::parse(list.out);
  ASSERT_EQ(page["tasks"].size(), 5u);
  EXPECT_EQ(page["tasks"][0]["type"], "flaky");
  ASSERT_TRUE(page["next_cursor"].is_string());
  Outcome next =
      Spool({"list", path, "--type", "flaky", "--limit", "5", "--cursor",
             page["next_cursor"].get<std::string>(), "--json"});
  ASSERT_EQ(next.exit_code, 0) << next.err;
  EXPECT_GT(nlohmann::json::parse(next.out)["tasks"][0]["id"].get<uint64_t>(),
            page["tasks"][4]["id"].get<uint64_t>());
  Outcome newest = Spool({"list", path, "--type", "flaky", "--limit", "5",
                          "--newest", "--no-payload", "--json"});
  ASSERT_EQ(newest.exit_code, 0) << newest.err;
  auto newest_page = nlohmann::json::parse(newest.out);
  ASSERT_EQ(newest_page["tasks"].size(), 5u);
  EXPECT_GT(newest_page["tasks"][0]["id"].get<uint64_t>(),
            newest_page["tasks"][4]["id"].get<uint64_t>());
  EXPECT_FALSE(newest_page["tasks"][0].contains("payload_base64"));
  Outcome plain = Spool({"list", path, "--group", "g0", "--limit", "3"});
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.out.find("next page: --cursor"), std::string::npos);

  Outcome show = Spool({"show", path, "1", "--json"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_EQ(nlohmann::json::parse(show.out)["id"], 1);
  Outcome show_text = Spool({"show", path, "1"});
  EXPECT_EQ(show_text.exit_code, 0);
  EXPECT_NE(show_text.out.find("type         work"), std::string::npos);

  // Task 10 is flaky: once it ran, its history has its one failure.
  EXPECT_TRUE(WaitUntil(
      [&] {
        Outcome history = Spool({"history", path, "10", "--json"});
        if (history.exit_code != 0) return false;
        auto h = nlohmann::json::parse(history.out);
        return h["status"] == "failed" && h["failures"].size() == 1 &&
               h["failures"][0]["error"].get<std::string>().find(
                   "flaky fails") != std::string::npos;
      },
      20s));

  Outcome verify = Spool({"verify", path, "--json"});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  EXPECT_TRUE(nlohmann::json::parse(verify.out)["ok"].get<bool>());

  // Mutations need the directory, which the child holds.
  for (const char* command : {"retry", "cancel"}) {
    Outcome busy = Spool({command, path, "10"});
    EXPECT_EQ(busy.exit_code, 1) << command;
    ExpectOneLine(busy, {"Busy", path, "in use by another spool runtime"});
  }
  Outcome busy_purge = Spool({"purge", path});
  EXPECT_EQ(busy_purge.exit_code, 1);
  ExpectOneLine(busy_purge, {"Busy", path});
}

// Issue 15: a task's result and snooze count, in `show` and `show --json`
// (a read-only open declares no JSON payloads: the result is in base64).
TEST(SpoolCli, ShowPrintsTheResultAndTheSnoozes) {
  TempDir dir;
  std::string path = dir.Sub("queue");
  TaskId summed = 0;
  TaskId snoozed = 0;
  {
    Options options;
    options.path = path;
    std::unique_ptr<Runtime> runtime;
    ASSERT_TRUE(Runtime::Open(options, &runtime).ok());
    ASSERT_TRUE(runtime
                    ->RegisterHandler("sum",
                                      [](TaskContext& task) {
                                        return task.SetResult("{\"sum\":7}");
                                      })
                    .ok());
    ASSERT_TRUE(runtime
                    ->RegisterHandler("later",
                                      [](TaskContext& task) {
                                        return task.Snooze(
                                            std::chrono::hours(1));
                                      })
                    .ok());
    summed = runtime->Enqueue("sum", "").id;
    snoozed = runtime->Enqueue("later", "").id;
    ASSERT_TRUE(runtime->Start().ok());
    ASSERT_TRUE(WaitUntil([&] {
      auto a = runtime->GetTask(summed).Wait();
      auto b = runtime->GetTask(snoozed).Wait();
      return a.ok() && a->status == TaskStatus::kSucceeded && b.ok() &&
             b->snoozes == 1;
    }));
    ASSERT_TRUE(runtime->Close().Wait().ok());
  }
  Outcome text = Spool({"show", path, std::to_string(summed)});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("result       9 bytes \"{\\\"sum\\\":7}\"\n"),
            std::string::npos)
      << text.out;
  Outcome json = Spool({"show", path, std::to_string(summed), "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto task = nlohmann::json::parse(json.out);
  EXPECT_EQ(task["result_base64"], "eyJzdW0iOjd9");
  EXPECT_EQ(task["snoozes"], 0);

  text = Spool({"show", path, std::to_string(snoozed)});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("snoozes      1\n"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("result"), std::string::npos) << text.out;
  json = Spool({"show", path, std::to_string(snoozed), "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  task = nlohmann::json::parse(json.out);
  EXPECT_EQ(task["snoozes"], 1);
  EXPECT_EQ(task["status"], "pending");
  EXPECT_TRUE(task["result"].is_null());
}

TEST(SpoolCli, ExportWritesOneLinePerTaskAndNothingIntoTheDirectory) {
  TempDir dir;
  std::string path = dir.Sub("queue");
  MakeQueue(path, 2500);
  auto before = Listing(path);
  Outcome run = Spool({"export", path, "--page-size", "700"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::istringstream lines(run.out);
  std::string line;
  uint64_t count = 0;
  uint64_t last = 0;
  while (std::getline(lines, line)) {
    auto task = nlohmann::json::parse(line);
    uint64_t id = task["id"].get<uint64_t>();
    EXPECT_GT(id, last);
    last = id;
    ++count;
  }
  EXPECT_EQ(count, 2500u);
  for (const char* command : {"stats", "list", "verify"}) {
    EXPECT_EQ(Spool({command, path, "--json"}).exit_code, 0) << command;
  }
  EXPECT_EQ(Listing(path), before);
}

// Strings with quotes, backslashes (one ending a string) and braces: the
// export's split of a page must find where each task ends anyway.
TEST(SpoolCli, ExportSplitsTasksWhoseStringsHoldQuotesAndBackslashes) {
  TempDir dir;
  std::string path = dir.Sub("queue");
  const std::vector<std::string> types = {"q\"},{\"id\":1", "ends\\", "\\\"",
                                          "plain"};
  {
    Options options;
    options.path = path;
    options.durability = Durability::kRelaxed;
    std::unique_ptr<Runtime> runtime;
    ASSERT_TRUE(Runtime::Open(options, &runtime).ok());
    for (const std::string& type : types) {
      ASSERT_TRUE(
          runtime
              ->RegisterHandler(type, [](TaskContext&) { return Status::OK(); })
              .ok());
    }
    std::vector<TaskSpec> batch;
    for (int i = 0; i < 40; ++i) {
      TaskSpec spec{types[i % types.size()], "p", {}};
      spec.options.group = i % 3 == 0 ? "g\\" : "";
      batch.push_back(std::move(spec));
    }
    Result<std::vector<TaskId>> stored =
        Bounded(runtime->EnqueueBatch(std::move(batch)).stored);
    ASSERT_TRUE(stored.ok()) << stored.status().ToString();
    ASSERT_TRUE(Bounded(runtime->Close()).ok());
  }
  Outcome run = Spool({"export", path, "--page-size", "7"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::istringstream lines(run.out);
  std::string line;
  size_t count = 0;
  while (std::getline(lines, line)) {
    auto task = nlohmann::json::parse(line);
    EXPECT_EQ(task["type"].get<std::string>(), types[count % types.size()]);
    ++count;
  }
  EXPECT_EQ(count, 40u);
}

TEST(SpoolCli, MutationsOnAQueueNoProcessHolds) {
  TempDir dir;
  std::string path = dir.Sub("queue");
  MakeQueue(path, 10);
  Outcome cancel = Spool({"cancel", path, "3"});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_NE(cancel.out.find("cancelled"), std::string::npos);
  Outcome show = Spool({"show", path, "3", "--json"});
  EXPECT_EQ(nlohmann::json::parse(show.out)["status"], "cancelled");
  Outcome retry = Spool({"retry", path, "3"});
  ASSERT_EQ(retry.exit_code, 0) << retry.err;
  show = Spool({"show", path, "3", "--json"});
  EXPECT_EQ(nlohmann::json::parse(show.out)["status"], "pending");
  ASSERT_EQ(Spool({"cancel", path, "4"}).exit_code, 0);
  Outcome purge = Spool({"purge", path, "--status", "cancelled"});
  ASSERT_EQ(purge.exit_code, 0) << purge.err;
  EXPECT_NE(purge.out.find("purged 1 tasks"), std::string::npos) << purge.out;
  Outcome gone = Spool({"show", path, "4"});
  EXPECT_EQ(gone.exit_code, 1);
  ExpectOneLine(gone, {"NotFound", "4"});
  Outcome not_failed = Spool({"retry", path, "5"});
  EXPECT_EQ(not_failed.exit_code, 1);
  ExpectOneLine(not_failed, {"FailedPrecondition"});
}

// spool backup, backups and restore on a store no process holds; the
// restored store passes spool verify and holds the same tasks; a store
// another process holds is not backed up from outside it.
TEST(SpoolCli, BackupListAndRestore) {
  TempDir dir;
  std::string path = dir.Sub("queue");
  std::string backups = dir.Sub("backups");
  MakeQueue(path, 25);
  Outcome made = Spool({"backup", path, backups, "--json"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  auto info = nlohmann::json::parse(made.out);
  EXPECT_EQ(info["id"], 1);
  EXPECT_GT(info["files"].get<int>(), 0);
  EXPECT_EQ(info["format_version"], storage::kSchemaVersion);
  ASSERT_EQ(Spool({"cancel", path, "3"}).exit_code, 0);
  Outcome second = Spool({"backup", path, backups});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.out.find("backup 2:"), std::string::npos) << second.out;

  Outcome listed = Spool({"backups", backups, "--json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  auto list = nlohmann::json::parse(listed.out);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0]["id"], 1);
  EXPECT_EQ(list[1]["id"], 2);
  EXPECT_LT(list[0]["sequence"].get<uint64_t>(),
            list[1]["sequence"].get<uint64_t>());

  std::string restored = dir.Sub("restored");
  Outcome restore = Spool({"restore", backups, restored, "--id", "1"});
  ASSERT_EQ(restore.exit_code, 0) << restore.err;
  EXPECT_NE(restore.out.find("restored backup 1"), std::string::npos);
  Outcome verify = Spool({"verify", restored, "--json"});
  ASSERT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  EXPECT_EQ(nlohmann::json::parse(verify.out)["tasks"], 25);
  // Backup 1 was made before task 3 was cancelled.
  Outcome show = Spool({"show", restored, "3", "--json"});
  EXPECT_EQ(nlohmann::json::parse(show.out)["status"], "pending");

  Outcome again = Spool({"restore", backups, restored});
  EXPECT_EQ(again.exit_code, 1);
  ExpectOneLine(again, {"FailedPrecondition", restored, "not empty"});
  Outcome nowhere = Spool({"backups", dir.Sub("nowhere")});
  EXPECT_EQ(nowhere.exit_code, 1);
  ExpectOneLine(nowhere, {"NotFound", "nowhere"});
  Outcome no_id = Spool({"restore", backups, dir.Sub("r"), "--id", "0"});
  EXPECT_EQ(no_id.exit_code, 2);

  LiveQueue live(dir.Sub("live"), 3);
  Outcome held = Spool({"backup", dir.Sub("live"), dir.Sub("live-backups")});
  EXPECT_EQ(held.exit_code, 1);
  ExpectOneLine(held, {"Busy"});
}

TEST(SpoolCli, VerifyFindsACorruptRecord) {
  TempDir dir;
  std::string path = dir.Sub("queue");
  MakeQueue(path, 20);
  {
    storage::StoreOptions options;
    options.path = path;
    std::unique_ptr<storage::TaskStore> store;
    ASSERT_TRUE(storage::TaskStore::Open(options, &store).ok());
    ASSERT_TRUE(
        store->PutRawForTesting(storage::StateKey(7), "not a record").ok());
  }
  Outcome verify = Spool({"verify", path, "--json"});
  EXPECT_EQ(verify.exit_code, 1);
  auto report = nlohmann::json::parse(verify.out);
  EXPECT_FALSE(report["ok"].get<bool>());
  EXPECT_EQ(report["unreadable"], 1);
  EXPECT_EQ(report["unreadable_ids"][0], 7);
  ExpectOneLine(verify, {"verify", path, "damaged"});
  Outcome text = Spool({"verify", path});
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.out.find("DAMAGED"), std::string::npos);

  Outcome show = Spool({"show", path, "7"});
  EXPECT_EQ(show.exit_code, 1);
  ExpectOneLine(show, {"Corruption", "7"});
  Outcome exported = Spool({"export", path});
  EXPECT_EQ(exported.exit_code, 1);
  EXPECT_EQ(std::count(exported.out.begin(), exported.out.end(), '\n'), 19);
  ExpectOneLine(exported, {"unreadable"});
}

TEST(SpoolCli, BadInputGetsOneLineAndItsExitCode) {
  TempDir dir;
  std::string path = dir.Sub("queue");
  MakeQueue(path, 5);

  Outcome unknown = Spool({"frobnicate", path});
  EXPECT_EQ(unknown.exit_code, 2);
  ExpectOneLine(unknown, {"frobnicate"});
  Outcome none = Spool({});
  EXPECT_EQ(none.exit_code, 2);
  ExpectOneLine(none, {"subcommand"});
  Outcome bad_limit = Spool({"list", path, "--limit", "0"});
  EXPECT_EQ(bad_limit.exit_code, 2);
  ExpectOneLine(bad_limit, {"--limit", "0"});
  Outcome bad_number = Spool({"list", path, "--limit", "many"});
  EXPECT_EQ(bad_number.exit_code, 2);
  ExpectOneLine(bad_number, {"--limit", "many"});
  Outcome bad_status = Spool({"list", path, "--status", "sleeping"});
  EXPECT_EQ(bad_status.exit_code, 2);
  ExpectOneLine(bad_status, {"--status", "sleeping"});
  Outcome bad_cursor = Spool({"list", path, "--cursor", "!!"});
  EXPECT_EQ(bad_cursor.exit_code, 2);
  ExpectOneLine(bad_cursor, {"cursor"});
  Outcome bad_id = Spool({"show", path, "abc"});
  EXPECT_EQ(bad_id.exit_code, 2);
  ExpectOneLine(bad_id, {"'abc'", "task id"});
  Outcome bad_set = Spool({"--set", "runtime.workers=four", "stats", path});
  EXPECT_EQ(bad_set.exit_code, 2);
  ExpectOneLine(bad_set, {"runtime.workers", "four"});

  Outcome no_task = Spool({"show", path, "999"});
  EXPECT_EQ(no_task.exit_code, 1);
  ExpectOneLine(no_task, {"NotFound", "999"});
  Outcome no_history = Spool({"history", path, "999", "--json"});
  EXPECT_EQ(no_history.exit_code, 1);
  ExpectOneLine(no_history, {"NotFound", "999"});

  std::string missing = dir.Sub("missing");
  for (const char* command : {"stats", "list", "export", "verify", "cancel"}) {
    std::vector<std::string> args = {command, missing};
    if (std::string(command) == "cancel") args.push_back("1");
    Outcome run = Spool(args);
    EXPECT_EQ(run.exit_code, 1) << command;
    ExpectOneLine(run, {missing, "does not exist"});
    EXPECT_FALSE(std::filesystem::exists(missing)) << command;
  }

  std::string foreign = dir.Sub("foreign");
  std::filesystem::create_directories(foreign);
  std::ofstream(foreign + "/notes.txt") << "hello\n";
  auto foreign_before = Listing(foreign);
  for (const char* command : {"stats", "purge"}) {
    Outcome run = Spool({command, foreign});
    EXPECT_EQ(run.exit_code, 1) << command;
    ExpectOneLine(run, {foreign, "not a spool store"});
  }
  EXPECT_EQ(Listing(foreign), foreign_before);

  // A RocksDB database that is not a spool store.
  std::string other_db = dir.Sub("other-db");
  {
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, other_db, &db).ok());
    delete db;
  }
  Outcome other = Spool({"stats", other_db});
  EXPECT_EQ(other.exit_code, 1);
  ExpectOneLine(other, {other_db, "not a spool store", "tasks"});

  // A newer schema version, as a future spool would write it.
  std::string newer = dir.Sub("newer");
  MakeQueue(newer, 1);
  {
    std::vector<std::string> names;
    ASSERT_TRUE(
        rocksdb::DB::ListColumnFamilies(rocksdb::Options(), newer, &names)
            .ok());
    std::vector<rocksdb::ColumnFamilyDescriptor> families;
    for (const std::string& name : names)
      families.emplace_back(name, rocksdb::ColumnFamilyOptions());

    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(
        rocksdb::DB::Open(rocksdb::DBOptions(), newer, families, &handles, &db)
            .ok());
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == "meta") {
        ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), handles[i],
                            "schema_version", std::string("\0\0\0\4", 4))
                        .ok());
      }
    }
    for (auto* handle : handles) db->DestroyColumnFamilyHandle(handle);
    delete db;
  }
  Outcome version = Spool({"stats", newer, "--json"});
  EXPECT_EQ(version.exit_code, 1);
  ExpectOneLine(
      version, {"NotSupported", newer, "schema version 4", "schema version 3"});
}

TEST(SpoolCli, ConfigPrintShowsTheEffectiveConfig) {
  Outcome run = Spool({"--set", "runtime.workers=7", "config", "--print"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("[storage]"), std::string::npos);
  EXPECT_NE(run.out.find("# Source: --set.\nworkers = 7"), std::string::npos)
      << run.out;
  // The config's own log level, not the tool's quieter one.
  EXPECT_NE(run.out.find("# Source: default.\nlevel = \"warn\""),
            std::string::npos)
      << run.out;
  TempDir dir;
  std::string file = dir.Sub("spool.toml");
  std::ofstream(file) << "[runtime]\nworkers = 3\n";
  Outcome from_file = Spool({"config", "--print", file});
  ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
  EXPECT_NE(from_file.out.find("# Source: " + file + ":2.\nworkers = 3"),
            std::string::npos)
      << from_file.out;
  Outcome missing = Spool({"config", "--print", dir.Sub("nope.toml")});
  EXPECT_EQ(missing.exit_code, 2);
  ExpectOneLine(missing, {"nope.toml"});
}

}  // namespace
}  // namespace spool
