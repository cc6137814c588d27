// The application key space (spool/app_batch.h): committing an AppBatch
// through the writer with its tasks, and reading the key space on the
// reader pool.

#include <string>

#include <caf/all.hpp>

#include "actors/reader.h"
#include "runtime/runtime_impl.h"

namespace spool {

BatchTicket RuntimeImpl::CommitAppBatch(AppBatch batch) {
  using Ids = std::vector<TaskId>;
  if (read_only_) {
    return BatchTicket{{},
                       Failed<Ids>(ReadOnlyError("CommitAppBatch"), executor_)};
  }
  std::vector<AppBatch::Write> writes = batch.TakeWrites();
  return EnqueueMany(batch.TakeTasks(), /*chain=*/false, std::move(writes));
}

namespace {

Status CheckAppKey(const std::string& key) {
  if (key.empty()) return Status::InvalidArgument("key must not be empty");
  if (key.size() > AppBatch::kMaxKeyBytes) {
    return Status::InvalidArgument("key is " + std::to_string(key.size()) +
                                   " bytes; the limit is " +
                                   std::to_string(AppBatch::kMaxKeyBytes));
  }
  return Status::OK();
}

}  // namespace

Future<std::optional<std::string>> RuntimeImpl::GetAppValue(std::string key) {
  using Value = std::optional<std::string>;
  CallGuard guard(this, "GetAppValue", QueryReads::kTasks);
  if (guard.refused()) return Failed<Value>(guard.refusal(), executor_);
  if (Status s = CheckAppKey(key); !s.ok()) return Failed<Value>(s, executor_);
  auto promise = NewPromise<Value>();
  actors::ReadJob job;
  job.run = [promise,
             key = std::move(key)](const storage::TaskStore::ReadView& view) {
    std::string value;
    Status s = view.GetAppValue(key, &value);
    if (s.IsNotFound()) {
      promise.Set(Value());
    } else if (!s.ok()) {
      promise.Set(s);
    } else {
      promise.Set(Value(std::move(value)));
    }
  };
  job.fail = [promise](const Status& s) { promise.Set(s); };
  caf::anon_send(readers_, actors::read_atom::value, std::move(job));
  return promise.GetFuture();
}

Future<AppPage> RuntimeImpl::ScanAppValues(AppScan scan) {
  CallGuard guard(this, "ScanAppValues", QueryReads::kTasks);
  if (guard.refused()) return Failed<AppPage>(guard.refusal(), executor_);
  if (scan.limit == 0 || scan.limit > AppScan::kMaxLimit) {
    return Failed<AppPage>(
        Status::InvalidArgument("limit must be between 1 and " +
                                std::to_string(AppScan::kMaxLimit) + ", got " +
                                std::to_string(scan.limit)),
        executor_);
  }
  auto promise = NewPromise<AppPage>();
  actors::ReadJob job;
  job.run = [promise,
             scan = std::move(scan)](const storage::TaskStore::ReadView& view) {
    AppPage page;
    Status s = view.ScanAppValues(scan, &page.entries, &page.more);
    if (s.ok()) {
      promise.Set(std::move(page));
    } else {
      promise.Set(s);
    }
  };
  job.fail = [promise](const Status& s) { promise.Set(s); };
  caf::anon_send(readers_, actors::read_atom::value, std::move(job));
  return promise.GetFuture();
}

}  // namespace spool
