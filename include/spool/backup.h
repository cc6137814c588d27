// Online backups: what Runtime::Backup makes, and the offline tools that
// list, verify and restore them.
//
// A backup directory holds numbered backups of one store, made by RocksDB's
// BackupEngine: each backup is a consistent copy of the store as of one
// moment (every commit acknowledged before the backup began is in it; the
// commits after that moment are not), and table files that did not change
// between backups are shared, so a new backup copies only what is new. Every
// file is checksummed; restoring verifies the checksums first, and refuses a
// backup whose files were truncated or altered, naming the file.
//
// An encrypted store stays encrypted in its backups: values are sealed
// before they reach RocksDB (spool/encryption.h), and a backup copies
// RocksDB's files as they are. A restored store needs the same key.
//
// One backup directory belongs to one store: do not point two stores at
// the same directory.
//
// Thread safety: the functions here may be called from any thread; two
// calls on the same backup directory at once (in any process) are not
// supported, except that listing is safe beside a restore.

#ifndef SPOOL_INCLUDE_BACKUP_H_
#define SPOOL_INCLUDE_BACKUP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <spool/status.h>

namespace spool {

// One backup in a backup directory.
struct BackupInfo {
  // The backup's number in its directory: 1, 2, ... in the order made.
  uint32_t id = 0;
  // When it was made, in seconds since the Unix epoch.
  int64_t created_unix_seconds = 0;
  // The bytes of its files, counted once each, shared ones included (what a
  // restore copies); the directory holds less when backups share files.
  uint64_t size_bytes = 0;
  // How many files it has.
  uint32_t files = 0;
  // The store's last commit sequence when the backup began: the backup
  // holds every commit up to it.
  uint64_t sequence = 0;
  // The store's on-disk format version (a store of another version is
  // refused when the restored copy is opened).
  uint32_t format_version = 0;
};

// Lists the backups in `backup_dir`, oldest first. NotFound when the
// directory does not exist; IOError or Corruption when RocksDB cannot read
// its metadata. An empty list for a directory that holds no backup.
// REQUIRES: backups != nullptr.
Status ListBackups(const std::string& backup_dir,
                   std::vector<BackupInfo>* backups);

// Checks every file of backup `id` in `backup_dir` against its size and
// checksum. Corruption naming the file when one was truncated or altered,
// NotFound when there is no such backup.
Status VerifyBackup(const std::string& backup_dir, uint32_t id);

struct RestoreOptions {
  // Which backup: empty for the newest.
  std::optional<uint32_t> id;
};

// Verifies a backup of `backup_dir` (as VerifyBackup) and copies it into
// `store_dir`, which must not exist or be empty; it is created with mode
// 0700, like a new store. The restored store opens like any other (with the
// key it was encrypted with, if it was). FailedPrecondition when store_dir
// holds anything, NotFound when the backup does not exist, Corruption
// naming the file when the backup is damaged; nothing is left in store_dir
// after a failure. On success *restored (if not null) says which backup.
Status RestoreBackup(const std::string& backup_dir,
                     const std::string& store_dir,
                     const RestoreOptions& options = {},
                     BackupInfo* restored = nullptr);

}  // namespace spool

#endif  // SPOOL_INCLUDE_BACKUP_H_
