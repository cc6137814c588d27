// The Runtime's encryption at rest: keys from Options, re-encryption and the
// list of set-aside tasks. The cipher and the storage side live in
// storage/crypto.* and storage/task_store_crypto.cc.

#include <caf/all.hpp>
#include <openssl/crypto.h>

#include "runtime/runtime_impl.h"
#include "storage/crypto.h"

namespace spool {
namespace {

constexpr std::string_view kKeyFileKey = "storage.encryption_key_file";

void Scrub(std::string* key) {
  OPENSSL_cleanse(key->data(), key->size());
  key->clear();
}

Status KeyRingFromOptionsInner(const Options& options,
                               std::shared_ptr<const storage::KeyRing>* keys) {
  if (!options.encryption_key_file.empty()) {
    std::string current;
    std::vector<std::string> previous;
    Status s = storage::ReadKeyFile(options.encryption_key_file, kKeyFileKey,
                                    &current, &previous);
    if (s.ok()) {
      std::string where =
          std::string(kKeyFileKey) + " " + options.encryption_key_file;
      s = storage::KeyRing::Create(current, previous, keys,
                                   where + ": the key on its first line",
                                   where + ": previous key");
    }
    Scrub(&current);
    for (std::string& key : previous) Scrub(&key);
    return s;
  }
  if (options.encryption_key.empty()) {
    if (!options.previous_encryption_keys.empty()) {
      return Status::InvalidArgument(
          "previous_encryption_keys needs a current encryption_key");
    }
    return Status::OK();
  }
  return storage::KeyRing::Create(options.encryption_key,
                                  options.previous_encryption_keys, keys);
}

}  // namespace

std::string GenerateEncryptionKey() { return storage::NewRandomKey(); }

std::string EncryptionKeyToHex(std::string_view key) {
  return storage::ToHex(key);
}

Result<std::string> EncryptionKeyId(std::string_view key) {
  std::shared_ptr<const storage::KeyRing> ring;
  Status s = storage::KeyRing::Create(key, {}, &ring, "key");
  if (!s.ok()) return s;
  return storage::KeyIdHex(ring->current_id());
}

Status KeyRingFromOptions(Options* options_in,
                          std::shared_ptr<const storage::KeyRing>* keys) {
  const Options& options = *options_in;
  keys->reset();
  Status s = KeyRingFromOptionsInner(options, keys);
  Scrub(&options_in->encryption_key);
  for (std::string& key : options_in->previous_encryption_keys) Scrub(&key);
  options_in->previous_encryption_keys.clear();
  return s;
}

Future<ReencryptResult> RuntimeImpl::ReencryptAll(ReencryptOptions options) {
  if (read_only_) {
    return Failed<ReencryptResult>(ReadOnlyError("ReencryptAll"), executor_);
  }
  if (options.batch_size == 0) {
    return Failed<ReencryptResult>(
        Status::InvalidArgument("ReencryptAll batch_size must be > 0"),
        executor_);
  }
  CallGuard guard(this);
  if (guard.closed()) {
    return Failed<ReencryptResult>(ClosedError(), executor_);
  }
  if (!store_->encrypted()) {
    return Failed<ReencryptResult>(
        Status::FailedPrecondition(
            "ReencryptAll needs an encryption key (Options::encryption_key "
            "or storage.encryption_key_file)"),
        executor_);
  }

  // Through `tasks`, then `corrupt`.
  actors::ControlCommand first;
  first.kind = actors::ControlCommand::Kind::kReencrypt;
  first.purge_step = options.batch_size;
  first.reencrypt_family = storage::ColumnFamily::kTasks;
  auto promise = NewPromise<ReencryptResult>();
  auto result = std::make_shared<ReencryptResult>();
  RunSteps(
      std::move(first),
      [result](const actors::ControlResult& step,
               actors::ControlCommand* next) {
        result->reencrypted += step.count;
        result->set_aside_resealed += step.resealed_set_aside;
        result->unreadable.insert(result->unreadable.end(),
                                  step.unreadable.begin(),
                                  step.unreadable.end());
        if (step.more) {
          next->reencrypt_after = step.cursor_id;
          return true;
        }
        if (next->reencrypt_family == storage::ColumnFamily::kTasks) {
          next->reencrypt_family = storage::ColumnFamily::kCorrupt;
          next->reencrypt_after = 0;
          return true;
        }
        return false;
      },
      [this, promise, result, compact = options.compact](const Status& s) {
        if (!s.ok()) {
          promise.Set(s.WithContext("ReencryptAll"));
        } else if (!compact) {
          promise.Set(*result);
        } else {
          CompactAfterReencrypt(promise, std::move(*result));
        }
      });
  return promise.GetFuture();
}

void RuntimeImpl::CompactAfterReencrypt(Promise<ReencryptResult> promise,
                                        ReencryptResult result) {
  // On a reader's thread: a compaction may take a while, and must not hold
  // up the writer or the callback executor.
  CallGuard guard(this);
  if (guard.closed()) {
    promise.Set(Status::Closed(
        "the runtime closed before the storage was compacted; every record "
        "is re-encrypted"));
    return;
  }
  actors::ReadJob job;
  job.run = [promise, result = std::move(result),
             store = store_.get()](const storage::TaskStore::ReadView& view) {
    Status s = store->CompactAll(view);
    if (s.ok()) {
      promise.Set(result);
    } else {
      promise.Set(s.WithContext("compacting after re-encryption"));
    }
  };
  job.fail = [promise](const Status& s) { promise.Set(s); };
  caf::anon_send(readers_, actors::read_atom::value, std::move(job));
}

Future<std::vector<SetAsideTask>> RuntimeImpl::ListSetAside(size_t limit) {
  using List = std::vector<SetAsideTask>;
  CallGuard guard(this, "ListSetAside", QueryReads::kTasks);
  if (guard.refused()) return Failed<List>(guard.refusal(), executor_);
  auto promise = NewPromise<List>();
  actors::ReadJob job;
  job.run = [promise, limit](const storage::TaskStore::ReadView& view) {
    List tasks;
    Status s = view.ScanTasks(
        storage::ColumnFamily::kCorrupt, 0,
        [&](TaskId id, storage::TaskBytes& values, const Status& opened) {
          if (tasks.size() >= limit) return false;
          SetAsideTask task;
          task.id = id;
          task.reason = opened.ok() ? values.Verify(id) : opened;
          tasks.push_back(std::move(task));
          return true;
        });
    if (!s.ok()) {
      promise.Set(s);
      return;
    }
    promise.Set(std::move(tasks));
  };
  job.fail = [promise](const Status& s) { promise.Set(s); };
  caf::anon_send(readers_, actors::read_atom::value, std::move(job));
  return promise.GetFuture();
}

}  // namespace spool
