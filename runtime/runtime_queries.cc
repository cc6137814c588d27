// The runtime's queries and live queries: the public calls, and the live
// queries the watcher runs on the readers.
//
// A one-shot query is one ReadJob: the caller's thread validates and sends,
// a reader runs it on a snapshot and resolves the future; the caller's
// thread does nothing else. A live query is a LiveQuery object the watcher
// keeps and runs on the readers; each run hashes what it read (the raw
// records, or the counts) and builds the result only when the hash changed,
// so an unchanged re-run costs one read and no copy.

#include <cassert>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/reader.h"
#include "actors/watch.h"
#include "runtime/runtime_impl.h"
#include "runtime/watch_control.h"
#include "storage/queries.h"
#include "storage/record.h"
#include "util/logging.h"

namespace spool {
namespace {

using storage::TaskStore;

// Resolves `promise` with `status` when destroyed; owned by a callback sent
// to an actor, it answers the caller if the message is dropped unanswered
// (an actor that died drops its mailbox). After the callback has answered,
// this Set is ignored: the first result wins.
template <class T>
std::shared_ptr<void> ResolveOnDrop(Promise<T> promise, Status status) {
  class Guard {
   public:
    Guard(Promise<T> promise, Status status)
        : promise_(std::move(promise)), status_(std::move(status)) {}
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    ~Guard() { promise_.Set(Result<T>(status_)); }

   private:
    Promise<T> promise_;
    Status status_;
  };
  // Made in place: a temporary Guard would resolve the promise as it died.
  return std::make_shared<Guard>(std::move(promise), std::move(status));
}

// ---- Hashing of results ----

uint64_t Mix64(uint64_t x) {
  // The finalizer of SplitMix64: every input bit affects every output bit.
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// Folds what a query read into 64 bits. Hashes live only in memory, so
// std::hash (fast, not stable across builds) is fine for the bytes.
class Hasher {
 public:
  void Word(uint64_t value) { hash_ = Mix64(hash_ ^ Mix64(value + kSeed)); }
  void Bytes(std::string_view bytes) {
    Word(bytes.size());
    Word(std::hash<std::string_view>{}(bytes));
  }
  uint64_t value() const { return hash_; }

 private:
  static constexpr uint64_t kSeed = 0x9e3779b97f4a7c15ull;
  uint64_t hash_ = 0x243f6a8885a308d3ull;
};

// Tags keep results of different shapes from hashing alike.
enum HashTag : uint64_t { kErrorTag = 1, kRecordTag, kPageTag, kCountsTag };

uint64_t ErrorHash(const Status& error) {
  Hasher hasher;
  hasher.Word(kErrorTag);
  hasher.Word(static_cast<uint64_t>(error.code()));
  hasher.Bytes(error.message());
  return hasher.value();
}

// ---- Results built from verified records ----

TaskInfo BuildInfo(const storage::TaskView& task) {
  TaskInfo info;
  storage::FillTaskInfo(task, &info);
  return info;
}

std::string BuildJson(const storage::TaskView& task,
                      const storage::JsonPayloadTypes* json_types) {
  std::string json;
  storage::AppendTaskJson(task, storage::FormatOf(task, json_types), &json);
  return json;
}

// Appends what a task's result depends on to the hash: its state and
// failure history. The spec is written once per id, so the id stands for
// it.
void HashTask(const storage::TaskBytes& task, Hasher* hasher) {
  hasher->Word(task.id());
  hasher->Bytes(task.state());
  for (size_t i = 0; i < task.failure_count(); ++i) {
    hasher->Bytes(task.failure(i));
  }
}

// Appends `page`'s records' ids, cursor and unreadable ids to the hash.
void HashPageInfo(const storage::PageInfo& info, Hasher* hasher) {
  hasher->Bytes(info.next_cursor);
  hasher->Word(info.unreadable.size());
  for (TaskId id : info.unreadable) hasher->Word(id);
}

// The verified tasks of one page, copied out of the reader's buffers. A
// deque, so that adding one never moves the others (their views point into
// them).
class TaskBuffer {
 public:
  // REQUIRES: `task` is verified.
  void Add(const storage::TaskBytes& task) {
    TaskId id = task.id();
    tasks_.emplace_back();
    tasks_.back().CopyFrom(task);
    // Verified once already; this only sets up the view of the copy.
    Status verified = tasks_.back().Verify(id);
    assert(verified.ok());
    (void)verified;
  }
  size_t size() const { return tasks_.size(); }
  const storage::TaskView& at(size_t i) const { return tasks_[i].view(); }

 private:
  std::deque<storage::TaskBytes> tasks_;
};

// ---- Live queries ----

template <class T>
std::shared_ptr<const void> ErrorResult(const Status& error, uint64_t* hash) {
  *hash = ErrorHash(error);
  return std::make_shared<const Result<T>>(error);
}

// One task by id, as TaskInfo or as JSON.
template <class T>
class TaskLiveQuery final : public actors::LiveQuery {
 public:
  TaskLiveQuery(TaskId id,
                std::shared_ptr<const storage::JsonPayloadTypes> json_types,
                uint64_t json_version)
      : json_types_(std::move(json_types)) {
    scope_.kind = actors::WatchScope::Kind::kTask;
    scope_.id = id;
    key_ = kIsJson ? "task/json/" + std::to_string(json_version) + "/"
                   : "task/info/";
    key_ += std::to_string(id);
  }

  const std::string& key() const override { return key_; }
  const actors::WatchScope& scope() const override { return scope_; }

  uint64_t Run(const TaskStore::ReadView& view, bool have_last,
               uint64_t last_hash,
               std::shared_ptr<const void>* result) const override {
    storage::TaskBytes task;
    Status s = storage::ReadTask(view, scope_.id, &task);
    if (!s.ok()) {
      uint64_t hash = ErrorHash(s);
      if (!have_last || hash != last_hash) {
        *result = std::make_shared<const Result<T>>(s);
      }
      return hash;
    }
    Hasher hasher;
    hasher.Word(kRecordTag);
    HashTask(task, &hasher);
    if constexpr (kIsJson) {
      hasher.Word(static_cast<uint64_t>(
          storage::FormatOf(task.view(), json_types_.get())));
    }
    uint64_t hash = hasher.value();
    if (!have_last || hash != last_hash) {
      if constexpr (kIsJson) {
        *result = std::make_shared<const Result<T>>(
            BuildJson(task.view(), json_types_.get()));
      } else {
        *result = std::make_shared<const Result<T>>(BuildInfo(task.view()));
      }
    }
    return hash;
  }

  std::shared_ptr<const void> Error(const Status& error,
                                    uint64_t* hash) const override {
    return ErrorResult<T>(error, hash);
  }

 private:
  static constexpr bool kIsJson = std::is_same_v<T, std::string>;
  std::shared_ptr<const storage::JsonPayloadTypes> json_types_;
  actors::WatchScope scope_;
  std::string key_;
};

// A page of a listing, as a TaskPage or as JSON.
template <class T>
class ListLiveQuery final : public actors::LiveQuery {
 public:
  // `stored_group` is the listing's group as commits name it
  // (TaskStore::StoredGroup).
  ListLiveQuery(storage::ListSpec spec, std::string stored_group,
                std::shared_ptr<const storage::JsonPayloadTypes> json_types,
                uint64_t json_version)
      : spec_(std::move(spec)), json_types_(std::move(json_types)) {
    scope_.kind = actors::WatchScope::Kind::kList;
    scope_.status = spec_.status;
    scope_.type = spec_.type;
    scope_.group = std::move(stored_group);
    key_ = kIsJson ? "list/json/" + std::to_string(json_version) + "/"
                   : "list/info/";
    // The filters (as the cursor fingerprints them), the limit and the
    // position: equal keys list the same page.
    key_ += storage::EncodeCursor(spec_, spec_.after);
    key_ += "/" + std::to_string(spec_.limit) + "/";
    key_ += spec_.status ? TaskStatusName(*spec_.status) : "*";
    storage::PutKeyString(&key_, spec_.type);
    storage::PutKeyString(&key_, spec_.group);
    if (!spec_.include_payload) key_ += "/no-payload";
  }

  const std::string& key() const override { return key_; }
  const actors::WatchScope& scope() const override { return scope_; }

  uint64_t Run(const TaskStore::ReadView& view, bool have_last,
               uint64_t last_hash,
               std::shared_ptr<const void>* result) const override {
    TaskBuffer records;
    storage::PageInfo info;
    Hasher hasher;
    hasher.Word(kPageTag);
    Status s = storage::ListPage(
        view, spec_,
        [&](const storage::TaskBytes& task) {
          HashTask(task, &hasher);
          if constexpr (kIsJson) {
            hasher.Word(static_cast<uint64_t>(
                storage::FormatOf(task.view(), spec_, json_types_.get())));
          }
          records.Add(task);
        },
        &info);
    if (!s.ok()) {
      uint64_t hash = ErrorHash(s);
      if (!have_last || hash != last_hash) {
        *result = std::make_shared<const Result<T>>(s);
      }
      return hash;
    }
    HashPageInfo(info, &hasher);
    uint64_t hash = hasher.value();
    if (have_last && hash == last_hash) return hash;
    if constexpr (kIsJson) {
      std::string json;
      storage::PageJsonWriter writer(&json);
      for (size_t i = 0; i < records.size(); ++i) {
        const auto& table = records.at(i);
        writer.Add(table, storage::FormatOf(table, spec_, json_types_.get()));
      }
      writer.Finish(info);
      *result = std::make_shared<const Result<T>>(std::move(json));
    } else {
      TaskPage page;
      page.tasks.resize(records.size());
      for (size_t i = 0; i < records.size(); ++i) {
        storage::FillTaskInfo(records.at(i), &page.tasks[i],
                              spec_.include_payload);
      }
      page.next_cursor = std::move(info.next_cursor);
      page.unreadable = std::move(info.unreadable);
      *result = std::make_shared<const Result<T>>(std::move(page));
    }
    return hash;
  }

  std::shared_ptr<const void> Error(const Status& error,
                                    uint64_t* hash) const override {
    return ErrorResult<T>(error, hash);
  }

 private:
  static constexpr bool kIsJson = std::is_same_v<T, std::string>;
  storage::ListSpec spec_;
  std::shared_ptr<const storage::JsonPayloadTypes> json_types_;
  actors::WatchScope scope_;
  std::string key_;
};

Status ReadTypeCounts(const TaskStore::ReadView& view, TypeCounts* out) {
  storage::TypeCounts counts;
  Status s = view.CountByType(&counts);
  if (!s.ok()) return s;
  out->clear();
  for (const auto& [type, by_status] : counts) {
    (*out)[type].by_status = by_status;
  }
  return Status::OK();
}

// Counts by status (T = StatusCounts) or by type (T = TypeCounts).
template <class T>
class CountsLiveQuery final : public actors::LiveQuery {
 public:
  CountsLiveQuery() {
    scope_.kind = actors::WatchScope::Kind::kAny;
    key_ = kByType ? "counts/type" : "counts/status";
  }

  const std::string& key() const override { return key_; }
  const actors::WatchScope& scope() const override { return scope_; }

  uint64_t Run(const TaskStore::ReadView& view, bool have_last,
               uint64_t last_hash,
               std::shared_ptr<const void>* result) const override {
    T counts;
    Status s;
    if constexpr (kByType) {
      s = ReadTypeCounts(view, &counts);
    } else {
      s = view.CountByStatus(&counts.by_status);
    }
    uint64_t hash;
    if (!s.ok()) {
      hash = ErrorHash(s);
    } else {
      Hasher hasher;
      hasher.Word(kCountsTag);
      if constexpr (kByType) {
        // std::map: the same counts always hash in the same order.
        for (const auto& [type, by_type] : counts) {
          hasher.Bytes(type);
          for (uint64_t n : by_type.by_status) hasher.Word(n);
        }
      } else {
        for (uint64_t n : counts.by_status) hasher.Word(n);
      }
      hash = hasher.value();
    }
    if (!have_last || hash != last_hash) {
      *result = s.ok() ? std::make_shared<const Result<T>>(std::move(counts))
                       : std::make_shared<const Result<T>>(s);
    }
    return hash;
  }

  std::shared_ptr<const void> Error(const Status& error,
                                    uint64_t* hash) const override {
    return ErrorResult<T>(error, hash);
  }

 private:
  static constexpr bool kByType = std::is_same_v<T, TypeCounts>;
  actors::WatchScope scope_;
  std::string key_;
};

// A task by id, or nullopt when `id` is.
Result<std::optional<TaskInfo>> TaskOrNothing(const TaskStore::ReadView& view,
                                              Status found,
                                              const std::optional<TaskId>& id) {
  if (!found.ok()) return found;
  if (!id) return std::optional<TaskInfo>();
  storage::TaskBytes task;
  Status s = storage::ReadTask(view, *id, &task);
  if (!s.ok()) return s;
  return std::optional<TaskInfo>(BuildInfo(task.view()));
}

// A listing without a filter walks the tasks in id order; any filter
// walks the index.
QueryReads ListReads(const TaskQuery& query) {
  bool filtered =
      query.status.has_value() || !query.type.empty() || !query.group.empty();
  return filtered ? QueryReads::kIndex : QueryReads::kTasks;
}

}  // namespace

// ---- Plumbing ----

void RuntimeImpl::StartQueries() {
  actors::WatcherConfig config;
  config.readers = readers_;
  config.live_queries = live_queries_;
  watcher_ = actors::SpawnWatcher(*actor_system_, std::move(config));
  watch_link_ = std::make_shared<WatchLink>(watcher_);
  // A read-only runtime has no writer, so no change notices.
  if (writer_) {
    caf::anon_send(writer_, actors::attach_atom::value,
                   actors::change_listener_actor{watcher_});
  }
}

void RuntimeImpl::StopQueries() {
  watch_link_->Close();
  Promise<void> stopped;
  auto on_drop = ResolveOnDrop(stopped, Status::Closed("the watcher is gone"));
  caf::anon_send(watcher_, actors::stop_atom::value,
                 actors::Completion([stopped, on_drop](const Status& s) {
                   stopped.Set(Result<void>(s));
                 }));
  on_drop.reset();
  // The watcher never blocks and answers stop at once (or, if it died, the
  // dropped message resolves `stopped`); the bound is a last resort so that
  // Close cannot hang here.
  if (!stopped.GetFuture().WaitFor(std::chrono::seconds(10))) {
    Logger()->error("close: the live-query actor did not stop; going on");
  }
  watcher_ = nullptr;
}

template <class T, class Query>
Future<T> RuntimeImpl::RunQuery(Query query) {
  auto promise = NewPromise<T>();
  caf::anon_send(
      readers_, actors::read_atom::value,
      actors::MakeReadJob(
          [promise, query = std::move(query)](const TaskStore::ReadView& view) {
            promise.Set(query(view));
          },
          [promise](const Status& s) { promise.Set(s); }));
  return promise.GetFuture();
}

template <class T>
Result<Watch> RuntimeImpl::SubscribeLive(
    std::shared_ptr<const actors::LiveQuery> query, WatchCallback<T> callback) {
  uint64_t id = next_watch_id_.fetch_add(1);
  auto control = std::make_shared<internal::TypedWatch<T>>(
      id, watch_link_, executor_, std::move(callback));
  actors::WatchRequest request;
  request.id = id;
  request.query = std::move(query);
  request.subscriber = control;
  caf::anon_send(watcher_, actors::watch_atom::value, std::move(request));
  return Watch(std::move(control));
}

std::shared_ptr<const storage::JsonPayloadTypes> RuntimeImpl::JsonTypes(
    uint64_t* version) const {
  std::lock_guard<std::mutex> lock(json_types_mutex_);
  if (version != nullptr) *version = json_types_version_;
  return json_types_;
}

// ---- One-shot queries ----

Future<TaskPage> RuntimeImpl::ListTasks(const TaskQuery& query) {
  CallGuard guard(this, "ListTasks", ListReads(query));
  if (guard.refused()) return Failed<TaskPage>(guard.refusal(), executor_);
  storage::ListSpec spec;
  Status s = storage::ParseTaskQuery(query, &spec);
  if (!s.ok()) return Failed<TaskPage>(s, executor_);
  return RunQuery<TaskPage>(
      [spec](const TaskStore::ReadView& view) -> Result<TaskPage> {
        TaskPage page;
        storage::PageInfo info;
        Status status = storage::ListPage(
            view, spec,
            [&](const storage::TaskBytes& task) {
              page.tasks.emplace_back();
              storage::FillTaskInfo(task.view(), &page.tasks.back(),
                                    spec.include_payload);
            },
            &info);
        if (!status.ok()) return status;
        page.next_cursor = std::move(info.next_cursor);
        page.unreadable = std::move(info.unreadable);
        return page;
      });
}

Future<std::string> RuntimeImpl::ListTasksJson(const TaskQuery& query) {
  CallGuard guard(this, "ListTasksJson", ListReads(query));
  if (guard.refused()) return Failed<std::string>(guard.refusal(), executor_);
  storage::ListSpec spec;
  Status s = storage::ParseTaskQuery(query, &spec);
  if (!s.ok()) return Failed<std::string>(s, executor_);
  return RunQuery<std::string>(
      [spec, json_types = JsonTypes(nullptr)](
          const TaskStore::ReadView& view) -> Result<std::string> {
        std::string json;
        Status status =
            storage::ListPageJson(view, spec, json_types.get(), &json);
        if (!status.ok()) return status;
        return json;
      });
}

Future<std::string> RuntimeImpl::GetTaskJson(TaskId id) {
  CallGuard guard(this, "GetTaskJson", QueryReads::kTasks);
  if (guard.refused()) return Failed<std::string>(guard.refusal(), executor_);
  return RunQuery<std::string>(
      [id, json_types = JsonTypes(nullptr)](
          const TaskStore::ReadView& view) -> Result<std::string> {
        storage::TaskBytes task;
        Status s = storage::ReadTask(view, id, &task);
        if (!s.ok()) return s;
        return BuildJson(task.view(), json_types.get());
      });
}

Future<TypeCounts> RuntimeImpl::CountByType() {
  CallGuard guard(this);
  if (guard.closed()) return Failed<TypeCounts>(ClosedError(), executor_);
  return RunQuery<TypeCounts>(
      [](const TaskStore::ReadView& view) -> Result<TypeCounts> {
        TypeCounts counts;
        Status s = ReadTypeCounts(view, &counts);
        if (!s.ok()) return s;
        return counts;
      });
}

Future<ConsistencyReport> RuntimeImpl::CheckConsistency() {
  CallGuard guard(this, "CheckConsistency", QueryReads::kIndex);
  if (guard.refused()) {
    return Failed<ConsistencyReport>(guard.refusal(), executor_);
  }
  return RunQuery<ConsistencyReport>(
      [](const TaskStore::ReadView& view) -> Result<ConsistencyReport> {
        ConsistencyReport report;
        Status s = view.ScanTasks(
            storage::ColumnFamily::kTasks, 0,
            [&](TaskId id, storage::TaskBytes& task, const Status& opened) {
              ++report.tasks;
              Status readable = opened.ok() ? task.Verify(id) : opened;
              if (!readable.ok()) {
                ++report.unreadable;
                if (report.unreadable_ids.size() < 100) {
                  report.unreadable_ids.push_back(id);
                }
                if (report.problems.size() < 20) {
                  report.problems.push_back(readable.ToString());
                }
              }
              return true;
            });
        if (!s.ok()) return s;
        s = view.ScanTasks(storage::ColumnFamily::kCorrupt, 0,
                           [&](TaskId, storage::TaskBytes&, const Status&) {
                             ++report.set_aside;
                             return true;
                           });
        if (!s.ok()) return s;
        size_t mismatches = 0;
        s = view.CheckIndexes(&mismatches, &report.problems);
        if (!s.ok()) return s;
        report.index_mismatches = mismatches;
        if (report.problems.size() > 20) report.problems.resize(20);
        return report;
      });
}

Future<FailureHistory> RuntimeImpl::GetFailureHistory(TaskId id) {
  CallGuard guard(this, "GetFailureHistory", QueryReads::kTasks);
  if (guard.refused())
    return Failed<FailureHistory>(guard.refusal(), executor_);
  return RunQuery<FailureHistory>(
      [id](const TaskStore::ReadView& view) -> Result<FailureHistory> {
        FailureHistory history;
        Status s = storage::ReadFailureHistory(view, id, &history);
        if (!s.ok()) return s;
        return history;
      });
}

Future<std::optional<double>> RuntimeImpl::GetProgress(TaskId id) {
  using Out = std::optional<double>;
  CallGuard guard(this);
  if (guard.closed()) return Failed<Out>(ClosedError(), executor_);
  if (read_only_) return Failed<Out>(ReadOnlyError("GetProgress"), executor_);
  // The board is in memory and takes no lock the workers wait on: no reader
  // is needed, but the answer comes as every query's does.
  return MakeReadyFuture<Out>(progress_->Get(id), executor_);
}

Future<std::optional<TaskInfo>> RuntimeImpl::OldestTask(TaskStatus status) {
  using Out = std::optional<TaskInfo>;
  CallGuard guard(this, "OldestTask", QueryReads::kIndex);
  if (guard.refused()) return Failed<Out>(guard.refusal(), executor_);
  if (static_cast<size_t>(status) >= kTaskStatusCount) {
    return Failed<Out>(Status::InvalidArgument("status is out of range"),
                       executor_);
  }
  return RunQuery<Out>([status](const TaskStore::ReadView& view) {
    std::optional<TaskId> id;
    Status s = storage::OldestWithStatus(view, status, &id);
    return TaskOrNothing(view, s, id);
  });
}

Future<std::optional<TaskInfo>> RuntimeImpl::NextDueTask() {
  using Out = std::optional<TaskInfo>;
  CallGuard guard(this, "NextDueTask", QueryReads::kIndex);
  if (guard.refused()) return Failed<Out>(guard.refusal(), executor_);
  return RunQuery<Out>([](const TaskStore::ReadView& view) {
    std::optional<TaskId> id;
    Status s = storage::NextDue(view, &id);
    return TaskOrNothing(view, s, id);
  });
}

Status RuntimeImpl::DeclareJsonPayload(std::string_view type) {
  CallGuard guard(this);
  if (guard.closed()) return ClosedError();
  if (type.empty()) {
    return Status::InvalidArgument("task type must not be empty");
  }
  if (type.size() > options_.max_type_bytes) {
    return Status::InvalidArgument(
        "task type is " + std::to_string(type.size()) +
        " bytes; the limit is " + std::to_string(options_.max_type_bytes));
  }
  std::lock_guard<std::mutex> lock(json_types_mutex_);
  if (json_types_ != nullptr && json_types_->Contains(type)) {
    return Status::OK();
  }
  storage::JsonPayloadTypes none;
  json_types_ = std::make_shared<const storage::JsonPayloadTypes>(
      (json_types_ != nullptr ? *json_types_ : none).With(type));
  ++json_types_version_;
  return Status::OK();
}

// ---- Live queries ----

Result<Watch> RuntimeImpl::WatchTask(TaskId id,
                                     WatchCallback<TaskInfo> callback) {
  CallGuard guard(this);
  if (guard.closed()) return ClosedError();
  if (read_only_) return ReadOnlyError("WatchTask (a live query)");
  if (!callback) return Status::InvalidArgument("the callback is empty");
  return SubscribeLive<TaskInfo>(
      std::make_shared<TaskLiveQuery<TaskInfo>>(id, nullptr, 0),
      std::move(callback));
}

Result<Watch> RuntimeImpl::WatchTaskJson(TaskId id,
                                         WatchCallback<std::string> callback) {
  CallGuard guard(this);
  if (guard.closed()) return ClosedError();
  if (read_only_) return ReadOnlyError("WatchTaskJson (a live query)");
  if (!callback) return Status::InvalidArgument("the callback is empty");
  uint64_t version = 0;
  auto json_types = JsonTypes(&version);
  return SubscribeLive<std::string>(
      std::make_shared<TaskLiveQuery<std::string>>(id, std::move(json_types),
                                                   version),
      std::move(callback));
}

Result<Watch> RuntimeImpl::WatchList(const TaskQuery& query,
                                     WatchCallback<TaskPage> callback) {
  CallGuard guard(this);
  if (guard.closed()) return ClosedError();
  if (read_only_) return ReadOnlyError("WatchList (a live query)");
  if (!callback) return Status::InvalidArgument("the callback is empty");
  storage::ListSpec spec;
  Status s = storage::ParseTaskQuery(query, &spec);
  if (!s.ok()) return s;
  return SubscribeLive<TaskPage>(
      std::make_shared<ListLiveQuery<TaskPage>>(
          spec, store_->StoredGroup(spec.group), nullptr, 0),
      std::move(callback));
}

Result<Watch> RuntimeImpl::WatchListJson(const TaskQuery& query,
                                         WatchCallback<std::string> callback) {
  CallGuard guard(this);
  if (guard.closed()) return ClosedError();
  if (read_only_) return ReadOnlyError("WatchListJson (a live query)");
  if (!callback) return Status::InvalidArgument("the callback is empty");
  storage::ListSpec spec;
  Status s = storage::ParseTaskQuery(query, &spec);
  if (!s.ok()) return s;
  uint64_t version = 0;
  auto json_types = JsonTypes(&version);
  return SubscribeLive<std::string>(
      std::make_shared<ListLiveQuery<std::string>>(
          spec, store_->StoredGroup(spec.group), std::move(json_types),
          version),
      std::move(callback));
}

Result<Watch> RuntimeImpl::WatchCountByStatus(
    WatchCallback<StatusCounts> callback) {
  CallGuard guard(this);
  if (guard.closed()) return ClosedError();
  if (read_only_) return ReadOnlyError("WatchCountByStatus (a live query)");
  if (!callback) return Status::InvalidArgument("the callback is empty");
  return SubscribeLive<StatusCounts>(
      std::make_shared<CountsLiveQuery<StatusCounts>>(), std::move(callback));
}

Result<Watch> RuntimeImpl::WatchCountByType(
    WatchCallback<TypeCounts> callback) {
  CallGuard guard(this);
  if (guard.closed()) return ClosedError();
  if (read_only_) return ReadOnlyError("WatchCountByType (a live query)");
  if (!callback) return Status::InvalidArgument("the callback is empty");
  return SubscribeLive<TypeCounts>(
      std::make_shared<CountsLiveQuery<TypeCounts>>(), std::move(callback));
}

Future<WatchStats> RuntimeImpl::GetWatchStats() {
  CallGuard guard(this);
  if (guard.closed()) return Failed<WatchStats>(ClosedError(), executor_);
  auto promise = NewPromise<WatchStats>();
  auto on_drop = ResolveOnDrop(promise, ClosedError());
  caf::anon_send(
      watcher_, actors::stats_atom::value,
      actors::WatchStatsCallback(
          [promise, on_drop](const WatchStats& stats) { promise.Set(stats); }));
  return promise.GetFuture();
}

}  // namespace spool
