// Harness: a runtime on a manual clock, with helpers to wait for what tasks
// do, for the task-semantics tests.

#ifndef SPOOL_TESTS_HARNESS_H_
#define SPOOL_TESTS_HARNESS_H_

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <spool/runtime.h>

#include <gtest/gtest.h>

#include "tests/runtime_testing.h"

namespace spool::testing {

// Every wait in these tests is bounded by this: a hang fails the test.
inline constexpr std::chrono::seconds kWait{30};

// A gate handlers wait on until the test opens it.
class Gate {
 public:
  void Open();
  // Waits until open; false if the bounded wait ran out.
  bool Wait();

 private:
  std::mutex mutex_;
  std::condition_variable opened_cv_;
  bool open_ = false;
};

// Counts and records what handlers see, thread safe.
class Journal {
 public:
  void Record(TaskId id, std::string label);
  std::vector<std::string> Labels() const;
  std::vector<TaskId> Ids() const;
  size_t size() const;
  // Waits until at least `n` entries; false if the bounded wait ran out.
  bool WaitForSize(size_t n);

 private:
  mutable std::mutex mutex_;
  std::condition_variable grew_cv_;
  std::vector<std::pair<TaskId, std::string>> entries_;
};

// A one-thread executor whose queue a test can wait to empty.
class TestExecutor final : public Executor {
 public:
  TestExecutor();
  ~TestExecutor() override;
  void Post(std::function<void()> fn) override;
  // Returns once everything posted before the call has run.
  void Flush();

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::function<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

class Harness {
 public:
  // A runtime on an in-memory store (or `path` on disk), with a manual clock
  // starting at 2026-01-01, `workers` workers and, when given, at most
  // `claim_ahead` tasks claimed ahead (runtime.claim_ahead).
  explicit Harness(int workers = 4, Durability durability = Durability::kMemory,
                   std::optional<int> claim_ahead = std::nullopt);
  ~Harness();

  Runtime& runtime() { return *runtime_; }
  ManualClock& clock() { return *clock_; }
  Options& options() { return options_; }

  // Closes the runtime and opens it again on the same store (disk only).
  void Reopen();
  void Close();
  // Closes while handlers still run, expecting Close to give up on them
  // (TimedOut): their tasks stay running on disk.
  void CloseAbandoningHandlers();

  // Registers a handler that records the payload in the journal and
  // succeeds.
  void RegisterRecorder(const std::string& type, HandlerOptions options = {});

  // Enqueues and waits until stored; fails the test on error.
  TaskId Put(const std::string& type, const std::string& payload,
             EnqueueOptions options = {});

  TaskInfo Info(TaskId id);
  TaskStatus StatusOf(TaskId id) { return Info(id).status; }
  // Waits until the task has `status`; false if the bounded wait ran out.
  bool WaitForStatus(TaskId id, TaskStatus status);
  void Drain();

  // Events received since StartRecordingEvents, in order, as "kind:id".
  std::vector<std::string> Events();
  // Subscribes to the current runtime's events (again after Reopen).
  void StartRecordingEvents();

  Journal journal;

 private:
  Options options_;
  TempDir dir_;
  std::shared_ptr<TestExecutor> executor_ = std::make_shared<TestExecutor>();
  std::shared_ptr<ManualClock> clock_;
  std::unique_ptr<Runtime> runtime_;
  std::mutex events_mutex_;
  std::vector<std::string> events_;
};

}  // namespace spool::testing

#endif  // SPOOL_TESTS_HARNESS_H_
