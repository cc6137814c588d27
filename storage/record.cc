#include "storage/record.h"

#include <algorithm>
#include <cstdint>

#include <flatbuffers/flatbuffers.h>

#include "storage/task_record_generated.h"

namespace spool::storage {
namespace {

std::string_view AsView(const flatbuffers::String* s) {
  return s == nullptr ? std::string_view() : s->string_view();
}

// Cuts an error text to kMaxErrorBytes, marking the cut with "...", and never
// inside a UTF-8 sequence.
std::string CutError(std::string_view error) {
  if (error.size() <= kMaxErrorBytes) return std::string(error);
  constexpr std::string_view kMark = "...";
  size_t cut = kMaxErrorBytes - kMark.size();
  // Back up over continuation bytes (10xxxxxx) to a sequence start.
  while (cut > 0 && (static_cast<uint8_t>(error[cut]) & 0xC0) == 0x80) --cut;
  return std::string(error.substr(0, cut)) + std::string(kMark);
}

int64_t Micros(Duration d) { return d.count(); }

}  // namespace

void EncodeRecord(const TaskRecord& record,
                  flatbuffers::FlatBufferBuilder* builder) {
  builder->Clear();
  auto type = builder->CreateString(record.type);
  auto payload = builder->CreateVector(
      reinterpret_cast<const uint8_t*>(record.payload.data()),
      record.payload.size());
  flatbuffers::Offset<flatbuffers::String> last_error;
  if (!record.last_error.empty()) {
    last_error = builder->CreateString(record.last_error);
  }
  auto retry = fb::CreateRetryPolicy(
      *builder, static_cast<fb::RetryKind>(record.retry.kind),
      Micros(record.retry.initial_delay), Micros(record.retry.max_delay),
      record.retry.jitter);
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::Failure>>>
      failures;
  if (!record.failures.empty()) {
    std::vector<flatbuffers::Offset<fb::Failure>> entries;
    entries.reserve(record.failures.size());
    for (const FailureEntry& f : record.failures) {
      entries.push_back(fb::CreateFailure(*builder, f.attempt, f.at_us,
                                          builder->CreateString(f.error)));
    }
    failures = builder->CreateVector(entries);
  }
  auto optional_string = [builder](const std::string& value) {
    return value.empty() ? flatbuffers::Offset<flatbuffers::String>()
                         : builder->CreateString(value);
  };
  auto group = optional_string(record.group);
  auto dedup_key = optional_string(record.dedup_key);
  auto idempotency_key = optional_string(record.idempotency_key);
  auto handoff_reference = optional_string(record.handoff_reference);
  auto periodic_name = optional_string(record.periodic_name);
  flatbuffers::Offset<flatbuffers::Vector<uint64_t>> depends_on;
  if (!record.depends_on.empty()) {
    depends_on = builder->CreateVector(record.depends_on);
  }
  fb::TaskRecordBuilder table(*builder);
  table.add_id(record.id);
  table.add_type(type);
  table.add_payload(payload);
  table.add_status(static_cast<fb::Status>(record.status));
  table.add_priority(record.priority);
  table.add_attempts(record.attempts);
  table.add_max_attempts(record.max_attempts);
  table.add_created_us(record.created_us);
  table.add_updated_us(record.updated_us);
  table.add_next_attempt_us(record.next_attempt_us);
  table.add_sequence(record.sequence);
  if (!last_error.IsNull()) table.add_last_error(last_error);
  table.add_retry(retry);
  if (!failures.IsNull()) table.add_failures(failures);
  if (!group.IsNull()) table.add_group(group);
  if (!dedup_key.IsNull()) table.add_dedup_key(dedup_key);
  if (!idempotency_key.IsNull()) table.add_idempotency_key(idempotency_key);
  if (!depends_on.IsNull()) table.add_depends_on(depends_on);
  table.add_on_dependency_failure(
      static_cast<fb::DependencyFailure>(record.on_dependency_failure));
  table.add_timeout_us(record.timeout_us);
  table.add_cancel_requested(record.cancel_requested);
  if (!handoff_reference.IsNull())
    table.add_handoff_reference(handoff_reference);
  table.add_payload_version(record.payload_version);
  if (!periodic_name.IsNull()) table.add_periodic_name(periodic_name);
  table.add_periodic_slot_us(record.periodic_slot_us);
  fb::FinishTaskRecordBuffer(*builder, table.Finish());
}

std::string EncodeRecord(const TaskRecord& record) {
  flatbuffers::FlatBufferBuilder builder(256 + record.payload.size());
  EncodeRecord(record, &builder);
  return std::string(reinterpret_cast<const char*>(builder.GetBufferPointer()),
                     builder.GetSize());
}

Status VerifyRecord(TaskId id, std::string_view bytes,
                    const fb::TaskRecord** table) {
  auto corrupt = [id](std::string_view what) {
    return Status::Corruption("task " + std::to_string(id) + ": " +
                              std::string(what));
  };
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  if (bytes.size() < 8 || !fb::TaskRecordBufferHasIdentifier(data)) {
    return corrupt("record is not a spool task record (bad identifier)");
  }
  flatbuffers::Verifier verifier(data, bytes.size());
  if (!fb::VerifyTaskRecordBuffer(verifier)) {
    return corrupt("record failed FlatBuffers verification");
  }
  const fb::TaskRecord* record = fb::GetTaskRecord(data);
  if (record->id() != id) {
    return corrupt("record holds id " + std::to_string(record->id()));
  }
  // The verifier aligns a vector's length but not its 8-byte elements; a
  // damaged offset can leave them misaligned, and reading them then is
  // undefined behaviour. A record the builder wrote is always aligned.
  if (const auto* deps = record->depends_on();
      deps != nullptr &&
      reinterpret_cast<uintptr_t>(deps->data()) % alignof(uint64_t) != 0) {
    return corrupt("dependency list is misaligned");
  }
  if (static_cast<uint8_t>(record->status()) >= kTaskStatusCount) {
    return corrupt("status value " +
                   std::to_string(static_cast<int>(record->status())) +
                   " is out of range");
  }
  if (record->type() == nullptr || record->type()->size() == 0) {
    return corrupt("record has no task type");
  }
  if (record->retry() != nullptr &&
      static_cast<uint8_t>(record->retry()->kind()) >
          static_cast<uint8_t>(fb::RetryKind::Exponential)) {
    return corrupt("retry kind is out of range");
  }
  if (static_cast<uint8_t>(record->on_dependency_failure()) >
      static_cast<uint8_t>(fb::DependencyFailure::Run)) {
    return corrupt("dependency failure policy is out of range");
  }
  *table = record;
  return Status::OK();
}

std::string_view AlignedRecordBytes(std::string_view bytes,
                                    std::string* scratch) {
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(uint64_t) == 0) {
    return bytes;
  }
  scratch->assign(bytes.data(), bytes.size());
  return *scratch;
}

