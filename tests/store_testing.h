// Helpers for the tests of storage/ and actors/: tasks as the writer
// stores them.

#ifndef SPOOL_TESTS_STORE_TESTING_H_
#define SPOOL_TESTS_STORE_TESTING_H_

#include <cstdint>
#include <string>

#include <spool/task.h>

#include "storage/record.h"
#include "storage/task_store.h"
#include "tests/testing.h"

namespace spool::testing {

// A task as the writer stores one: its spec and its state.
struct StoredTask {
  storage::SpecRecord spec;
  storage::StateRecord state;
};

// A new pending task with no retries, ready at once.
StoredTask PendingTask(TaskId id, std::string type, uint64_t sequence,
                       std::string payload = "");

// Stages `task` into `txn` (WriteTxn::Insert).
void InsertTask(storage::WriteTxn* txn, StoredTask task);

}  // namespace spool::testing

#endif  // SPOOL_TESTS_STORE_TESTING_H_
