// Codec microbenchmarks: the FlatBuffers encodings of a task's stored values
// (storage/record.h: its spec, its state and its failure entries), their
// verified reads, and the key encodings, as Google Benchmark benchmarks. The
// JSON listing benchmarks live in json_bench.cc, in the same set.
//
// These are the per-task CPU costs under every storage operation:
//   - the writer encodes a spec once per enqueue (spec_encode), and decodes
//     and re-encodes a state per transition (state_decode, state_encode,
//     together state_transition): the figures that bound the writer;
//   - a reader verifies a task's spec and state per query (task_verify),
//     then fills a TaskInfo or writes JSON in place (task_to_task_info,
//     task_json);
//   - every index entry is a key encoding (key_*, index_entries_of).
// Seed 004 (the objectbox FlatBuffers benchmark) reports build and read in
// operations per second, for Dart and Go; state_encode and
// state_verified_read are that measure for the value spool rewrites most.
//
// spool-bench runs them as its `codec` scenario; spool-microbench runs them
// on their own, with Google Benchmark's usual flags.

#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <flatbuffers/flatbuffers.h>

#include "storage/keys.h"
#include "storage/record.h"
#include "storage/record_json.h"
#include "storage/task_record_generated.h"
#include "storage/task_store.h"

namespace spool::storage {
namespace {

constexpr TaskId kId = 1234567;
constexpr int64_t kCreatedUs = 1709211909000123;

// A spec as a fresh enqueue stores it: the scenarios' 100-byte payload.
SpecRecord TypicalSpec() {
  SpecRecord s;
  s.id = kId;
  s.type = "email.send";
  s.payload = std::string(100, 'p');
  s.created_us = kCreatedUs;
  return s;
}

// The state stored with it: pending, the default retry policy.
StateRecord TypicalState() {
  StateRecord s;
  s.id = kId;
  s.status = TaskStatus::kPending;
  s.retry = RetryPolicy{};
  s.max_attempts = s.retry.max_attempts;
  s.updated_us = kCreatedUs;
  s.type = "email.send";
  s.sequence = 987654;
  return s;
}

// The same after two failed attempts: a last error and a retry due later.
StateRecord FailedTwiceState() {
  StateRecord s = TypicalState();
  s.status = TaskStatus::kRetryScheduled;
  s.attempts = 2;
  s.updated_us = kCreatedUs + 200000;
  s.next_attempt_us = kCreatedUs + 4000000;
  RecordFailure(&s, 1, kCreatedUs + 100000,
                "connection refused by smtp.example.com:25");
  RecordFailure(&s, 2, kCreatedUs + 200000, "timeout after 30s");
  s.new_failures.clear();  // As read from storage.
  return s;
}

// The failure entries FailedTwiceState recorded, encoded.
std::vector<std::string> FailedTwiceFailures() {
  StateRecord s = TypicalState();
  RecordFailure(&s, 1, kCreatedUs + 100000,
                "connection refused by smtp.example.com:25");
  RecordFailure(&s, 2, kCreatedUs + 200000, "timeout after 30s");
  std::vector<std::string> failures;
  for (const FailureEntry& f : s.new_failures) {
    failures.push_back(EncodeFailure(f));
  }
  return failures;
}

// A task as a reader gets it from the store: spec, state, failures.
void FillTask(TaskBytes* task, const StateRecord& state,
              const std::vector<std::string>& failures) {
  task->Clear();
  *task->mutable_spec() = EncodeSpec(TypicalSpec());
  task->set_has_spec();
  *task->mutable_state() = EncodeState(state);
  task->set_has_state();
  for (const std::string& f : failures) *task->AddFailure() = f;
}

// ---- Spec: once per enqueue ----

void BM_SpecEncode(benchmark::State& state) {
  const SpecRecord spec = TypicalSpec();
  flatbuffers::FlatBufferBuilder builder(1024);
  for (auto _ : state) {
    EncodeSpec(spec, &builder);
    benchmark::DoNotOptimize(builder.GetBufferPointer());
  }
  state.counters["bytes"] = static_cast<double>(builder.GetSize());
}
BENCHMARK(BM_SpecEncode)->Name("spec_encode");

// What a worker does with the spec it reads to run the task.
void BM_SpecVerify(benchmark::State& state) {
  const std::string bytes = EncodeSpec(TypicalSpec());
  for (auto _ : state) {
    const fb::TaskSpec* table = nullptr;
    Status s = VerifySpec(kId, bytes, &table);
    benchmark::DoNotOptimize(table);
    if (!s.ok()) state.SkipWithError("verification failed");
  }
}
BENCHMARK(BM_SpecVerify)->Name("spec_verify");

// ---- State: every transition ----

void RunStateEncode(benchmark::State& state, const StateRecord& record) {
  flatbuffers::FlatBufferBuilder builder(1024);
  for (auto _ : state) {
    EncodeState(record, &builder);
    benchmark::DoNotOptimize(builder.GetBufferPointer());
  }
  state.counters["bytes"] = static_cast<double>(builder.GetSize());
}

void BM_StateEncode(benchmark::State& state) {
  RunStateEncode(state, TypicalState());
}
BENCHMARK(BM_StateEncode)->Name("state_encode");

void BM_StateEncodeWithError(benchmark::State& state) {
  RunStateEncode(state, FailedTwiceState());
}
BENCHMARK(BM_StateEncodeWithError)->Name("state_encode_with_error");

// Verification alone.
void BM_StateVerify(benchmark::State& state) {
  const std::string bytes = EncodeState(TypicalState());
  for (auto _ : state) {
    const fb::TaskState* table = nullptr;
    Status s = VerifyState(kId, bytes, &table);
    benchmark::DoNotOptimize(table);
    if (!s.ok()) state.SkipWithError("verification failed");
  }
}
BENCHMARK(BM_StateVerify)->Name("state_verify");

// Seed 004's "read": verify, then read every field in place.
void BM_StateVerifiedRead(benchmark::State& state) {
  const std::string bytes = EncodeState(FailedTwiceState());
  for (auto _ : state) {
    const fb::TaskState* t = nullptr;
    if (!VerifyState(kId, bytes, &t).ok()) {
      state.SkipWithError("verification failed");
      break;
    }
    uint64_t sum =
        t->id() + static_cast<uint64_t>(t->status()) + t->attempts() +
        t->max_attempts() +
        static_cast<uint64_t>(t->updated_us() + t->next_attempt_us()) +
        (t->last_error() != nullptr ? t->last_error()->size() : 0) +
        static_cast<uint64_t>(t->cancel_requested()) +
        (t->handoff_reference() != nullptr ? t->handoff_reference()->size()
                                           : 0) +
        t->failures_total() +
        (t->retry() != nullptr
             ? static_cast<uint64_t>(t->retry()->initial_delay_us())
             : 0) +
        t->type()->size() + static_cast<uint64_t>(t->priority()) +
        t->sequence() +
        (t->stored_group() != nullptr ? t->stored_group()->size() : 0) +
        (t->stored_dedup_key() != nullptr ? t->stored_dedup_key()->size() : 0) +
        (t->depends_on() != nullptr ? t->depends_on()->size() : 0) +
        static_cast<uint64_t>(t->on_dependency_failure()) +
        static_cast<uint64_t>(t->timeout_us());
    benchmark::DoNotOptimize(sum);
  }
}
BENCHMARK(BM_StateVerifiedRead)->Name("state_verified_read");

// What the writer does per transition before changing the state.
void BM_StateDecode(benchmark::State& state) {
  const std::string bytes = EncodeState(FailedTwiceState());
  StateRecord record;
  for (auto _ : state) {
    if (!DecodeState(kId, bytes, &record).ok()) {
      state.SkipWithError("decode failed");
      break;
    }
    benchmark::DoNotOptimize(record.last_error.data());
  }
}
BENCHMARK(BM_StateDecode)->Name("state_decode");

// A whole transition's codec work, as the writer does a claim: decode the
// stored state, change it, encode it again. (The writer also derives the
// index entries of the state before and after: index_entries_of.)
void BM_StateTransition(benchmark::State& state) {
  const std::string bytes = EncodeState(TypicalState());
  flatbuffers::FlatBufferBuilder builder(1024);
  StateRecord record;
  for (auto _ : state) {
    if (!DecodeState(kId, bytes, &record).ok()) {
      state.SkipWithError("decode failed");
      break;
    }
    record.status = TaskStatus::kRunning;
    record.attempts += 1;
    record.updated_us += 1;
    EncodeState(record, &builder);
    benchmark::DoNotOptimize(builder.GetBufferPointer());
  }
  state.counters["bytes"] = static_cast<double>(builder.GetSize());
}
BENCHMARK(BM_StateTransition)->Name("state_transition");

// ---- Failure entries: one per failed attempt ----

void BM_FailureEncode(benchmark::State& state) {
  const FailureEntry failure{2, kCreatedUs + 200000, "timeout after 30s"};
  flatbuffers::FlatBufferBuilder builder(256);
  for (auto _ : state) {
    EncodeFailure(failure, &builder);
    benchmark::DoNotOptimize(builder.GetBufferPointer());
  }
  state.counters["bytes"] = static_cast<double>(builder.GetSize());
}
BENCHMARK(BM_FailureEncode)->Name("failure_encode");

// ---- A whole task: what every read pays ----

// Verify spec and state, as TaskBytes does for every task a reader returns.
void BM_TaskVerify(benchmark::State& state) {
  TaskBytes task;
  FillTask(&task, TypicalState(), {});
  for (auto _ : state) {
    if (!task.Verify(kId).ok()) {
      state.SkipWithError("verification failed");
      break;
    }
    benchmark::DoNotOptimize(task.view().state);
  }
}
BENCHMARK(BM_TaskVerify)->Name("task_verify");

// The same with a last error and two failure entries.
void BM_TaskVerifyWithFailures(benchmark::State& state) {
  TaskBytes task;
  FillTask(&task, FailedTwiceState(), FailedTwiceFailures());
  for (auto _ : state) {
    if (!task.Verify(kId).ok()) {
      state.SkipWithError("verification failed");
      break;
    }
    benchmark::DoNotOptimize(task.view().state);
  }
}
BENCHMARK(BM_TaskVerifyWithFailures)->Name("task_verify_with_failures");

// What GetTask does with the bytes: verify, then fill the public TaskInfo.
void BM_TaskToTaskInfo(benchmark::State& state) {
  TaskBytes task;
  FillTask(&task, TypicalState(), {});
  for (auto _ : state) {
    if (!task.Verify(kId).ok()) {
      state.SkipWithError("verification failed");
      break;
    }
    TaskInfo info;
    FillTaskInfo(task.view(), &info);
    benchmark::DoNotOptimize(info.payload.data());
  }
}
BENCHMARK(BM_TaskToTaskInfo)->Name("task_to_task_info");

// One task's JSON, written in place from a verified view into a reused
// buffer (json_bench.cc measures whole listings).
void BM_TaskJson(benchmark::State& state) {
  TaskBytes task;
  FillTask(&task, FailedTwiceState(), FailedTwiceFailures());
  if (!task.Verify(kId).ok()) {
    state.SkipWithError("verification failed");
    return;
  }
  std::string out;
  for (auto _ : state) {
    out.clear();
    AppendTaskJson(task.view(), PayloadFormat::kBinary, &out);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["json_bytes"] = static_cast<double>(out.size());
}
BENCHMARK(BM_TaskJson)->Name("task_json");

// ---- Keys ----

void BM_StateKeyEncode(benchmark::State& state) {
  TaskId id = 1;
  for (auto _ : state) {
    std::string key = StateKey(id++);
    benchmark::DoNotOptimize(key.data());
  }
}
BENCHMARK(BM_StateKeyEncode)->Name("key_state_encode");

// A queued task's status entry: its key and queue value.
void BM_StatusEntryEncode(benchmark::State& state) {
  QueueValue value{5, 1, 0, ""};
  TaskId id = 1;
  for (auto _ : state) {
    std::string k = StatusIndexKey(TaskStatus::kPending, "email.send", id++);
    std::string v = EncodeQueueValue(value);
    ++value.sequence;
    benchmark::DoNotOptimize(k.data());
    benchmark::DoNotOptimize(v.data());
  }
}
BENCHMARK(BM_StatusEntryEncode)->Name("key_status_entry_encode");

// What the scheduler does per queued task it loads.
void BM_StatusEntryDecode(benchmark::State& state) {
  const std::string key =
      StatusIndexKey(TaskStatus::kPending, "email.send", 123456789);
  const std::string value = EncodeQueueValue({-3, 123456789, 0, "tenant-7"});
  TaskStatus status;
  std::string_view type;
  TaskId id = 0;
  QueueValue decoded;
  for (auto _ : state) {
    bool ok = DecodeStatusIndexKey(key, &status, &type, &id) &&
              DecodeQueueValue(value, &decoded);
    benchmark::DoNotOptimize(ok);
    benchmark::DoNotOptimize(id);
    benchmark::DoNotOptimize(decoded);
  }
}
BENCHMARK(BM_StatusEntryDecode)->Name("key_status_entry_decode");

// A delayed task's due entry: its key and id value.
void BM_DueEntryEncode(benchmark::State& state) {
  int64_t due_us = kCreatedUs;
  uint64_t sequence = 1;
  for (auto _ : state) {
    std::string k = DueIndexKey(due_us, sequence);
    std::string v = IdValue(sequence);
    ++sequence;
    benchmark::DoNotOptimize(k.data());
    benchmark::DoNotOptimize(v.data());
  }
}
BENCHMARK(BM_DueEntryEncode)->Name("key_due_entry_encode");

// Every index entry a retry-scheduled task with a group implies (status,
// due, type and group entries): what each transition derives twice, for the
// state before and after.
void BM_IndexEntriesOf(benchmark::State& state) {
  StateRecord record = FailedTwiceState();
  record.stored_group = "tenant-7";
  for (auto _ : state) {
    std::vector<IndexEntry> entries = IndexEntriesOf(record);
    benchmark::DoNotOptimize(entries.data());
  }
}
BENCHMARK(BM_IndexEntriesOf)->Name("index_entries_of");

}  // namespace
}  // namespace spool::storage
