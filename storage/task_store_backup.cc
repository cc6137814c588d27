// TaskStore's backups, and the offline functions of storage/backup.h: all
// that speaks to RocksDB's BackupEngine.

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/utilities/backup_engine.h>

#include "storage/backup.h"
#include "storage/rocks_status.h"
#include "storage/task_store.h"
#include "storage/task_store_internal.h"
#include "util/paths.h"

namespace spool::storage {
namespace {

constexpr std::string_view kMetadataTag = "spool-backup";

rocksdb::BackupEngineOptions EngineOptions(const std::string& backup_dir) {
  rocksdb::BackupEngineOptions options(backup_dir);
  // Backups go to the real disk even when the store's own environment is
  // another (a fault-injecting one in tests).
  options.backup_env = rocksdb::Env::Default();
  // A table file is named by its checksum and size in `shared_checksum/`,
  // so that backups share the files that did not change (incremental), and
  // a file of the same name is never mistaken for another.
  options.share_table_files = true;
  options.share_files_with_checksum = true;
  // Each file is synced as it is written: a backup that reports success
  // survives the machine going down.
  options.sync = true;
  options.info_log = nullptr;
  return options;
}

// Opens the engine of `backup_dir`: read-only for listing, verifying and
// restoring, so that no call but CreateBackup writes into it.
Status OpenEngine(const std::string& backup_dir,
                  std::unique_ptr<rocksdb::BackupEngineReadOnly>* engine) {
  std::error_code error;
  if (!std::filesystem::is_directory(backup_dir, error)) {
    return Status::NotFound("backup directory " + backup_dir +
                            " does not exist");
  }
  rocksdb::BackupEngineReadOnly* raw = nullptr;
  rocksdb::IOStatus s = rocksdb::BackupEngineReadOnly::Open(
      rocksdb::Env::Default(), EngineOptions(backup_dir), &raw);
  engine->reset(raw);
  return FromRocks(s, "opening backup directory " + backup_dir);
}

// Reads what BackupMetadata wrote; missing fields stay 0 (a backup made by
// another tool).
void ParseMetadata(const std::string& metadata, BackupInfo* info) {
  if (metadata.rfind(kMetadataTag, 0) != 0) return;
  auto field = [&metadata](std::string_view name) -> uint64_t {
    std::string key = " " + std::string(name) + "=";
    size_t at = metadata.find(key);
    if (at == std::string::npos) return 0;
    return std::strtoull(metadata.c_str() + at + key.size(), nullptr, 10);
  };
  info->format_version = static_cast<uint32_t>(field("format"));
  info->sequence = field("sequence");
}

BackupInfo FromRocksInfo(const rocksdb::BackupInfo& rocks) {
  BackupInfo info;
  info.id = rocks.backup_id;
  info.created_unix_seconds = rocks.timestamp;
  info.size_bytes = rocks.size;
  info.files = rocks.number_files;
  ParseMetadata(rocks.app_metadata, &info);
  return info;
}

// Whether `dir` is missing or an empty directory; what is in the way, if
// not, in *why.
bool IsFreeForRestore(const std::string& dir, std::string* why) {
  std::error_code error;
  auto status = std::filesystem::status(dir, error);
  if (!std::filesystem::exists(status)) return true;
  if (!std::filesystem::is_directory(status)) {
    *why = dir + " exists and is not a directory";
    return false;
  }
  if (!std::filesystem::is_empty(dir, error) || error) {
    *why = dir + " is not empty; restore into a new or empty directory";
    return false;
  }
  return true;
}

// Removes what a failed restore left in `dir`, and `dir` itself if the
// restore made it, so that a half-copied store is never opened.
void RemoveRestored(const std::string& dir, bool made_it) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    std::filesystem::remove_all(entry.path(), error);
  }
  if (made_it) std::filesystem::remove(dir, error);
}

Status BackupStopped(const std::string& path) {
  return Status::Aborted("the backup of " + path +
                         " was stopped: the store is closing");
}

}  // namespace

std::string BackupMetadata(uint32_t format_version, uint64_t sequence) {
  return std::string(kMetadataTag) +
         " format=" + std::to_string(format_version) +
         " sequence=" + std::to_string(sequence);
}

