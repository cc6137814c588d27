#include "storage/record.h"

#include <algorithm>
#include <cstdint>

#include <flatbuffers/flatbuffers.h>

#include "storage/task_record_generated.h"

namespace spool::storage {
namespace {

// The FlatBuffers file identifier of each kind of value, so that a state
// never passes for a spec, nor a failure for either.
constexpr char kSpecIdentifier[] = "SPSP";
constexpr char kStateIdentifier[] = "SPST";
constexpr char kFailureIdentifier[] = "SPFL";

std::string_view AsView(const flatbuffers::String* s) {
  return s == nullptr ? std::string_view() : s->string_view();
}

std::string AsString(const flatbuffers::String* s) {
  return std::string(AsView(s));
}

int64_t Micros(Duration d) { return d.count(); }

flatbuffers::Offset<flatbuffers::String> OptionalString(
    flatbuffers::FlatBufferBuilder* builder, const std::string& value) {
  return value.empty() ? flatbuffers::Offset<flatbuffers::String>()
                       : builder->CreateString(value);
}

Status Corrupt(TaskId id, std::string_view what) {
  return Status::Corruption("task " + std::to_string(id) + ": " +
                            std::string(what));
}

// The checks every kind shares: the identifier, then the structure.
template <class Table>
Status VerifyTable(TaskId id, std::string_view bytes, const char* identifier,
                   std::string_view kind, const Table** table) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  if (bytes.size() < 8 || !flatbuffers::BufferHasIdentifier(data, identifier)) {
    return Corrupt(
        id, std::string(kind) + " is not a spool task value (bad identifier)");
  }
  flatbuffers::Verifier verifier(data, bytes.size());
  if (!verifier.VerifyBuffer<Table>(identifier)) {
    return Corrupt(id, std::string(kind) + " failed FlatBuffers verification");
  }
  *table = flatbuffers::GetRoot<Table>(data);
  return Status::OK();
}

template <class Table>
std::string Encoded(const Table& value,
                    void (*encode)(const Table&,
                                   flatbuffers::FlatBufferBuilder*)) {
  flatbuffers::FlatBufferBuilder builder(256);
  encode(value, &builder);
  return std::string(reinterpret_cast<const char*>(builder.GetBufferPointer()),
                     builder.GetSize());
}

}  // namespace

std::string CutError(std::string_view error) {
  if (error.size() <= kMaxErrorBytes) return std::string(error);
  constexpr std::string_view kMark = "...";
  size_t cut = kMaxErrorBytes - kMark.size();
  // Back up over continuation bytes (10xxxxxx) to a sequence start.
  while (cut > 0 && (static_cast<uint8_t>(error[cut]) & 0xC0) == 0x80) --cut;
  return std::string(error.substr(0, cut)) + std::string(kMark);
}

bool HoldsReservation(const StateRecord& state, int64_t now_us) {
  return IsTerminal(state.status) && state.unique_for_us > 0 &&
         !state.stored_dedup_key.empty() &&
         now_us < state.updated_us + state.unique_for_us;
}

void RecordFailure(StateRecord* state, uint32_t attempt, int64_t at_us,
                   std::string_view error) {
  state->last_error = CutError(error);
  state->new_failures.push_back(
      FailureEntry{attempt, at_us, state->last_error});
  ++state->failures_total;
}

// ---- Encoding ----

