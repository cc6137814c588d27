// What the two files of TaskStore (task_store.cc, task_store_crypto.cc)
// share. Storage-internal: nothing outside storage/ includes it.

#ifndef SPOOL_STORAGE_TASK_STORE_INTERNAL_H_
#define SPOOL_STORAGE_TASK_STORE_INTERNAL_H_

#include <string>
#include <string_view>

#include <spool/status.h>

namespace spool::storage {

// The meta marker that, when set, makes the next open rebuild every index
// and the counts from the records.
inline constexpr const char* kMetaCountsDirty = "counts_dirty";

// What every call on a store returns after a failed write closed it and
// reopening failed too.
inline Status StoreClosed(const std::string& path) {
  return Status::IOError("storage " + path +
                         " is closed after a failure and could not be "
                         "reopened");
}

// What a read-only store (StoreOptions::read_only) returns for a call that
// would write.
inline Status ReadOnlyStore(const std::string& path, std::string_view what) {
  return Status::FailedPrecondition("storage " + path + " is open read-only: " +
                                    std::string(what) + " is refused");
}

// Creates directory `path` with mode 0700 when it does not exist
// (task_store.cc says why); `what` names it in errors.
Status CreatePrivateDirectory(const std::string& path, const char* what);

}  // namespace spool::storage

#endif  // SPOOL_STORAGE_TASK_STORE_INTERNAL_H_
