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

template <class T>
Future<T> Failed(const Status& status,
                 const std::shared_ptr<Executor>& executor) {
  return MakeReadyFuture<T>(Result<T>(status), executor);
}

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
  if (options.batch_size == 0) {
    return Failed<ReencryptResult>(
        Status::InvalidArgument("ReencryptAll batch_size must be > 0"),
        executor_);
  }
  CallGuard guard(this);
  if (guard.closed()) {
    return Failed<ReencryptResult>(Status::Closed("the runtime is closed"),
                                   executor_);
  }
  if (!store_->encrypted()) {
    return Failed<ReencryptResult>(
        Status::FailedPrecondition(
            "ReencryptAll needs an encryption key (Options::encryption_key "
            "or storage.encryption_key_file)"),
        executor_);
  }

  // One writer command per step, the next sent when the last committed, so
  // that other work commits in between: through `tasks`, then `corrupt`.
  struct Run {
    RuntimeImpl* runtime;
    Promise<ReencryptResult> promise;
    actors::ControlCommand step;
    ReencryptResult result;
    bool compact = true;
  };
  auto run = std::make_shared<Run>();
  run->runtime = this;
  run->promise = NewPromise<ReencryptResult>();
  run->step.kind = actors::ControlCommand::Kind::kReencrypt;
  run->step.purge_step = options.batch_size;
  run->step.reencrypt_family = storage::ColumnFamily::kTasks;
  run->compact = options.compact;
  Future<ReencryptResult> future = run->promise.GetFuture();

  auto finish = [](const std::shared_ptr<Run>& done) {
    RuntimeImpl* runtime = done->runtime;
    if (!done->compact) {
      done->promise.Set(done->result);
      return;
    }
    // On a reader's thread: a compaction may take a while, and must not
    // hold up the writer or the callback executor.
    CallGuard compaction_guard(runtime);
    if (compaction_guard.closed()) {
      done->promise.Set(Status::Closed(
          "the runtime closed before the storage was compacted; every record "
          "is re-encrypted"));
      return;
    }
    actors::ReadJob job;
    storage::TaskStore* store = runtime->store_.get();
    job.run = [done, store](const storage::TaskStore::ReadView& view) {
      Status s = store->CompactAll(view);
      if (s.ok()) {
        done->promise.Set(done->result);
      } else {
        done->promise.Set(s.WithContext("compacting after re-encryption"));
      }
    };
    job.fail = [done](const Status& s) { done->promise.Set(s); };
    caf::anon_send(runtime->readers_, actors::read_atom::value, std::move(job));
  };

  auto next_step = std::make_shared<std::function<void()>>();
  *next_step = [run, next_step, finish] {
    actors::ControlCommand command = run->step;
    run->runtime->SendControl(std::move(command))
        .Then([run, next_step,
               finish](const Result<actors::ControlResult>& result) {
          if (!result.ok()) {
            run->promise.Set(result.status().WithContext("ReencryptAll"));
            *next_step = nullptr;  // breaks the cycle
            return;
          }
          run->result.reencrypted += result->count;
          run->result.set_aside_resealed += result->resealed_set_aside;
          run->result.unreadable.insert(run->result.unreadable.end(),
                                        result->unreadable.begin(),
                                        result->unreadable.end());
          if (result->more) {
            run->step.reencrypt_after = result->cursor_id;
            (*next_step)();
            return;
          }
          if (run->step.reencrypt_family == storage::ColumnFamily::kTasks) {
            run->step.reencrypt_family = storage::ColumnFamily::kCorrupt;
            run->step.reencrypt_after = 0;
            (*next_step)();
            return;
          }
          *next_step = nullptr;
          finish(run);
        });
  };
  (*next_step)();
  return future;
}

Future<std::vector<SetAsideTask>> RuntimeImpl::ListSetAside(size_t limit) {
  using List = std::vector<SetAsideTask>;
  CallGuard guard(this);
  if (guard.closed()) {
    return Failed<List>(Status::Closed("the runtime is closed"), executor_);
  }
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