void EncodeSpec(const SpecRecord& spec,
                flatbuffers::FlatBufferBuilder* builder) {
  builder->Clear();
  auto type = builder->CreateString(spec.type);
  auto payload = builder->CreateVector(
      reinterpret_cast<const uint8_t*>(spec.payload.data()),
      spec.payload.size());
  auto group = OptionalString(builder, spec.group);
  auto dedup_key = OptionalString(builder, spec.dedup_key);
  auto idempotency_key = OptionalString(builder, spec.idempotency_key);
  auto periodic_name = OptionalString(builder, spec.periodic_name);
  fb::TaskSpecBuilder table(*builder);
  table.add_id(spec.id);
  table.add_type(type);
  table.add_payload(payload);
  table.add_created_us(spec.created_us);
  if (!group.IsNull()) table.add_group(group);
  if (!dedup_key.IsNull()) table.add_dedup_key(dedup_key);
  if (!idempotency_key.IsNull()) table.add_idempotency_key(idempotency_key);
  table.add_payload_version(spec.payload_version);
  if (!periodic_name.IsNull()) table.add_periodic_name(periodic_name);
  table.add_periodic_slot_us(spec.periodic_slot_us);
  builder->Finish(table.Finish(), kSpecIdentifier);
}

void EncodeState(const StateRecord& state,
                 flatbuffers::FlatBufferBuilder* builder) {
  builder->Clear();
  auto last_error = OptionalString(builder, state.last_error);
  auto handoff_reference = OptionalString(builder, state.handoff_reference);
  auto lease_node = OptionalString(builder, state.lease_node);
  auto type = builder->CreateString(state.type);
  auto stored_group = OptionalString(builder, state.stored_group);
  auto stored_dedup_key = OptionalString(builder, state.stored_dedup_key);
  flatbuffers::Offset<flatbuffers::Vector<uint64_t>> depends_on;
  if (!state.depends_on.empty()) {
    depends_on = builder->CreateVector(state.depends_on);
  }
  flatbuffers::Offset<flatbuffers::Vector<uint8_t>> result;
  if (state.result) {
    result = builder->CreateVector(
        reinterpret_cast<const uint8_t*>(state.result->data()),
        state.result->size());
  }
  auto retry = fb::CreateRetryPolicy(
      *builder, static_cast<fb::RetryKind>(state.retry.kind),
      Micros(state.retry.initial_delay), Micros(state.retry.max_delay),
      state.retry.jitter);
  fb::TaskStateBuilder table(*builder);
  table.add_id(state.id);
  table.add_status(static_cast<fb::Status>(state.status));
  table.add_attempts(state.attempts);
  table.add_max_attempts(state.max_attempts);
  table.add_updated_us(state.updated_us);
  table.add_next_attempt_us(state.next_attempt_us);
  if (!last_error.IsNull()) table.add_last_error(last_error);
  table.add_cancel_requested(state.cancel_requested);
  if (!handoff_reference.IsNull()) {
    table.add_handoff_reference(handoff_reference);
  }
  table.add_failures_total(state.failures_total);
  table.add_retry(retry);
  table.add_type(type);
  table.add_priority(state.priority);
  table.add_sequence(state.sequence);
  if (!stored_group.IsNull()) table.add_stored_group(stored_group);
  if (!stored_dedup_key.IsNull()) table.add_stored_dedup_key(stored_dedup_key);
  if (!depends_on.IsNull()) table.add_depends_on(depends_on);
  table.add_on_dependency_failure(
      static_cast<fb::DependencyFailure>(state.on_dependency_failure));
  table.add_timeout_us(state.timeout_us);
  // Both default to absent, so a state without them is as long as before.
  table.add_snoozes(state.snoozes);
  if (!result.IsNull()) table.add_result(result);
  table.add_unique_for_us(state.unique_for_us);
  table.add_interrupted_attempts(state.interrupted_attempts);
  if (!lease_node.IsNull()) table.add_lease_node(lease_node);
  table.add_lease_deadline_us(state.lease_deadline_us);
  builder->Finish(table.Finish(), kStateIdentifier);
}

void EncodeFailure(const FailureEntry& failure,
                   flatbuffers::FlatBufferBuilder* builder) {
  builder->Clear();
  auto error = builder->CreateString(failure.error);
  builder->Finish(
      fb::CreateFailure(*builder, failure.attempt, failure.at_us, error),
      kFailureIdentifier);
}

