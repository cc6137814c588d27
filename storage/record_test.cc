#include "storage/record.h"

#include <random>

#include <gtest/gtest.h>

#include "storage/task_record_generated.h"

namespace spool::storage {
namespace {

TaskRecord SampleRecord() {
  TaskRecord r;
  r.id = 42;
  r.type = "email.send";
  r.payload = std::string("\0binary\xff", 8);
  r.status = TaskStatus::kRetryScheduled;
  r.priority = -7;
  r.attempts = 2;
  r.max_attempts = 5;
  r.created_us = 1000;
  r.updated_us = 2000;
  r.next_attempt_us = 3000;
  r.sequence = 99;
  r.last_error = "timeout";
  r.retry = RetryPolicy::Exponential(5, Duration(10), Duration(1000), 0.25);
  r.failures.push_back({1, 1500, "refused"});
  r.failures.push_back({2, 1900, "timeout"});
  r.group = "customer-7";
  r.dedup_key = "invoice-99";
  r.idempotency_key = "idem-1";
  r.depends_on = {3, 5};
  r.on_dependency_failure = DependencyFailure::kRun;
  r.timeout_us = 250000;
  r.cancel_requested = true;
  r.handoff_reference = "upload-17";
  r.payload_version = 4;
  r.periodic_name = "nightly";
  r.periodic_slot_us = 86400000000;
  return r;
}

TEST(RecordTest, RoundTripKeepsEveryField) {
  TaskRecord in = SampleRecord();
  std::string bytes = EncodeRecord(in);
  TaskRecord out;
  ASSERT_TRUE(DecodeRecord(42, bytes, &out).ok());
  EXPECT_EQ(out.id, in.id);
  EXPECT_EQ(out.type, in.type);
  EXPECT_EQ(out.payload, in.payload);
  EXPECT_EQ(out.status, in.status);
  EXPECT_EQ(out.priority, in.priority);
  EXPECT_EQ(out.attempts, in.attempts);
  EXPECT_EQ(out.max_attempts, in.max_attempts);
  EXPECT_EQ(out.created_us, in.created_us);
  EXPECT_EQ(out.updated_us, in.updated_us);
  EXPECT_EQ(out.next_attempt_us, in.next_attempt_us);
  EXPECT_EQ(out.sequence, in.sequence);
  EXPECT_EQ(out.last_error, in.last_error);
  EXPECT_EQ(out.retry.kind, in.retry.kind);
  EXPECT_EQ(out.retry.initial_delay, in.retry.initial_delay);
  EXPECT_EQ(out.retry.max_delay, in.retry.max_delay);
  EXPECT_EQ(out.retry.jitter, in.retry.jitter);
  ASSERT_EQ(out.failures.size(), 2u);
  EXPECT_EQ(out.failures[1].error, "timeout");
  EXPECT_EQ(out.failures[0].attempt, 1u);
  EXPECT_EQ(out.group, in.group);
  EXPECT_EQ(out.dedup_key, in.dedup_key);
  EXPECT_EQ(out.idempotency_key, in.idempotency_key);
  EXPECT_EQ(out.depends_on, in.depends_on);
  EXPECT_EQ(out.on_dependency_failure, in.on_dependency_failure);
  EXPECT_EQ(out.timeout_us, in.timeout_us);
  EXPECT_EQ(out.cancel_requested, in.cancel_requested);
  EXPECT_EQ(out.handoff_reference, in.handoff_reference);
  EXPECT_EQ(out.payload_version, in.payload_version);
  EXPECT_EQ(out.periodic_name, in.periodic_name);
  EXPECT_EQ(out.periodic_slot_us, in.periodic_slot_us);
}

TEST(RecordTest, InPlaceReadMatchesDecode) {
  std::string bytes = EncodeRecord(SampleRecord());
  const fb::TaskRecord* table = nullptr;
  ASSERT_TRUE(VerifyRecord(42, bytes, &table).ok());
  TaskInfo info;
  FillTaskInfo(*table, &info);
  EXPECT_EQ(info.id, 42u);
  EXPECT_EQ(info.type, "email.send");
  EXPECT_EQ(info.status, TaskStatus::kRetryScheduled);
  ASSERT_TRUE(info.next_attempt_at.has_value());
  EXPECT_EQ(info.next_attempt_at->time_since_epoch().count(), 3000);
}

TEST(RecordTest, RecordsFromBeforeLaterFieldsLoadWithDefaults) {
  // A record as the first schema wrote it: no group, keys, dependencies,
  // timeout or versions. FlatBuffers fields only ever get appended, so it
  // must read with their defaults.
  flatbuffers::FlatBufferBuilder builder;
  auto type = builder.CreateString("t");
  fb::TaskRecordBuilder table(builder);
  table.add_id(5);
  table.add_type(type);
  table.add_status(fb::Status::Pending);
  table.add_max_attempts(2);
  fb::FinishTaskRecordBuffer(builder, table.Finish());
  std::string bytes(reinterpret_cast<const char*>(builder.GetBufferPointer()),
                    builder.GetSize());
  TaskRecord out;
  ASSERT_TRUE(DecodeRecord(5, bytes, &out).ok());
  EXPECT_EQ(out.max_attempts, 2u);
  EXPECT_TRUE(out.group.empty());
  EXPECT_TRUE(out.depends_on.empty());
  EXPECT_EQ(out.on_dependency_failure, DependencyFailure::kCancel);
  EXPECT_EQ(out.timeout_us, 0);
  EXPECT_FALSE(out.cancel_requested);
  EXPECT_EQ(out.payload_version, 0u);
  EXPECT_EQ(out.retry.kind, RetryPolicy::Kind::kNone);
}

TEST(RecordTest, WrongIdIsCorruptionNamingTheTask) {
  std::string bytes = EncodeRecord(SampleRecord());
  TaskRecord out;
  Status s = DecodeRecord(43, bytes, &out);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("task 43"), std::string::npos) << s.ToString();
}

TEST(RecordTest, GarbageAndTruncationAreDetected) {
  TaskRecord out;
  EXPECT_TRUE(DecodeRecord(1, "", &out).IsCorruption());
  EXPECT_TRUE(DecodeRecord(1, "not a flatbuffer at all", &out).IsCorruption());
  std::string bytes = EncodeRecord(SampleRecord());
  // The last few bytes may be alignment padding that nothing refers to;
  // cutting into real data must always be detected.
  for (size_t cut = 0; cut + 8 < bytes.size(); cut += 3) {
    EXPECT_FALSE(DecodeRecord(42, bytes.substr(0, cut), &out).ok()) << cut;
  }
}

TEST(RecordTest, BitFlipsNeverCrashAndAreMostlyDetected) {
  std::string clean = EncodeRecord(SampleRecord());
  std::mt19937 rng(1234);
  int detected = 0;
  const int kTrials = 5000;
  for (int i = 0; i < kTrials; ++i) {
    std::string bytes = clean;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      bytes[rng() % bytes.size()] ^= static_cast<char>(1u << (rng() % 8));
    }
    TaskRecord out;
    if (!DecodeRecord(42, bytes, &out).ok()) ++detected;
  }
  // Flips inside payload or string bytes are undetectable by structure alone;
  // the point is that none of them crashes.
  EXPECT_GT(detected, 0);
}

