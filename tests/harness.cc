#include "tests/harness.h"

#include <thread>

namespace spool::testing {

void Gate::Open() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
  }
  opened_cv_.notify_all();
}

bool Gate::Wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  return opened_cv_.wait_for(lock, kWait, [this] { return open_; });
}

void Journal::Record(TaskId id, std::string label) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.emplace_back(id, std::move(label));
  }
  grew_cv_.notify_all();
}

std::vector<std::string> Journal::Labels() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> labels;
  for (const auto& entry : entries_) labels.push_back(entry.second);
  return labels;
}

std::vector<TaskId> Journal::Ids() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<TaskId> ids;
  for (const auto& entry : entries_) ids.push_back(entry.first);
  return ids;
}

size_t Journal::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

bool Journal::WaitForSize(size_t n) {
  std::unique_lock<std::mutex> lock(mutex_);
  return grew_cv_.wait_for(lock, kWait, [&] { return entries_.size() >= n; });
}

TestExecutor::TestExecutor()
    : thread_([this] {
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
          wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
          if (queue_.empty()) return;
          auto batch = std::move(queue_);
          queue_.clear();
          lock.unlock();
          for (auto& fn : batch) fn();
          lock.lock();
        }
      }) {}

TestExecutor::~TestExecutor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void TestExecutor::Post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(fn));
  }
  wake_.notify_all();
}

void TestExecutor::Flush() {
  Gate done;
  Post([&done] { done.Open(); });
  EXPECT_TRUE(done.Wait()) << "the executor did not run a posted callback";
}

Harness::Harness(int workers, Durability durability,
                 std::optional<int> claim_ahead)
    : clock_(std::make_shared<ManualClock>(
          Timestamp(std::chrono::seconds(1767225600)))) {
  options_.path = dir_.Sub("queue");
  options_.durability = durability;
  options_.workers = workers;
  if (claim_ahead) options_.claim_ahead = *claim_ahead;
  options_.clock = clock_;
  options_.close_timeout = std::chrono::seconds(10);
  options_.callback_executor = executor_;
  Status s = Runtime::Open(options_, &runtime_);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

Harness::~Harness() { Close(); }

void Harness::Close() {
  if (runtime_) {
    auto closed = Await(runtime_->Close());
    EXPECT_TRUE(closed.ok()) << closed.status().ToString();
    runtime_.reset();
  }
}

void Harness::CloseAbandoningHandlers() {
  auto closed = Await(runtime_->Close());
  EXPECT_TRUE(closed.status().IsTimedOut()) << closed.status().ToString();
  runtime_.reset();
}

void Harness::Reopen() {
  Close();
  Status s = Runtime::Open(options_, &runtime_);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

void Harness::RegisterRecorder(const std::string& type,
                               HandlerOptions options) {
  Status s = runtime_->RegisterHandler(
      type,
      [this](TaskContext& task) {
        journal.Record(task.id(), std::string(task.payload()));
        return Status::OK();
      },
      options);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

TaskId Harness::Put(const std::string& type, const std::string& payload,
                    EnqueueOptions options) {
  auto stored = Await(runtime_->Enqueue(type, payload, options).stored);
  EXPECT_TRUE(stored.ok()) << stored.status().ToString();
  return stored.ok() ? *stored : 0;
}

TaskInfo Harness::Info(TaskId id) {
  auto info = Await(runtime_->GetTask(id));
  EXPECT_TRUE(info.ok()) << "task " << id << ": " << info.status().ToString();
  return info.ok() ? *info : TaskInfo{};
}

bool Harness::WaitForStatus(TaskId id, TaskStatus status) {
  return WaitUntil(
      [&] {
        auto info = runtime_->GetTask(id);
        return info.WaitFor(kWait) && info.Wait().ok() &&
               info.Wait()->status == status;
      },
      kWait);
}

void Harness::Drain() {
  auto drained = Await(runtime_->Drain());
  ASSERT_TRUE(drained.ok()) << drained.status().ToString();
}

void Harness::StartRecordingEvents() {
  {
    std::lock_guard<std::mutex> lock(events_mutex_);
    events_.clear();
  }
  runtime_->Subscribe([this](const TaskEvent& event) {
    std::lock_guard<std::mutex> lock(events_mutex_);
    events_.push_back(std::string(TaskEventKindName(event.kind)) + ":" +
                      std::to_string(event.id));
  });
}

std::vector<std::string> Harness::Events() {
  // Events are posted to the callback executor as their commit completes,
  // before the callers of that commit hear back; emptying the executor's
  // queue delivers every event of the commits the test has waited for.
  executor_->Flush();
  std::lock_guard<std::mutex> lock(events_mutex_);
  return events_;
}

}  // namespace spool::testing