std::string EncodeSpec(const SpecRecord& spec) {
  return Encoded<SpecRecord>(spec, &EncodeSpec);
}
std::string EncodeState(const StateRecord& state) {
  return Encoded<StateRecord>(state, &EncodeState);
}
std::string EncodeFailure(const FailureEntry& failure) {
  return Encoded<FailureEntry>(failure, &EncodeFailure);
}

// ---- Verification ----

std::string_view SpecPayload(const fb::TaskSpec& spec) {
  if (spec.payload() == nullptr) return {};
  return std::string_view(reinterpret_cast<const char*>(spec.payload()->data()),
                          spec.payload()->size());
}

Status VerifySpec(TaskId id, std::string_view bytes,
                  const fb::TaskSpec** table) {
  const fb::TaskSpec* spec = nullptr;
  Status s = VerifyTable(id, bytes, kSpecIdentifier, "spec", &spec);
  if (!s.ok()) return s;
  if (spec->id() != id) {
    return Corrupt(id, "spec holds id " + std::to_string(spec->id()));
  }
  if (spec->type() == nullptr || spec->type()->size() == 0) {
    return Corrupt(id, "spec has no task type");
  }
  *table = spec;
  return Status::OK();
}

Status VerifyState(TaskId id, std::string_view bytes,
                   const fb::TaskState** table) {
  const fb::TaskState* state = nullptr;
  Status s = VerifyTable(id, bytes, kStateIdentifier, "state", &state);
  if (!s.ok()) return s;
  if (state->id() != id) {
    return Corrupt(id, "state holds id " + std::to_string(state->id()));
  }
  // The verifier aligns a vector's length but not its 8-byte elements; a
  // damaged offset can leave them misaligned, and reading them then is
  // undefined behaviour. A value the builder wrote is always aligned.
  if (const auto* deps = state->depends_on();
      deps != nullptr &&
      reinterpret_cast<uintptr_t>(deps->data()) % alignof(uint64_t) != 0) {
    return Corrupt(id, "dependency list is misaligned");
  }
  if (static_cast<uint8_t>(state->status()) >= kTaskStatusCount) {
    return Corrupt(id, "status value " +
                           std::to_string(static_cast<int>(state->status())) +
                           " is out of range");
  }
  if (state->type() == nullptr || state->type()->size() == 0) {
    return Corrupt(id, "state has no task type");
  }
  if (state->retry() != nullptr &&
      static_cast<uint8_t>(state->retry()->kind()) >
          static_cast<uint8_t>(fb::RetryKind::Exponential)) {
    return Corrupt(id, "retry kind is out of range");
  }
  if (static_cast<uint8_t>(state->on_dependency_failure()) >
      static_cast<uint8_t>(fb::DependencyFailure::Run)) {
    return Corrupt(id, "dependency failure policy is out of range");
  }
  *table = state;
  return Status::OK();
}

Status VerifyFailure(TaskId id, std::string_view bytes,
                     const fb::Failure** table) {
  return VerifyTable(id, bytes, kFailureIdentifier, "failure entry", table);
}

std::string_view AlignedRecordBytes(std::string_view bytes,
                                    std::string* scratch) {
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(uint64_t) == 0) {
    return bytes;
  }
  scratch->assign(bytes.data(), bytes.size());
  return *scratch;
}

// ---- Decoding ----

Status DecodeSpec(TaskId id, std::string_view bytes, SpecRecord* spec) {
  std::string scratch;
  bytes = AlignedRecordBytes(bytes, &scratch);
  const fb::TaskSpec* table = nullptr;
  Status s = VerifySpec(id, bytes, &table);
  if (!s.ok()) return s;
  spec->id = table->id();
  spec->type = AsString(table->type());
  spec->payload.assign(SpecPayload(*table));
  spec->created_us = table->created_us();
  spec->group = AsString(table->group());
  spec->dedup_key = AsString(table->dedup_key());
  spec->idempotency_key = AsString(table->idempotency_key());
  spec->payload_version = table->payload_version();
  spec->periodic_name = AsString(table->periodic_name());
  spec->periodic_slot_us = table->periodic_slot_us();
  return Status::OK();
}

