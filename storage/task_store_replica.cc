// TaskStore's side of replication (spool/replication.h): a primary's
// shipping mark, a standby's applying of its commits, and the swap of a
// standby's files for a new base copy.

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include "storage/keys.h"
#include "storage/rocks_status.h"
#include "storage/task_store.h"
#include "storage/task_store_internal.h"

namespace spool::storage {
namespace {

Status WrongPosition(uint64_t expected, uint64_t got) {
  return Status::InvalidArgument(
      "replicated commit at position " + std::to_string(got) +
      " does not follow this store's last commit; expected position " +
      std::to_string(expected));
}

// The meta writes that say a store follows `log_id`: a follower ships
// nothing, so whatever a primary on it shipped before no longer matters.
rocksdb::WriteBatch FollowingBatch(rocksdb::ColumnFamilyHandle* meta,
                                   uint64_t log_id) {
  std::string value;
  PutBigEndian64(&value, log_id);
  rocksdb::WriteBatch batch;
  batch.Put(meta, kReplicationLogIdKey, value);
  batch.Delete(meta, kReplicationShippingKey);
  return batch;
}

}  // namespace

Status TaskStore::BeginShipping() {
  if (options_.read_only) return ReadOnlyStore(options_.path, "BeginShipping");
  std::shared_lock<std::shared_mutex> lock(db_mutex_);
  if (!db_) return StoreClosed(options_.path);
  rocksdb::WriteOptions wo;
  wo.sync = options_.durability != Durability::kMemory;
  return FromRocks(
      db_->Put(wo, Handle(ColumnFamily::kMeta), kReplicationShippingKey, ""),
      "recording that commits ship before their sync");
}

Status TaskStore::EndShipping() {
  if (options_.read_only) return ReadOnlyStore(options_.path, "EndShipping");
  std::shared_lock<std::shared_mutex> lock(db_mutex_);
  if (!db_) return StoreClosed(options_.path);
  rocksdb::WriteOptions wo;
  wo.sync = options_.durability != Durability::kMemory;
  return FromRocks(
      db_->Delete(wo, Handle(ColumnFamily::kMeta), kReplicationShippingKey),
      "recording a clean close of the replication log");
}

Status TaskStore::WasShipping(bool* shipping) const {
  std::optional<std::string> value;
  Status s = ReadReplicationMeta(kReplicationShippingKey, &value);
  *shipping = s.ok() && value.has_value();
  return s;
}

Status TaskStore::ApplyReplicated(const std::vector<ReplicatedCommit>& commits,
                                  uint64_t log_id) {
  if (options_.read_only) return ReadOnlyStore(options_.path, "Apply");
  std::shared_lock<std::shared_mutex> lock(db_mutex_);
  if (!db_) return StoreClosed(options_.path);
  uint64_t expected = committed_batches_ + 1;
  for (const ReplicatedCommit& commit : commits) {
    if (commit.position != expected) {
      return WrongPosition(expected, commit.position);
    }
    if (commit.data.size() < 12) {
      return Status::Corruption("replicated commit " +
                                std::to_string(commit.position) +
                                " holds no write batch (" +
                                std::to_string(commit.data.size()) + " bytes)");
    }
    ++expected;
  }
  // Each batch reaches the log unsynced; the one sync at the end covers
  // them all, as a group commit's does.
  rocksdb::WriteOptions unsynced;
  unsynced.sync = false;
  for (const ReplicatedCommit& commit : commits) {
    rocksdb::WriteBatch batch(commit.data);
    Status s = FromRocks(
        db_->Write(unsynced, &batch),
        "applying replicated commit " + std::to_string(commit.position));
    if (!s.ok()) {
      states_.Clear();
      return s;
    }
  }
  rocksdb::WriteOptions synced;
  synced.sync = options_.durability != Durability::kMemory;
  rocksdb::WriteBatch following =
      FollowingBatch(Handle(ColumnFamily::kMeta), log_id);
  Status s =
      FromRocks(db_->Write(synced, &following), "syncing replicated commits");
  // The cached states are the primary's business: a standby reads from
  // the engine.
  states_.Clear();
  if (!s.ok()) return s;
  s = LoadWriterMeta();
  if (!s.ok()) return s;
  if (!commits.empty() && committed_batches_ != commits.back().position) {
    return Status::Corruption(
        "after replicated commit " + std::to_string(commits.back().position) +
        " the store records " + std::to_string(committed_batches_) +
        " commits: the stream is not this store's primary's");
  }
  return Status::OK();
}

Status TaskStore::FollowedLog(uint64_t* log_id) const {
  *log_id = 0;
  std::optional<std::string> value;
  Status s = ReadReplicationMeta(kReplicationLogIdKey, &value);
  if (!s.ok() || !value) return s;
  if (value->size() != 8) return MalformedMeta(kReplicationLogIdKey);
  *log_id = GetBigEndian64(value->data());
  return Status::OK();
}

Status TaskStore::MarkFollowing(uint64_t log_id) {
  if (options_.read_only) return ReadOnlyStore(options_.path, "MarkFollowing");
  std::shared_lock<std::shared_mutex> lock(db_mutex_);
  if (!db_) return StoreClosed(options_.path);
  rocksdb::WriteOptions wo;
  wo.sync = options_.durability != Durability::kMemory;
  rocksdb::WriteBatch following =
      FollowingBatch(Handle(ColumnFamily::kMeta), log_id);
  return FromRocks(db_->Write(wo, &following),
                   "recording the replication log id");
}

Status TaskStore::ReadEpochs(std::vector<EpochStart>* epochs) const {
  epochs->clear();
  std::optional<std::string> value;
  Status s = ReadReplicationMeta(kClusterEpochsKey, &value);
  if (!s.ok() || !value) return s;
  if (!DecodeEpochs(*value, epochs)) return MalformedMeta(kClusterEpochsKey);
  return Status::OK();
}

Status TaskStore::ReadReplicationMeta(std::string_view key,
                                      std::optional<std::string>* value) const {
  value->reset();
  std::shared_lock<std::shared_mutex> lock(db_mutex_);
  if (!db_) return StoreClosed(options_.path);
  std::string found;
  rocksdb::Status rs = db_->Get(rocksdb::ReadOptions(),
                                Handle(ColumnFamily::kMeta), key, &found);
  if (rs.IsNotFound()) return Status::OK();
  if (!rs.ok()) return FromRocks(rs, "reading meta " + std::string(key));
  *value = std::move(found);
  return Status::OK();
}

Status TaskStore::MalformedMeta(std::string_view key) const {
  return Status::Corruption("storage directory " + options_.path + ": meta " +
                            std::string(key) + " is malformed");
}

Status TaskStore::ReplaceWith(const std::string& restored_dir) {
  if (options_.read_only) return ReadOnlyStore(options_.path, "ReplaceWith");
  if (options_.durability == Durability::kMemory) {
    return Status::NotSupported("an in-memory store cannot take a base copy");
  }
  std::unique_lock<std::shared_mutex> lock(db_mutex_);
  // A failed move leaves the old store where it was (moved back if need
  // be): reopen it, and say so if that fails too.
  auto keep_old = [this](const std::string& what) {
    Status reopened = OpenDb();
    if (reopened.ok()) reopened = LoadMeta();
    return Status::IOError(what + (reopened.ok()
                                       ? std::string()
                                       : "; reopening the old store failed "
                                         "too: " +
                                             reopened.ToString()));
  };
  std::string aside = options_.path + ".replaced";
  std::error_code error;
  std::filesystem::remove_all(aside, error);
  CloseDb();
  std::filesystem::rename(options_.path, aside, error);
  if (error) {
    return keep_old("moving " + options_.path +
                    " aside for a base copy: " + error.message());
  }
  std::filesystem::rename(restored_dir, options_.path, error);
  if (error) {
    std::error_code back;
    std::filesystem::rename(aside, options_.path, back);
    return keep_old("moving the base copy " + restored_dir + " into " +
                    options_.path + ": " + error.message());
  }
  Status s = OpenDb();
  if (s.ok()) s = LoadMeta();
  if (!s.ok()) {
    CloseDb();
    return s.WithContext("opening the base copy in " + options_.path);
  }
  std::filesystem::remove_all(aside, error);
  return Status::OK();
}

}  // namespace spool::storage
