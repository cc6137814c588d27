#include "tests/testing.h"

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <thread>

namespace spool::testing {

std::unique_ptr<Runtime> OpenOrDie(const Options& options) {
  std::unique_ptr<Runtime> runtime;
  Status s = Runtime::Open(options, &runtime);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return runtime;
}

Status Ok(TaskContext&) { return Status::OK(); }

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base ? base : "/tmp") + "/spool-test-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("mkdtemp failed for " + pattern);
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::Sub(const std::string& name) const {
  return path_ + "/" + name;
}

bool WaitUntil(const std::function<bool()>& condition,
               std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

StoredTask PendingTask(TaskId id, std::string type, uint64_t sequence,
                       std::string payload) {
  StoredTask task;
  task.spec.id = id;
  task.spec.type = type;
  task.spec.payload = std::move(payload);
  task.state.id = id;
  task.state.type = std::move(type);
  task.state.sequence = sequence;
  task.state.retry = RetryPolicy::None();
  return task;
}

void InsertTask(storage::WriteTxn* txn, StoredTask task) {
  txn->Insert(std::move(task.spec), std::move(task.state));
}

}  // namespace spool::testing
