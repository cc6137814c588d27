// Codec microbenchmarks: the task record's FlatBuffers build and verified
// read, and the key encodings, as Google Benchmark benchmarks. The JSON
// listing benchmarks live in json_bench.cc, in the same set.
//
// These are the per-task CPU costs under every storage operation: the writer
// decodes and re-encodes a record per state change, a reader verifies one
// per query, and every index entry is a key encoding. Seed 004 (the
// objectbox FlatBuffers benchmark) reports the same two figures, build and
// read in operations per second, for Dart and Go.
//
// spool-bench runs them as its `codec` scenario; spool-microbench runs them
// on their own, with Google Benchmark's usual flags.

#include <string>

#include <benchmark/benchmark.h>
#include <flatbuffers/flatbuffers.h>

#include "storage/keys.h"
#include "storage/record.h"
#include "storage/task_record_generated.h"

namespace spool::storage {
namespace {

// A record as a fresh enqueue stores it: the scenarios' 100-byte payload.
TaskRecord TypicalRecord() {
  TaskRecord r;
  r.id = 1234567;
  r.type = "email.send";
  r.payload = std::string(100, 'p');
  r.status = TaskStatus::kPending;
  r.priority = 0;
  r.attempts = 0;
  r.max_attempts = 3;
  r.created_us = 1709211909000123;
  r.updated_us = r.created_us;
  r.sequence = 987654;
  r.retry = RetryPolicy{};
  return r;
}

// The same after two failed attempts: a failure history and a last error.
TaskRecord FailedTwiceRecord() {
  TaskRecord r = TypicalRecord();
  r.status = TaskStatus::kRetryScheduled;
  r.attempts = 2;
  r.next_attempt_us = r.created_us + 4000000;
  RecordFailure(&r, 1, r.created_us + 100000,
                "connection refused by smtp.example.com:25");
  RecordFailure(&r, 2, r.created_us + 200000, "timeout after 30s");
  return r;
}

void BuildRecord(benchmark::State& state, const TaskRecord& record) {
  flatbuffers::FlatBufferBuilder builder(1024);
  for (auto _ : state) {
    EncodeRecord(record, &builder);
    benchmark::DoNotOptimize(builder.GetBufferPointer());
  }
  state.counters["bytes"] = static_cast<double>(builder.GetSize());
}

void BM_RecordBuild(benchmark::State& state) {
  BuildRecord(state, TypicalRecord());
}
BENCHMARK(BM_RecordBuild)->Name("record_build");

void BM_RecordBuildWithFailures(benchmark::State& state) {
  BuildRecord(state, FailedTwiceRecord());
}
BENCHMARK(BM_RecordBuildWithFailures)->Name("record_build_with_failures");

// Verification alone: what every read pays before it trusts the bytes.
void BM_RecordVerify(benchmark::State& state) {
  const std::string bytes = EncodeRecord(TypicalRecord());
  for (auto _ : state) {
    const fb::TaskRecord* table = nullptr;
    Status s = VerifyRecord(1234567, bytes, &table);
    benchmark::DoNotOptimize(table);
    if (!s.ok()) state.SkipWithError("verification failed");
  }
}
BENCHMARK(BM_RecordVerify)->Name("record_verify");

// Seed 004's "read": verify, then read every field in place.
void BM_RecordVerifiedRead(benchmark::State& state) {
  const std::string bytes = EncodeRecord(TypicalRecord());
  for (auto _ : state) {
    const fb::TaskRecord* t = nullptr;
    if (!VerifyRecord(1234567, bytes, &t).ok()) {
      state.SkipWithError("verification failed");
      break;
    }
    uint64_t sum = t->id() + t->type()->size() + t->payload()->size() +
                   static_cast<uint64_t>(t->status()) +
                   static_cast<uint64_t>(t->priority()) + t->attempts() +
                   t->max_attempts() +
                   static_cast<uint64_t>(t->created_us() + t->updated_us() +
                                         t->next_attempt_us()) +
                   t->sequence() +
                   (t->last_error() != nullptr ? t->last_error()->size() : 0) +
                   (t->retry() != nullptr
                        ? static_cast<uint64_t>(t->retry()->initial_delay_us())
                        : 0) +
                   (t->failures() != nullptr ? t->failures()->size() : 0);
    benchmark::DoNotOptimize(sum);
  }
}
BENCHMARK(BM_RecordVerifiedRead)->Name("record_verified_read");

// What the writer does per state change before re-encoding.
void BM_RecordDecode(benchmark::State& state) {
  const std::string bytes = EncodeRecord(FailedTwiceRecord());
  TaskRecord record;
  for (auto _ : state) {
    if (!DecodeRecord(1234567, bytes, &record).ok()) {
      state.SkipWithError("decode failed");
      break;
    }
    benchmark::DoNotOptimize(record.payload.data());
  }
}
BENCHMARK(BM_RecordDecode)->Name("record_decode");

// What GetTask does with the bytes: verify, then fill the public TaskInfo.
void BM_RecordToTaskInfo(benchmark::State& state) {
  const std::string bytes = EncodeRecord(TypicalRecord());
  for (auto _ : state) {
    const fb::TaskRecord* table = nullptr;
    if (!VerifyRecord(1234567, bytes, &table).ok()) {
      state.SkipWithError("verification failed");
      break;
    }
    TaskInfo info;
    FillTaskInfo(*table, &info);
    benchmark::DoNotOptimize(info.payload.data());
  }
}
BENCHMARK(BM_RecordToTaskInfo)->Name("record_to_task_info");

void BM_TaskKeyEncode(benchmark::State& state) {
  TaskId id = 1;
  for (auto _ : state) {
    std::string key = TaskKey(id++);
    benchmark::DoNotOptimize(key.data());
  }
}
BENCHMARK(BM_TaskKeyEncode)->Name("key_task_encode");

void BM_ReadyKeyEncode(benchmark::State& state) {
  ReadyKey key{5, 1};
  for (auto _ : state) {
    std::string encoded = EncodeReadyKey(key);
    ++key.sequence;
    benchmark::DoNotOptimize(encoded.data());
  }
}
BENCHMARK(BM_ReadyKeyEncode)->Name("key_ready_encode");

void BM_ReadyKeyDecode(benchmark::State& state) {
  const std::string encoded = EncodeReadyKey({-3, 123456789});
  ReadyKey key;
  for (auto _ : state) {
    bool ok = DecodeReadyKey(encoded, &key);
    benchmark::DoNotOptimize(ok);
    benchmark::DoNotOptimize(key);
  }
}
BENCHMARK(BM_ReadyKeyDecode)->Name("key_ready_decode");

void BM_ScheduledEntryEncode(benchmark::State& state) {
  ScheduledKey key{1709211909000123, 1};
  for (auto _ : state) {
    std::string k = EncodeScheduledKey(key);
    std::string v = EncodeQueueValue({key.sequence, 7, "email.send", ""});
    ++key.sequence;
    benchmark::DoNotOptimize(k.data());
    benchmark::DoNotOptimize(v.data());
  }
}
BENCHMARK(BM_ScheduledEntryEncode)->Name("key_scheduled_encode");

}  // namespace
}  // namespace spool::storage