Status TaskStore::CreateBackup(const ReadView& held,
                               const std::string& backup_dir, uint32_t keep,
                               BackupInfo* info) {
  if (held.store_ != this || !held.open_) return StoreClosed(options_.path);
  if (options_.durability == Durability::kMemory) {
    return Status::NotSupported(
        "an in-memory store (storage.durability = \"memory\") cannot be "
        "backed up");
  }
  if (backup_dir.empty()) {
    return Status::InvalidArgument("no backup directory given");
  }
  if (IsSameOrWithin(backup_dir, options_.path)) {
    // RocksDB would copy earlier backups into the next one.
    return Status::InvalidArgument("backup directory " + backup_dir +
                                   " must lie outside the storage directory " +
                                   options_.path);
  }
  if (backup_running_.exchange(true)) {
    return Status::Busy("a backup of " + options_.path +
                        " is already running; try again when it ends");
  }
  struct Done {
    std::atomic<bool>* flag;
    ~Done() { flag->store(false); }
  } done{&backup_running_};
  if (Status s = CreatePrivateDirectory(backup_dir, "backup directory");
      !s.ok()) {
    return s;
  }
  rocksdb::BackupEngine* raw = nullptr;
  Status s =
      FromRocks(rocksdb::BackupEngine::Open(rocksdb::Env::Default(),
                                            EngineOptions(backup_dir), &raw),
                "opening backup directory " + backup_dir);
  std::unique_ptr<rocksdb::BackupEngine> engine(raw);
  if (!s.ok()) return s;
  {
    std::lock_guard<std::mutex> lock(backup_mutex_);
    if (backups_stopped_) return BackupStopped(options_.path);
    running_backup_ = engine.get();
  }
  // Everything committed before this point is in the backup: the flush
  // below and the live log files copied after it hold at least this much.
  uint64_t sequence = db_->GetLatestSequenceNumber();
  rocksdb::CreateBackupOptions create;
  // The memtables go to table files first, so that a backup is table
  // files (shared with the next backup) rather than a long log; the writer
  // goes on meanwhile, as during any flush.
  create.flush_before_backup = true;
  rocksdb::BackupID id = 0;
  rocksdb::IOStatus made = engine->CreateNewBackupWithMetadata(
      create, db_.get(), BackupMetadata(kSchemaVersion, sequence), &id);
  {
    std::lock_guard<std::mutex> lock(backup_mutex_);
    running_backup_ = nullptr;
  }
  // StopBackup makes RocksDB give up with Incomplete.
  if (made.IsIncomplete()) return BackupStopped(options_.path);
  s = FromRocks(made, "backing up " + options_.path + " into " + backup_dir);
  if (!s.ok()) return s;
  if (keep > 0) {
    s = FromRocks(engine->PurgeOldBackups(keep),
                  "backup " + std::to_string(id) +
                      " was made, but deleting the backups beyond the newest " +
                      std::to_string(keep) + " in " + backup_dir + " failed");
    if (!s.ok()) return s;
  }
  rocksdb::BackupInfo rocks;
  s = FromRocks(engine->GetBackupInfo(id, &rocks),
                "reading backup " + std::to_string(id));
  if (!s.ok()) return s;
  *info = FromRocksInfo(rocks);
  return Status::OK();
}

void TaskStore::StopBackup() {
  std::lock_guard<std::mutex> lock(backup_mutex_);
  backups_stopped_ = true;
  if (running_backup_ != nullptr) running_backup_->StopBackup();
}

Status ListBackups(const std::string& backup_dir,
                   std::vector<BackupInfo>* backups) {
  std::unique_ptr<rocksdb::BackupEngineReadOnly> engine;
  if (Status s = OpenEngine(backup_dir, &engine); !s.ok()) return s;
  std::vector<rocksdb::BackupInfo> infos;
  engine->GetBackupInfo(&infos);
  backups->clear();
  for (const rocksdb::BackupInfo& info : infos) {
    backups->push_back(FromRocksInfo(info));
  }
  return Status::OK();
}

Status VerifyBackup(const std::string& backup_dir, uint32_t id) {
  std::unique_ptr<rocksdb::BackupEngineReadOnly> engine;
  if (Status s = OpenEngine(backup_dir, &engine); !s.ok()) return s;
  rocksdb::BackupInfo info;
  rocksdb::Status found = engine->GetBackupInfo(id, &info);
  if (!found.ok()) {
    std::vector<rocksdb::BackupID> corrupted;
    engine->GetCorruptedBackups(&corrupted);
    for (rocksdb::BackupID bad : corrupted) {
      if (bad == id) {
        return Status::Corruption(
            "backup " + std::to_string(id) + " in " + backup_dir +
            " is damaged: its metadata file " + backup_dir + "/meta/" +
            std::to_string(id) + " cannot be read");
      }
    }
    return Status::NotFound("no backup " + std::to_string(id) + " in " +
                            backup_dir);
  }
  return FromRocks(
      engine->VerifyBackup(id, /*verify_with_checksum=*/true),
      "backup " + std::to_string(id) + " in " + backup_dir + " is damaged");
}

Status RestoreBackup(const std::string& backup_dir,
                     const std::string& store_dir, std::optional<uint32_t> id,
                     BackupInfo* restored) {
  std::string why;
  if (!IsFreeForRestore(store_dir, &why)) {
    return Status::FailedPrecondition("cannot restore into " + why);
  }
  std::unique_ptr<rocksdb::BackupEngineReadOnly> engine;
  if (Status s = OpenEngine(backup_dir, &engine); !s.ok()) return s;
  if (!id) {
    std::vector<rocksdb::BackupInfo> infos;
    engine->GetBackupInfo(&infos);
    if (infos.empty()) {
      return Status::NotFound("no backup in " + backup_dir);
    }
    id = infos.back().backup_id;
  }
  if (Status s = VerifyBackup(backup_dir, *id); !s.ok()) return s;
  bool made_it = !std::filesystem::exists(store_dir);
  if (Status s = CreatePrivateDirectory(store_dir, "storage directory");
      !s.ok()) {
    return s;
  }
  Status s = FromRocks(engine->RestoreDBFromBackup(rocksdb::RestoreOptions(),
                                                   *id, store_dir, store_dir),
                       "restoring backup " + std::to_string(*id) + " of " +
                           backup_dir + " into " + store_dir);
  if (!s.ok()) {
    RemoveRestored(store_dir, made_it);
    return s;
  }
  if (restored != nullptr) {
    rocksdb::BackupInfo info;
    if (engine->GetBackupInfo(*id, &info).ok()) *restored = FromRocksInfo(info);
  }
  return Status::OK();
}

}  // namespace spool::storage
