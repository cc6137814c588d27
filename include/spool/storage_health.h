// StorageHealthEvent: storage failures and recoveries as data, for an
// application to watch (Runtime::SubscribeStorageHealth) instead of reading
// logs.
//
// spool's writer makes every change to storage. When a commit fails (the
// disk refuses a write or a sync, or the store cannot be reopened after
// one), the runtime reports a failure, with the count of failures in a row;
// the first commit that succeeds after failures reports a recovery. The same
// figures are in Statistics (storage_failures, storage_recoveries,
// storage_consecutive_failures).
//
// What spool does meanwhile: a call whose write failed gets the error
// (Enqueue's ticket resolves with IOError); reads go on; the writer reopens
// the store and tries again with the next batch. A handler's outcome whose
// commit failed is kept by the scheduler and written again with a later
// batch: the handler does not run again and the attempt is counted once
// (OutageTest.OutcomesAreRetriedWithoutRunningTheHandlerAgain). A claim
// whose commit failed is given back to the queue, attempt not counted. A
// worker that cannot read a task's spec runs nothing, whatever the reason
// (an I/O error included): the writer sets the task aside (ListSetAside),
// and Release returns it once it reads again. Reads by queries get the
// error and are not reported here.

#ifndef SPOOL_INCLUDE_STORAGE_HEALTH_H_
#define SPOOL_INCLUDE_STORAGE_HEALTH_H_

#include <cstdint>
#include <string>

#include <spool/status.h>
#include <spool/task.h>

namespace spool {

struct StorageHealthEvent {
  enum class Kind : uint8_t {
    kFailure,   // an operation on storage failed
    kRecovery,  // the first commit that succeeded after failures
  };
  Kind kind = Kind::kFailure;
  // What failed: "commit" (writing or syncing a group commit) or "reopen"
  // (reopening the store after a failed commit, before the next one). For a
  // recovery, "commit".
  std::string operation;
  // The failure's error, naming the directory and RocksDB's reason; OK for
  // a recovery.
  Status error;
  // When it happened, by Options::clock.
  Timestamp time{};
  // kFailure: the failures in a row, this one included (1 for the first).
  // kRecovery: the failures in a row that it ended.
  uint64_t consecutive_failures = 0;
};

}  // namespace spool

#endif  // SPOOL_INCLUDE_STORAGE_HEALTH_H_
