// Backups of a store's directory, through RocksDB's BackupEngine: listing,
// verifying and restoring them (TaskStore::CreateBackup makes them). The
// public face is spool/backup.h, which says what a backup holds.
//
// Each backup carries, as its BackupEngine metadata, one line naming the
// store's format version and its last sequence when the backup began:
//   spool-backup format=3 sequence=1234
// so that a listing can say which spool can open it without restoring it.
//
// Thread safety: free functions; see spool/backup.h for what may run at
// once on one backup directory.

#ifndef SPOOL_STORAGE_BACKUP_H_
#define SPOOL_STORAGE_BACKUP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <spool/backup.h>
#include <spool/status.h>

namespace spool::storage {

// The metadata line of a backup of a store of `format_version` whose last
// sequence was `sequence`.
std::string BackupMetadata(uint32_t format_version, uint64_t sequence);

// spool::ListBackups.
Status ListBackups(const std::string& backup_dir,
                   std::vector<BackupInfo>* backups);

// spool::VerifyBackup.
Status VerifyBackup(const std::string& backup_dir, uint32_t id);

// spool::RestoreBackup.
Status RestoreBackup(const std::string& backup_dir,
                     const std::string& store_dir, std::optional<uint32_t> id,
                     BackupInfo* restored);

}  // namespace spool::storage

#endif  // SPOOL_STORAGE_BACKUP_H_
