#include "actors/replica.h"

#include <filesystem>
#include <string>
#include <system_error>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "storage/backup.h"
#include "util/logging.h"
#include "util/thread_name.h"

namespace spool::actors {
namespace {

// Restores the newest backup of `backup_dir` next to the store (on the
// same file system, so that the swap is two renames), then swaps it in.
Result<uint64_t> Rebase(storage::TaskStore& store, const RebaseJob& job) {
  std::string restored = store.options().path + ".base";
  std::error_code error;
  std::filesystem::remove_all(restored, error);
  BackupInfo info;
  Status s =
      storage::RestoreBackup(job.backup_dir, restored, std::nullopt, &info);
  if (!s.ok()) return s.WithContext("restoring the base copy");
  s = store.ReplaceWith(restored);
  if (!s.ok()) {
    std::filesystem::remove_all(restored, error);
    return s;
  }
  s = store.MarkFollowing(job.log_id);
  if (!s.ok()) return s;
  Logger()->info("standby: took base backup {} ({} bytes) at position {}",
                 info.id, info.size_bytes, store.committed_batches());
  return store.committed_batches();
}

replica_actor::behavior_type ReplicaBehavior(replica_actor::pointer,
                                             storage::TaskStore* store) {
  NameThisThread("spool-replica");
  return {
      [store](apply_atom, ApplyJob& job) {
        Status s = store->ApplyReplicated(job.commits, job.log_id);
        if (!s.ok()) return job.done(s);
        job.done(store->committed_batches());
      },
      [store](rebase_atom, RebaseJob& job) { job.done(Rebase(*store, job)); },
  };
}

}  // namespace

replica_actor SpawnReplica(caf::actor_system& system,
                           storage::TaskStore* store) {
  // The store goes in as a spawn argument, not a capture: CAF 0.17.6
  // dereferences the (empty) argument tuple of a function actor spawned
  // without arguments, which _GLIBCXX_ASSERTIONS (the ASan build) aborts on.
  return system.spawn<caf::detached>(ReplicaBehavior, store);
}

}  // namespace spool::actors
