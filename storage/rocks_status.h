// How RocksDB's errors reach spool's callers. Storage-internal: every file
// of the TaskStore maps a rocksdb::Status through this one function, so that
// the same failure has the same code whichever file met it.

#ifndef SPOOL_STORAGE_ROCKS_STATUS_H_
#define SPOOL_STORAGE_ROCKS_STATUS_H_

#include <string>
#include <string_view>

#include <spool/status.h>

#include <rocksdb/status.h>

namespace spool::storage {

// `s` as a spool Status, its message prefixed with `context` (what the store
// was doing). The code is kept wherever spool has the same meaning, because
// callers act on it: the writer closes and reopens the store after an
// IOError only (RocksDB refuses writes after a failed one until then), so
// an error that a reopen cannot cure must not become one. Busy and TryAgain
// are transient (RocksDB is recovering, or the resource is held) and become
// Busy, as TaskStore::Open promises for a directory in use. InvalidArgument
// and NotSupported say what this build or its options cannot do, and would
// fail the same way after a reopen. Everything else, NoSpace included (an
// IOError subcode in RocksDB), is the disk or the engine failing: IOError.
inline Status FromRocks(const rocksdb::Status& s, std::string_view context) {
  if (s.ok()) return Status::OK();
  std::string msg = std::string(context) + ": " + s.ToString();
  if (s.IsNotFound()) return Status::NotFound(msg);
  if (s.IsCorruption()) return Status::Corruption(msg);
  if (s.IsInvalidArgument()) return Status::InvalidArgument(msg);
  if (s.IsNotSupported()) return Status::NotSupported(msg);
  if (s.IsBusy() || s.IsTryAgain()) return Status::Busy(msg);
  return Status::IOError(msg);
}

}  // namespace spool::storage

#endif  // SPOOL_STORAGE_ROCKS_STATUS_H_
