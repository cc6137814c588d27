// Backups: Runtime::Backup and BackupTo on a reader's thread, and the
// offline functions of spool/backup.h.

#include <spool/backup.h>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "runtime/runtime_impl.h"
#include "storage/backup.h"
#include "util/logging.h"

namespace spool {

Status ListBackups(const std::string& backup_dir,
                   std::vector<BackupInfo>* backups) {
  return storage::ListBackups(backup_dir, backups);
}

Status VerifyBackup(const std::string& backup_dir, uint32_t id) {
  return storage::VerifyBackup(backup_dir, id);
}

Status RestoreBackup(const std::string& backup_dir,
                     const std::string& store_dir,
                     const RestoreOptions& options, BackupInfo* restored) {
  return storage::RestoreBackup(backup_dir, store_dir, options.id, restored);
}

Future<BackupInfo> RuntimeImpl::Backup() {
  if (options_.backup_dir.empty()) {
    return Failed<BackupInfo>(
        Status::FailedPrecondition(
            "Backup needs a backup directory (Options::backup_dir, or "
            "backup.dir in the config); BackupTo takes one"),
        executor_);
  }
  return BackupTo(options_.backup_dir);
}

Future<BackupInfo> RuntimeImpl::BackupTo(std::string backup_dir) {
  if (read_only_) {
    return Failed<BackupInfo>(
        Status::NotSupported(
            "a read-only runtime cannot make a backup: back the store up "
            "from the process that holds it"),
        executor_);
  }
  CallGuard guard(this);
  if (guard.closed()) return Failed<BackupInfo>(ClosedError(), executor_);
  // On a reader's thread: the copy takes as long as the disk needs, and
  // must hold up neither the writer nor the callback executor. The view
  // keeps the store open meanwhile; Close stops the copy (StopBackup).
  auto promise = NewPromise<BackupInfo>();
  actors::ReadJob job;
  job.run = [promise, store = store_.get(), dir = std::move(backup_dir),
             keep = options_.backup_keep](
                const storage::TaskStore::ReadView& view) {
    BackupInfo info;
    Status s = store->CreateBackup(view, dir, keep, &info);
    if (s.ok()) {
      Logger()->info("backup {} of {} made in {}: {} files, {} bytes", info.id,
                     store->options().path, dir, info.files, info.size_bytes);
      promise.Set(info);
    } else {
      promise.Set(s.WithContext("Backup"));
    }
  };
  job.fail = [promise](const Status& s) { promise.Set(s); };
  caf::anon_send(readers_, actors::read_atom::value, std::move(job));
  return promise.GetFuture();
}

}  // namespace spool