Status DecodeState(TaskId id, std::string_view bytes, StateRecord* state) {
  std::string scratch;
  bytes = AlignedRecordBytes(bytes, &scratch);
  const fb::TaskState* table = nullptr;
  Status s = VerifyState(id, bytes, &table);
  if (!s.ok()) return s;
  state->id = table->id();
  state->status = static_cast<TaskStatus>(table->status());
  state->attempts = table->attempts();
  state->max_attempts = table->max_attempts();
  state->updated_us = table->updated_us();
  state->next_attempt_us = table->next_attempt_us();
  state->last_error = AsString(table->last_error());
  state->cancel_requested = table->cancel_requested();
  state->handoff_reference = AsString(table->handoff_reference());
  state->failures_total = table->failures_total();
  if (const fb::RetryPolicy* retry = table->retry()) {
    state->retry.kind = static_cast<RetryPolicy::Kind>(retry->kind());
    state->retry.initial_delay = Duration(retry->initial_delay_us());
    state->retry.max_delay = Duration(retry->max_delay_us());
    state->retry.jitter = retry->jitter();
  } else {
    state->retry = RetryPolicy::None();
  }
  state->retry.max_attempts = state->max_attempts;
  state->type = AsString(table->type());
  state->priority = table->priority();
  state->sequence = table->sequence();
  state->stored_group = AsString(table->stored_group());
  state->stored_dedup_key = AsString(table->stored_dedup_key());
  state->depends_on.clear();
  if (const auto* deps = table->depends_on()) {
    state->depends_on.assign(deps->begin(), deps->end());
  }
  state->on_dependency_failure =
      static_cast<DependencyFailure>(table->on_dependency_failure());
  state->timeout_us = table->timeout_us();
  state->snoozes = table->snoozes();
  state->result.reset();
  if (const auto* result = table->result()) {
    state->result.emplace(reinterpret_cast<const char*>(result->data()),
                          result->size());
  }
  state->unique_for_us = table->unique_for_us();
  state->interrupted_attempts = table->interrupted_attempts();
  state->lease_node = AsString(table->lease_node());
  state->lease_deadline_us = table->lease_deadline_us();
  // Failures not yet written belong to the record this one replaces.
  state->new_failures.clear();
  return Status::OK();
}

Status DecodeFailure(TaskId id, std::string_view bytes, FailureEntry* failure) {
  std::string scratch;
  bytes = AlignedRecordBytes(bytes, &scratch);
  const fb::Failure* table = nullptr;
  Status s = VerifyFailure(id, bytes, &table);
  if (!s.ok()) return s;
  failure->attempt = table->attempt();
  failure->at_us = table->at_us();
  failure->error = AsString(table->error());
  return Status::OK();
}

// ---- Reading in place ----

TaskBytes::TaskBytes(TaskBytes&& other) noexcept { *this = std::move(other); }

TaskBytes& TaskBytes::operator=(TaskBytes&& other) noexcept {
  spec_ = std::move(other.spec_);
  state_ = std::move(other.state_);
  failures_ = std::move(other.failures_);
  failure_count_ = other.failure_count_;
  has_spec_ = other.has_spec_;
  has_state_ = other.has_state_;
  view_ = TaskView{};
  other.Clear();
  return *this;
}

TaskId TaskBytes::id() const { return view_.spec->id(); }

void TaskBytes::CopyFrom(const TaskBytes& other) {
  Clear();
  spec_ = other.spec_;
  state_ = other.state_;
  has_spec_ = other.has_spec_;
  has_state_ = other.has_state_;
  for (size_t i = 0; i < other.failure_count_; ++i) {
    *AddFailure() = other.failures_[i];
  }
}

void TaskBytes::Clear() {
  has_spec_ = false;
  has_state_ = false;
  failure_count_ = 0;
  view_ = TaskView{};
}

std::string* TaskBytes::AddFailure() {
  if (failure_count_ == failures_.size()) failures_.emplace_back();
  return &failures_[failure_count_++];
}