TEST(RecordTest, OutOfRangeStatusIsCorruption) {
  TaskRecord r = SampleRecord();
  r.status = static_cast<TaskStatus>(200);
  TaskRecord out;
  EXPECT_TRUE(DecodeRecord(42, EncodeRecord(r), &out).IsCorruption());
}

TEST(RecordTest, FailureHistoryIsBounded) {
  TaskRecord r;
  for (uint32_t i = 1; i <= kMaxFailureHistory + 5; ++i) {
    RecordFailure(&r, i, i * 10, "error " + std::to_string(i));
  }
  ASSERT_EQ(r.failures.size(), kMaxFailureHistory);
  EXPECT_EQ(r.failures.front().attempt, 6u);
  EXPECT_EQ(r.last_error, "error " + std::to_string(kMaxFailureHistory + 5));
  RecordFailure(&r, 99, 0, std::string(kMaxErrorBytes * 2, 'x'));
  EXPECT_EQ(r.last_error.size(), kMaxErrorBytes);
  // A cut never splits a multi-byte character: "é" is 0xC3 0xA9.
  std::string accented;
  while (accented.size() < kMaxErrorBytes * 2) accented += "\xC3\xA9";
  RecordFailure(&r, 100, 0, accented);
  ASSERT_GE(r.last_error.size(), 4u);
  std::string_view body(r.last_error.data(), r.last_error.size() - 3);
  EXPECT_EQ(body.size() % 2, 0u);
  EXPECT_EQ(static_cast<uint8_t>(body.back()), 0xA9);
}

}  // namespace
}  // namespace spool::storage
