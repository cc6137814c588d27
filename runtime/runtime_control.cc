// The Runtime's task control: cancel, retry, delete, purge, hold, hand-off,
// pause, limits, periodic tasks and events.

#include <algorithm>
#include <cmath>

#include <caf/all.hpp>

#include "runtime/runtime_impl.h"
#include "util/schedule.h"

namespace spool {
namespace {

using actors::ControlCommand;
using actors::ControlResult;

}  // namespace

template <class... Ts>
Status RuntimeImpl::TellScheduler(Ts&&... xs) {
  CallGuard guard(this);
  if (guard.closed()) return ClosedError();
  caf::anon_send(scheduler_, std::forward<Ts>(xs)...);
  return Status::OK();
}

Future<ControlResult> RuntimeImpl::SendControl(ControlCommand command) {
  CallGuard guard(this);
  if (guard.closed()) return Failed<ControlResult>(ClosedError(), executor_);
  auto promise = NewPromise<ControlResult>();
  command.done = [promise](const Result<ControlResult>& result) {
    promise.Set(result);
  };
  Deliver(std::move(command));
  return promise.GetFuture();
}

void RuntimeImpl::Deliver(ControlCommand command) {
  using Kind = ControlCommand::Kind;
  switch (command.kind) {
    case Kind::kCancel:
    case Kind::kHold:
    case Kind::kCancelGroup:
      // Through the scheduler: it gives back the named tasks that wait,
      // claimed ahead, in the pool (actors/claimed_pool.h) first.
      if (command.kind == Kind::kCancelGroup) {
        command.stored_group = store_->StoredGroup(command.text);
      }
      caf::anon_send(scheduler_, actors::control_atom::value,
                     std::move(command));
      return;
    default:
      caf::anon_send(writer_, actors::control_atom::value, std::move(command));
  }
}

Future<void> RuntimeImpl::SimpleControl(ControlCommand::Kind kind, TaskId id,
                                        std::string text, std::string error) {
  CallGuard guard(this);
  if (guard.closed()) return Failed<void>(ClosedError(), executor_);
  ControlCommand command;
  command.kind = kind;
  command.id = id;
  command.text = std::move(text);
  command.error = std::move(error);
  auto promise = NewPromise<void>();
  command.done = [promise](const Result<ControlResult>& result) {
    promise.Set(Result<void>(result.status()));
  };
  Deliver(std::move(command));
  return promise.GetFuture();
}

Future<TaskStatus> RuntimeImpl::Cancel(TaskId id) {
  if (read_only_) return Failed<TaskStatus>(ReadOnlyError("Cancel"), executor_);
  ControlCommand command;
  command.kind = ControlCommand::Kind::kCancel;
  command.id = id;
  CallGuard guard(this);
  if (guard.closed()) return Failed<TaskStatus>(ClosedError(), executor_);
  auto promise = NewPromise<TaskStatus>();
  command.done = [promise](const Result<ControlResult>& result) {
    if (result.ok()) {
      promise.Set(result->status);
    } else {
      promise.Set(result.status());
    }
  };
  Deliver(std::move(command));
  return promise.GetFuture();
}

Future<uint64_t> RuntimeImpl::CancelGroup(std::string group) {
  if (read_only_) {
    return Failed<uint64_t>(ReadOnlyError("CancelGroup"), executor_);
  }
  CallGuard guard(this);
  if (guard.closed()) return Failed<uint64_t>(ClosedError(), executor_);
  if (group.empty()) {
    return Failed<uint64_t>(
        Status::InvalidArgument("CancelGroup needs a group name"), executor_);
  }
  ControlCommand command;
  command.kind = ControlCommand::Kind::kCancelGroup;
  command.text = std::move(group);
  auto promise = NewPromise<uint64_t>();
  command.done = [promise](const Result<ControlResult>& result) {
    if (result.ok()) {
      promise.Set(result->count);
    } else {
      promise.Set(result.status());
    }
  };
  Deliver(std::move(command));
  return promise.GetFuture();
}

Future<void> RuntimeImpl::Retry(TaskId id, std::optional<RetryPolicy> policy) {
  if (read_only_) return Failed<void>(ReadOnlyError("Retry"), executor_);
  if (policy) {
    Status s = policy->Validate();
    if (!s.ok()) return Failed<void>(s.WithContext("Retry"), executor_);
  }
  CallGuard guard(this);
  if (guard.closed()) return Failed<void>(ClosedError(), executor_);
  ControlCommand command;
  command.kind = ControlCommand::Kind::kRetry;
  command.id = id;
  command.retry = policy;
  // The writer checks that the task's type still has a handler.
  command.registry = std::atomic_load(&registry_);
  auto promise = NewPromise<void>();
  command.done = [promise](const Result<ControlResult>& result) {
    promise.Set(Result<void>(result.status()));
  };
  Deliver(std::move(command));
  return promise.GetFuture();
}

Future<void> RuntimeImpl::Delete(TaskId id) {
  if (read_only_) return Failed<void>(ReadOnlyError("Delete"), executor_);
  return SimpleControl(ControlCommand::Kind::kDelete, id);
}

Future<void> RuntimeImpl::Hold(TaskId id) {
  if (read_only_) return Failed<void>(ReadOnlyError("Hold"), executor_);
  return SimpleControl(ControlCommand::Kind::kHold, id);
}

Future<void> RuntimeImpl::Release(TaskId id) {
  if (read_only_) return Failed<void>(ReadOnlyError("Release"), executor_);
  return SimpleControl(ControlCommand::Kind::kRelease, id);
}

Future<void> RuntimeImpl::CompleteHandOff(TaskId id, std::string reference) {
  if (read_only_) {
    return Failed<void>(ReadOnlyError("CompleteHandOff"), executor_);
  }
  return SimpleControl(ControlCommand::Kind::kCompleteHandOff, id,
                       std::move(reference));
}

Future<void> RuntimeImpl::FailHandOff(TaskId id, std::string reference,
                                      std::string error) {
  if (read_only_) return Failed<void>(ReadOnlyError("FailHandOff"), executor_);
  if (error.empty()) error = "the handed-off work failed";
  return SimpleControl(ControlCommand::Kind::kFailHandOff, id,
                       std::move(reference), std::move(error));
}

Future<uint64_t> RuntimeImpl::Purge(PurgeOptions options) {
  if (read_only_) return Failed<uint64_t>(ReadOnlyError("Purge"), executor_);
  uint32_t statuses = 0;
  for (TaskStatus status : options.statuses) {
    if (!IsTerminal(status)) {
      return Failed<uint64_t>(
          Status::InvalidArgument(std::string("Purge removes finished tasks "
                                              "only; '") +
                                  TaskStatusName(status) + "' is not finished"),
          executor_);
    }
    statuses |= 1u << static_cast<unsigned>(status);
  }
  if (options.older_than < Duration(0)) {
    return Failed<uint64_t>(
        Status::InvalidArgument("Purge older_than must be >= 0"), executor_);
  }
  if (options.batch_size == 0) {
    return Failed<uint64_t>(
        Status::InvalidArgument("Purge batch_size must be > 0"), executor_);
  }
  auto promise = NewPromise<uint64_t>();
  if (statuses == 0) {
    promise.Set(uint64_t{0});
    return promise.GetFuture();
  }
  ControlCommand first;
  first.kind = ControlCommand::Kind::kPurge;
  first.purge_statuses = statuses;
  first.purge_updated_before_us =
      (clock_->Now() - options.older_than).time_since_epoch().count();
  first.purge_step = options.batch_size;
  first.purge_types = options.types;

  auto deleted = std::make_shared<uint64_t>(0);
  RunSteps(
      std::move(first),
      [deleted](const ControlResult& result, ControlCommand* next) {
        *deleted += result.count;
        next->purge_cursor_key = result.cursor_key;
        return result.more;
      },
      [promise, deleted](const Status& s) {
        if (s.ok()) {
          promise.Set(*deleted);
        } else {
          promise.Set(s);
        }
      });
  return promise.GetFuture();
}

struct RuntimeImpl::StepRun {
  ControlCommand command;
  StepFn step;
  std::function<void(const Status&)> done;
};

void RuntimeImpl::RunSteps(ControlCommand first, StepFn step,
                           std::function<void(const Status&)> done) {
  SendStep(std::make_shared<StepRun>(
      StepRun{std::move(first), std::move(step), std::move(done)}));
}

void RuntimeImpl::SendStep(std::shared_ptr<StepRun> run) {
  ControlCommand command = run->command;
  SendControl(std::move(command))
      .Then([this, run](const Result<ControlResult>& result) {
        if (!result.ok()) {
          run->done(result.status());
        } else if (!run->step(*result, &run->command)) {
          run->done(Status::OK());
        } else {
          SendStep(run);
        }
      });
}

Status RuntimeImpl::Pause() {
  if (read_only_) return ReadOnlyError("Pause");
  Status s = TellScheduler(actors::pause_atom::value, std::string(), true);
  if (s.ok()) paused_ = true;
  return s;
}

Status RuntimeImpl::Resume() {
  if (read_only_) return ReadOnlyError("Resume");
  Status s = TellScheduler(actors::pause_atom::value, std::string(), false);
  if (s.ok()) paused_ = false;
  return s;
}

Status RuntimeImpl::PauseType(std::string_view type) {
  if (read_only_) return ReadOnlyError("PauseType");
  if (type.empty()) return Status::InvalidArgument("PauseType needs a type");
  return TellScheduler(actors::pause_atom::value, std::string(type), true);
}

Status RuntimeImpl::ResumeType(std::string_view type) {
  if (read_only_) return ReadOnlyError("ResumeType");
  if (type.empty()) return Status::InvalidArgument("ResumeType needs a type");
  return TellScheduler(actors::pause_atom::value, std::string(type), false);
}

Status RuntimeImpl::SetGroupConcurrency(std::string_view group,
                                        uint32_t max_running) {
  if (read_only_) return ReadOnlyError("SetGroupConcurrency");
  if (group.empty()) {
    return Status::InvalidArgument("SetGroupConcurrency needs a group");
  }
  CallGuard guard(this);
  if (guard.closed()) return ClosedError();
  // The scheduler knows groups in their stored form (a tag when encrypted).
  return TellScheduler(actors::limit_atom::value, store_->StoredGroup(group),
                       max_running);
}

Status RuntimeImpl::RegisterGate(std::string_view name,
                                 std::shared_ptr<Gate> gate) {
  CallGuard guard(this);
  if (guard.closed()) return ClosedError();
  if (read_only_) return ReadOnlyError("RegisterGate");
  std::lock_guard<std::mutex> lock(registry_mutex_);
  if (started_) {
    return Status::FailedPrecondition("RegisterGate: gate '" +
                                      std::string(name) +
                                      "' registered after Start");
  }
  return gates_->Register(std::string(name), std::move(gate));
}

Status RuntimeImpl::AddRateLimit(std::string_view name, RateLimit limit,
                                 std::vector<std::string> types,
                                 RateKeyOf key_of) {
  CallGuard guard(this);
  if (guard.closed()) return ClosedError();
  if (read_only_) return ReadOnlyError("AddRateLimit");
  std::lock_guard<std::mutex> lock(registry_mutex_);
  if (started_) {
    return Status::FailedPrecondition("AddRateLimit: rate limit '" +
                                      std::string(name) +
                                      "' added after Start");
  }
  return rate_buckets_->Add(actors::RateBuckets::Limit{
      std::string(name), limit, std::move(types), std::move(key_of)});
}

Status RuntimeImpl::SetGate(std::string_view gate, bool open) {
  if (read_only_) return ReadOnlyError("SetGate");
  if (gate.empty()) return Status::InvalidArgument("SetGate needs a gate name");
  return TellScheduler(actors::gate_atom::value, std::string(gate), open);
}

std::optional<double> RuntimeImpl::Progress(TaskId id) {
  return progress_->Get(id);
}

Future<void> RuntimeImpl::ReportProgress(TaskId id, double fraction) {
  if (read_only_) {
    return Failed<void>(ReadOnlyError("ReportProgress"), executor_);
  }
  if (std::isnan(fraction) || fraction < 0.0 || fraction > 1.0) {
    return Failed<void>(
        Status::InvalidArgument("ReportProgress: fraction must be in [0, 1], "
                                "got " +
                                std::to_string(fraction)),
        executor_);
  }
  CallGuard guard(this);
  if (guard.closed()) return Failed<void>(ClosedError(), executor_);
  ControlCommand command;
  command.kind = ControlCommand::Kind::kReportProgress;
  command.id = id;
  command.progress = fraction;
  auto promise = NewPromise<void>();
  command.done = [promise](const Result<ControlResult>& result) {
    promise.Set(Result<void>(result.status()));
  };
  Deliver(std::move(command));
  return promise.GetFuture();
}

uint64_t RuntimeImpl::SubscribeProgress(
    std::function<void(const ProgressUpdate&)> listener) {
  if (!listener) return 0;
  uint64_t token;
  {
    std::lock_guard<std::mutex> lock(subscribers_mutex_);
    token = next_subscriber_++;
  }
  progress_feed_->Add(token, std::move(listener));
  return token;
}

Status RuntimeImpl::AddPeriodic(PeriodicTask periodic) {
  CallGuard guard(this);
  if (guard.closed()) return ClosedError();
  if (read_only_) return ReadOnlyError("AddPeriodic");
  if (periodic.name.empty()) {
    return Status::InvalidArgument("a periodic task needs a name");
  }
  std::string what = "periodic task '" + periodic.name + "'";
  Result<Schedule> schedule = Schedule::Parse(periodic.schedule);
  if (!schedule.ok()) return schedule.status().WithContext(what);
  if (schedule->NeverFires()) {
    return Status::InvalidArgument(what + ": schedule '" + periodic.schedule +
                                   "' never fires");
  }
  // The task is checked now, so that mistakes show at registration.
  TaskSpec probe = periodic.task;
  Result<actors::NewTask> prepared = Prepare(probe, what, 0);
  if (!prepared.ok()) return prepared.status();
  std::lock_guard<std::mutex> lock(registry_mutex_);
  if (started_) {
    return Status::FailedPrecondition(what +
                                      ": periodic tasks must be added "
                                      "before Start");
  }
  for (const PeriodicTask& existing : periodic_) {
    if (existing.name == periodic.name) {
      return Status::FailedPrecondition(what + " is already added");
    }
  }
  periodic_.push_back(std::move(periodic));
  return Status::OK();
}

uint64_t RuntimeImpl::Subscribe(
    std::function<void(const TaskEvent&)> listener) {
  auto subscriber = std::make_shared<Subscriber>();
  subscriber->listener = std::move(listener);
  return AddSubscriber(std::move(subscriber));
}

uint64_t RuntimeImpl::SubscribeStorageHealth(
    std::function<void(const StorageHealthEvent&)> listener) {
  auto subscriber = std::make_shared<Subscriber>();
  subscriber->health_listener = std::move(listener);
  return AddSubscriber(std::move(subscriber));
}

namespace {

template <class Map>
size_t EventListeners(const Map& subscribers) {
  size_t count = 0;
  for (const auto& [token, subscriber] : subscribers) {
    if (subscriber->listener) ++count;
  }
  return count;
}

}  // namespace

uint64_t RuntimeImpl::AddSubscriber(std::shared_ptr<Subscriber> subscriber) {
  std::lock_guard<std::mutex> lock(subscribers_mutex_);
  uint64_t token = next_subscriber_++;
  subscribers_.emplace(token, std::move(subscriber));
  subscriber_count_ = EventListeners(subscribers_);
  return token;
}

void RuntimeImpl::PublishHealth(StorageHealthEvent event) {
  auto shared = std::make_shared<const StorageHealthEvent>(std::move(event));
  std::lock_guard<std::mutex> lock(subscribers_mutex_);
  for (const auto& [token, subscriber] : subscribers_) {
    if (!subscriber->health_listener) continue;
    executor_->Post([subscriber = subscriber, shared] {
      std::lock_guard<std::recursive_mutex> held(subscriber->mutex);
      if (subscriber->active) subscriber->health_listener(*shared);
    });
  }
}

void RuntimeImpl::Unsubscribe(uint64_t token) {
  std::shared_ptr<Subscriber> subscriber;
  {
    std::lock_guard<std::mutex> lock(subscribers_mutex_);
    auto it = subscribers_.find(token);
    if (it != subscribers_.end()) {
      subscriber = std::move(it->second);
      subscribers_.erase(it);
      subscriber_count_ = EventListeners(subscribers_);
    }
  }
  if (!subscriber) {
    // Not an event listener: a progress listener, or nothing.
    progress_feed_->Remove(token);
    return;
  }
  // A delivery in progress sees the flag before its next call and stops;
  // taking the mutex waits for the call running now on another thread (on
  // this thread, inside the listener, it is taken at once). Later
  // deliveries see the flag and stop.
  subscriber->active = false;
  std::lock_guard<std::recursive_mutex> lock(subscriber->mutex);
}

void RuntimeImpl::Publish(std::vector<TaskEvent> events) {
  std::vector<std::shared_ptr<Subscriber>> subscribers;
  {
    std::lock_guard<std::mutex> lock(subscribers_mutex_);
    for (const auto& [token, subscriber] : subscribers_) {
      if (subscriber->listener) subscribers.push_back(subscriber);
    }
  }
  if (subscribers.empty()) return;
  auto shared =
      std::make_shared<const std::vector<TaskEvent>>(std::move(events));
  for (auto& subscriber : subscribers) {
    executor_->Post([subscriber, shared] {
      std::lock_guard<std::recursive_mutex> lock(subscriber->mutex);
      for (const TaskEvent& event : *shared) {
        if (!subscriber->active) return;
        subscriber->listener(event);
      }
    });
  }
}

}  // namespace spool