Status TaskBytes::Verify(TaskId id) {
  view_ = TaskView{};
  if (!has_spec_) return Corrupt(id, "its spec is missing");
  if (!has_state_) return Corrupt(id, "its state is missing");
  Status s = VerifySpec(id, spec_, &view_.spec);
  if (s.ok()) s = VerifyState(id, state_, &view_.state);
  // The state copies the spec's type (for the index); a state that names
  // another type belongs to another task.
  if (s.ok() && AsView(view_.spec->type()) != AsView(view_.state->type())) {
    s = Corrupt(id, "its state names type '" +
                        std::string(AsView(view_.state->type())) +
                        "' but its spec '" +
                        std::string(AsView(view_.spec->type())) + "'");
  }
  if (!s.ok()) {
    view_ = TaskView{};
    return s;
  }
  failure_tables_.clear();
  for (size_t i = 0; i < failure_count_; ++i) {
    const fb::Failure* failure = nullptr;
    s = VerifyFailure(id, failures_[i], &failure);
    if (!s.ok()) {
      view_ = TaskView{};
      return s;
    }
    failure_tables_.push_back(failure);
  }
  view_.failures = &failure_tables_;
  return Status::OK();
}

TaskStatus StatusOf(const fb::TaskState& state) {
  return static_cast<TaskStatus>(state.status());
}

std::string_view TypeOf(const TaskView& task) {
  return AsView(task.state->type());
}

void AppendFailures(const TaskView& task,
                    std::vector<TaskInfo::Failure>* failures) {
  if (task.failures == nullptr) return;
  failures->reserve(failures->size() + task.failures->size());
  for (const fb::Failure* f : *task.failures) {
    failures->push_back(TaskInfo::Failure{
        f->attempt(), Timestamp(Duration(f->at_us())), AsString(f->error())});
  }
}

void FillTaskInfo(const TaskView& task, TaskInfo* info, bool with_payload) {
  const fb::TaskSpec& spec = *task.spec;
  const fb::TaskState& state = *task.state;
  info->id = spec.id();
  info->type = AsString(spec.type());
  if (with_payload) {
    info->payload.assign(SpecPayload(spec));
  } else {
    info->payload.clear();
  }
  info->status = StatusOf(state);
  info->priority = state.priority();
  info->attempts = state.attempts();
  info->max_attempts = state.max_attempts();
  info->created_at = Timestamp(Duration(spec.created_us()));
  info->updated_at = Timestamp(Duration(state.updated_us()));
  if (state.next_attempt_us() != 0) {
    info->next_attempt_at = Timestamp(Duration(state.next_attempt_us()));
  } else {
    info->next_attempt_at.reset();
  }
  info->sequence = state.sequence();
  info->last_error = AsString(state.last_error());
  info->failures.clear();
  AppendFailures(task, &info->failures);
  info->group = AsString(spec.group());
  info->dedup_key = AsString(spec.dedup_key());
  info->idempotency_key = AsString(spec.idempotency_key());
  info->depends_on.clear();
  if (const auto* deps = state.depends_on()) {
    info->depends_on.assign(deps->begin(), deps->end());
  }
  info->on_dependency_failure =
      static_cast<DependencyFailure>(state.on_dependency_failure());
  info->timeout = Duration(state.timeout_us());
  info->cancel_requested = state.cancel_requested();
  info->handoff_reference = AsString(state.handoff_reference());
  info->remote_node = AsString(state.lease_node());
  info->lease_deadline = Timestamp(Duration(state.lease_deadline_us()));
  info->payload_version = spec.payload_version();
  info->snoozes = state.snoozes();
  info->interrupted_attempts = state.interrupted_attempts();
  info->unique_for = Duration(state.unique_for_us());
  info->result.reset();
  if (const auto* result = state.result(); result != nullptr && with_payload) {
    info->result.emplace(reinterpret_cast<const char*>(result->data()),
                         result->size());
  }
}

}  // namespace spool::storage
