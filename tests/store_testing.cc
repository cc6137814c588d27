#include "tests/store_testing.h"

#include <utility>

namespace spool::testing {

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