Status DecodeRecord(TaskId id, std::string_view bytes, TaskRecord* record) {
  // Decoding copies every field out, so any bytes will do.
  std::string scratch;
  bytes = AlignedRecordBytes(bytes, &scratch);
  const fb::TaskRecord* table = nullptr;
  Status s = VerifyRecord(id, bytes, &table);
  if (!s.ok()) return s;
  record->id = table->id();
  record->type = std::string(AsView(table->type()));
  if (table->payload() != nullptr) {
    record->payload.assign(
        reinterpret_cast<const char*>(table->payload()->data()),
        table->payload()->size());
  } else {
    record->payload.clear();
  }
  record->status = static_cast<TaskStatus>(table->status());
  record->priority = table->priority();
  record->attempts = table->attempts();
  record->max_attempts = table->max_attempts();
  record->created_us = table->created_us();
  record->updated_us = table->updated_us();
  record->next_attempt_us = table->next_attempt_us();
  record->sequence = table->sequence();
  record->last_error = std::string(AsView(table->last_error()));
  if (const fb::RetryPolicy* retry = table->retry()) {
    record->retry.kind = static_cast<RetryPolicy::Kind>(retry->kind());
    record->retry.initial_delay = Duration(retry->initial_delay_us());
    record->retry.max_delay = Duration(retry->max_delay_us());
    record->retry.jitter = retry->jitter();
  } else {
    record->retry = RetryPolicy::None();
  }
  record->retry.max_attempts = record->max_attempts;
  record->failures.clear();
  if (const auto* failures = table->failures()) {
    record->failures.reserve(failures->size());
    for (const fb::Failure* f : *failures) {
      record->failures.push_back(FailureEntry{f->attempt(), f->at_us(),
                                              std::string(AsView(f->error()))});
    }
  }
  record->group = std::string(AsView(table->group()));
  record->dedup_key = std::string(AsView(table->dedup_key()));
  record->idempotency_key = std::string(AsView(table->idempotency_key()));
  record->depends_on.clear();
  if (const auto* deps = table->depends_on()) {
    record->depends_on.assign(deps->begin(), deps->end());
  }
  record->on_dependency_failure =
      static_cast<DependencyFailure>(table->on_dependency_failure());
  record->timeout_us = table->timeout_us();
  record->cancel_requested = table->cancel_requested();
  record->handoff_reference = std::string(AsView(table->handoff_reference()));
  record->payload_version = table->payload_version();
  record->periodic_name = std::string(AsView(table->periodic_name()));
  record->periodic_slot_us = table->periodic_slot_us();
  return Status::OK();
}

