// The "rocksdb_raw" peer: the storage engine's limit. Enqueue writes what a
// RocksDB-backed queue must write at least, a task record and its ready-index
// entry, in one synced WriteBatch. All clients share one DB, so concurrent
// writers share WAL syncs (RocksDB's group commit).

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/version.h>
#include <rocksdb/write_batch.h>

#include "benchmarks/peers/peers_internal.h"

namespace spool::bench {
namespace {

void PutBigEndian(std::string* dst, uint64_t value, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) {
    dst->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  }
}

// The DB and the task sequence, shared by the peer and its clients so that a
// client that outlives Teardown cannot touch a closed DB.
struct RocksDbState {
  std::unique_ptr<rocksdb::DB> db;
  std::atomic<uint64_t> last_sequence{0};
};

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::OK();
  std::string message = "rocksdb_raw: " + what + ": " + s.ToString();
  if (s.IsCorruption()) return Status::Corruption(message);
  if (s.IsBusy() || s.IsTryAgain()) return Status::Busy(message);
  return Status::IOError(message);
}

class RocksDbRawClient final : public PeerClient {
 public:
  explicit RocksDbRawClient(std::shared_ptr<RocksDbState> state)
      : state_(std::move(state)) {
    sync_.sync = true;
  }

  Status Enqueue(std::string_view type, std::string_view payload) override {
    rocksdb::WriteBatch batch;
    Status s = AddTask(&batch, type, payload);
    if (!s.ok()) return s;
    return FromRocks(state_->db->Write(sync_, &batch), "synced write");
  }

  Status Preload(size_t n, std::string_view type,
                 std::string_view payload) override {
    constexpr size_t kTasksPerBatch = 1000;
    rocksdb::WriteBatch batch;
    for (size_t i = 0; i < n; ++i) {
      Status s = AddTask(&batch, type, payload);
      if (!s.ok()) return s;
      if (batch.Count() >= 2 * kTasksPerBatch || i + 1 == n) {
        s = FromRocks(state_->db->Write(sync_, &batch), "preload write");
        if (!s.ok()) return s;
        batch.Clear();
      }
    }
    return Status::OK();
  }

  Status ClaimAndComplete() override {
    return Status::NotSupported(
        "rocksdb_raw is a limit peer: it stores tasks and cannot claim them");
  }

 private:
  // Adds one task: the record under "t" + sequence, and its ready-index
  // entry under "r" + inverted priority + sequence, so that a forward scan
  // of "r" meets the highest priority, then the oldest task, first.
  Status AddTask(rocksdb::WriteBatch* batch, std::string_view type,
                 std::string_view payload) {
    const uint64_t sequence = state_->last_sequence.fetch_add(1) + 1;
    const int32_t priority = 0;
    const uint32_t inverted_priority =
        UINT32_MAX - (static_cast<uint32_t>(priority) ^ 0x80000000u);

    key_.assign("t");
    PutBigEndian(&key_, sequence, 8);
    value_.clear();
    PutBigEndian(&value_, type.size(), 4);
    value_.append(type);
    value_.append(payload);
    rocksdb::Status s = batch->Put(key_, value_);
    if (!s.ok()) return FromRocks(s, "batch put");

    key_.assign("r");
    PutBigEndian(&key_, inverted_priority, 4);
    PutBigEndian(&key_, sequence, 8);
    return FromRocks(batch->Put(key_, rocksdb::Slice()), "batch put");
  }

  std::shared_ptr<RocksDbState> state_;
  rocksdb::WriteOptions sync_;
  std::string key_;  // Reused buffers.
  std::string value_;
};

class RocksDbRawPeer final : public Peer {
 public:
  std::string name() const override { return "rocksdb_raw"; }

  Status Setup(const std::string& workdir) override {
    if (state_ != nullptr) {
      return Status::FailedPrecondition("rocksdb_raw: Setup called twice");
    }
    rocksdb::Options options;
    options.create_if_missing = true;
    options.error_if_exists = true;
    const std::string path = workdir + "/rocksdb";
    rocksdb::DB* db = nullptr;
    Status s = FromRocks(rocksdb::DB::Open(options, path, &db), "open " + path);
    if (!s.ok()) return s;
    auto state = std::make_shared<RocksDbState>();
    state->db.reset(db);
    state_ = std::move(state);
    return Status::OK();
  }

  // Closes the DB, unless a client still holds it; then the last client
  // closes it.
  void Teardown() override { state_.reset(); }

  Result<std::unique_ptr<PeerClient>> Connect() override {
    if (state_ == nullptr) {
      return Status::FailedPrecondition("rocksdb_raw: Connect before Setup");
    }
    return std::unique_ptr<PeerClient>(new RocksDbRawClient(state_));
  }

  std::string Describe() const override {
    return "rocksdb_raw: RocksDB " + std::to_string(ROCKSDB_MAJOR) + "." +
           std::to_string(ROCKSDB_MINOR) + "." + std::to_string(ROCKSDB_PATCH) +
           ", one WriteBatch (record + index put) per Enqueue with "
           "WriteOptions::sync=true, one DB shared by all clients (group "
           "commit), default options (the engine's limit; no claim)";
  }

 private:
  std::shared_ptr<RocksDbState> state_;  // Null unless set up.
};

}  // namespace

std::unique_ptr<Peer> MakeRocksDbRawPeer() {
  return std::make_unique<RocksDbRawPeer>();
}

}  // namespace spool::bench