void FillTaskInfo(const fb::TaskRecord& table, TaskInfo* info) {
  info->id = table.id();
  info->type = std::string(AsView(table.type()));
  if (table.payload() != nullptr) {
    info->payload.assign(reinterpret_cast<const char*>(table.payload()->data()),
                         table.payload()->size());
  } else {
    info->payload.clear();
  }
  info->status = static_cast<TaskStatus>(table.status());
  info->priority = table.priority();
  info->attempts = table.attempts();
  info->max_attempts = table.max_attempts();
  info->created_at = Timestamp(Duration(table.created_us()));
  info->updated_at = Timestamp(Duration(table.updated_us()));
  if (table.next_attempt_us() != 0) {
    info->next_attempt_at = Timestamp(Duration(table.next_attempt_us()));
  } else {
    info->next_attempt_at.reset();
  }
  info->sequence = table.sequence();
  info->last_error = std::string(AsView(table.last_error()));
  info->failures.clear();
  if (const auto* failures = table.failures()) {
    for (const fb::Failure* f : *failures) {
      info->failures.push_back(
          TaskInfo::Failure{f->attempt(), Timestamp(Duration(f->at_us())),
                            std::string(AsView(f->error()))});
    }
  }
  info->group = std::string(AsView(table.group()));
  info->dedup_key = std::string(AsView(table.dedup_key()));
  info->idempotency_key = std::string(AsView(table.idempotency_key()));
  info->depends_on.clear();
  if (const auto* deps = table.depends_on()) {
    info->depends_on.assign(deps->begin(), deps->end());
  }
  info->on_dependency_failure =
      static_cast<DependencyFailure>(table.on_dependency_failure());
  info->timeout = Duration(table.timeout_us());
  info->cancel_requested = table.cancel_requested();
  info->handoff_reference = std::string(AsView(table.handoff_reference()));
  info->payload_version = table.payload_version();
}

void RecordFailure(TaskRecord* record, uint32_t attempt, int64_t at_us,
                   std::string_view error) {
  record->last_error = CutError(error);
  if (record->failures.size() >= kMaxFailureHistory) {
    record->failures.erase(record->failures.begin());
  }
  record->failures.push_back(FailureEntry{attempt, at_us, record->last_error});
}

}  // namespace spool::storage
