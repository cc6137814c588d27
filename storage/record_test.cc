#include "storage/record.h"

#include <cstring>
#include <memory>
#include <random>

#include <flatbuffers/flatbuffers.h>
#include <gtest/gtest.h>

#include "storage/task_record_generated.h"

namespace spool::storage {
namespace {

SpecRecord SampleSpec() {
  SpecRecord s;
  s.id = 42;
  s.type = "email.send";
  s.payload = std::string("\0binary\xff", 8);
  s.created_us = 1000;
  s.group = "customer-7";
  s.dedup_key = "invoice-99";
  s.idempotency_key = "idem-1";
  s.payload_version = 4;
  s.periodic_name = "nightly";
  s.periodic_slot_us = 86400000000;
  return s;
}

StateRecord SampleState() {
  StateRecord s;
  s.id = 42;
  s.status = TaskStatus::kRetryScheduled;
  s.attempts = 2;
  s.max_attempts = 5;
  s.updated_us = 2000;
  s.next_attempt_us = 3000;
  s.last_error = "timeout";
  s.cancel_requested = true;
  s.handoff_reference = "upload-17";
  s.failures_total = 2;
  s.retry = RetryPolicy::Exponential(5, Duration(10), Duration(1000), 0.25);
  s.type = "email.send";
  s.priority = -7;
  s.sequence = 99;
  s.stored_group = "customer-7";
  s.stored_dedup_key = "invoice-99";
  s.depends_on = {3, 5};
  s.on_dependency_failure = DependencyFailure::kRun;
  s.timeout_us = 250000;
  return s;
}

std::vector<FailureEntry> SampleFailures() {
  return {{1, 1500, "refused"}, {2, 1900, "timeout"}};
}

// The three kinds, for tests that treat them alike.
enum class Kind { kSpec, kState, kFailure };
const Kind kKinds[] = {Kind::kSpec, Kind::kState, Kind::kFailure};

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kSpec:
      return "spec";
    case Kind::kState:
      return "state";
    case Kind::kFailure:
      return "failure";
  }
  return "?";
}

std::string EncodeSample(Kind kind) {
  switch (kind) {
    case Kind::kSpec:
      return EncodeSpec(SampleSpec());
    case Kind::kState:
      return EncodeState(SampleState());
    case Kind::kFailure:
      return EncodeFailure(SampleFailures()[0]);
  }
  return "";
}

// Verifies `bytes` as a value of `kind` of task `id`.
Status VerifyAs(Kind kind, TaskId id, std::string_view bytes) {
  switch (kind) {
    case Kind::kSpec: {
      const fb::TaskSpec* t = nullptr;
      Status s = VerifySpec(id, bytes, &t);
      if (s.ok()) {
        EXPECT_NE(t, nullptr);
      }
      return s;
    }
    case Kind::kState: {
      const fb::TaskState* t = nullptr;
      Status s = VerifyState(id, bytes, &t);
      if (s.ok()) {
        EXPECT_NE(t, nullptr);
      }
      return s;
    }
    case Kind::kFailure: {
      const fb::Failure* t = nullptr;
      Status s = VerifyFailure(id, bytes, &t);
      if (s.ok()) {
        EXPECT_NE(t, nullptr);
      }
      return s;
    }
  }
  return Status::OK();
}

// Decodes `bytes` as `kind`, copying every field out.
Status DecodeAs(Kind kind, TaskId id, std::string_view bytes) {
  switch (kind) {
    case Kind::kSpec: {
      SpecRecord out;
      return DecodeSpec(id, bytes, &out);
    }
    case Kind::kState: {
      StateRecord out;
      return DecodeState(id, bytes, &out);
    }
    case Kind::kFailure: {
      FailureEntry out;
      return DecodeFailure(id, bytes, &out);
    }
  }
  return Status::OK();
}

// A buffer whose data starts `offset` bytes past an 8-byte boundary.
class OffsetBuffer {
 public:
  OffsetBuffer(std::string_view bytes, size_t offset)
      : storage_(new uint64_t[(bytes.size() + offset) / 8 + 1]),
        data_(reinterpret_cast<char*>(storage_.get()) + offset),
        size_(bytes.size()) {
    std::memcpy(data_, bytes.data(), bytes.size());
  }
  std::string_view view() const { return std::string_view(data_, size_); }

 private:
  std::unique_ptr<uint64_t[]> storage_;
  char* data_;
  size_t size_;
};

std::string Bytes(const flatbuffers::FlatBufferBuilder& builder) {
  return std::string(reinterpret_cast<const char*>(builder.GetBufferPointer()),
                     builder.GetSize());
}

TEST(RecordTest, SpecRoundTripKeepsEveryField) {
  SpecRecord in = SampleSpec();
  std::string bytes = EncodeSpec(in);
  SpecRecord out;
  ASSERT_TRUE(DecodeSpec(42, bytes, &out).ok());
  EXPECT_EQ(out.id, in.id);
  EXPECT_EQ(out.type, in.type);
  EXPECT_EQ(out.payload, in.payload);
  EXPECT_EQ(out.created_us, in.created_us);
  EXPECT_EQ(out.group, in.group);
  EXPECT_EQ(out.dedup_key, in.dedup_key);
  EXPECT_EQ(out.idempotency_key, in.idempotency_key);
  EXPECT_EQ(out.payload_version, in.payload_version);
  EXPECT_EQ(out.periodic_name, in.periodic_name);
  EXPECT_EQ(out.periodic_slot_us, in.periodic_slot_us);

  // The builder form gives the same bytes, and clears the builder first.
  flatbuffers::FlatBufferBuilder builder;
  EncodeState(SampleState(), &builder);
  EncodeSpec(in, &builder);
  EXPECT_EQ(Bytes(builder), bytes);

  // Empty optional fields read back empty.
  SpecRecord bare;
  bare.id = 1;
  bare.type = "t";
  ASSERT_TRUE(DecodeSpec(1, EncodeSpec(bare), &out).ok());
  EXPECT_TRUE(out.payload.empty());
  EXPECT_TRUE(out.group.empty());
  EXPECT_TRUE(out.dedup_key.empty());
  EXPECT_TRUE(out.idempotency_key.empty());
  EXPECT_TRUE(out.periodic_name.empty());
  EXPECT_EQ(out.payload_version, 0u);
}

TEST(RecordTest, StateRoundTripKeepsEveryField) {
  StateRecord in = SampleState();
  std::string bytes = EncodeState(in);
  StateRecord out;
  ASSERT_TRUE(DecodeState(42, bytes, &out).ok());
  EXPECT_EQ(out.id, in.id);
  EXPECT_EQ(out.status, in.status);
  EXPECT_EQ(out.attempts, in.attempts);
  EXPECT_EQ(out.max_attempts, in.max_attempts);
  EXPECT_EQ(out.updated_us, in.updated_us);
  EXPECT_EQ(out.next_attempt_us, in.next_attempt_us);
  EXPECT_EQ(out.last_error, in.last_error);
  EXPECT_EQ(out.cancel_requested, in.cancel_requested);
  EXPECT_EQ(out.handoff_reference, in.handoff_reference);
  EXPECT_EQ(out.failures_total, in.failures_total);
  EXPECT_EQ(out.retry.kind, in.retry.kind);
  EXPECT_EQ(out.retry.initial_delay, in.retry.initial_delay);
  EXPECT_EQ(out.retry.max_delay, in.retry.max_delay);
  EXPECT_EQ(out.retry.jitter, in.retry.jitter);
  EXPECT_EQ(out.retry.max_attempts, in.max_attempts);
  EXPECT_EQ(out.type, in.type);
  EXPECT_EQ(out.priority, in.priority);
  EXPECT_EQ(out.sequence, in.sequence);
  EXPECT_EQ(out.stored_group, in.stored_group);
  EXPECT_EQ(out.stored_dedup_key, in.stored_dedup_key);
  EXPECT_EQ(out.depends_on, in.depends_on);
  EXPECT_EQ(out.on_dependency_failure, in.on_dependency_failure);
  EXPECT_EQ(out.timeout_us, in.timeout_us);
  EXPECT_EQ(out.snoozes, 0u);
  EXPECT_EQ(out.interrupted_attempts, 0u);
  EXPECT_EQ(out.result, std::nullopt);
  EXPECT_TRUE(out.new_failures.empty());

  // Without a snooze or a result, neither field is stored: a state stays as
  // long as it was before they existed.
  const fb::TaskState* table = nullptr;
  ASSERT_TRUE(VerifyState(42, bytes, &table).ok());
  EXPECT_FALSE(reinterpret_cast<const flatbuffers::Table*>(table)->CheckField(
      fb::TaskState::VT_SNOOZES));
  EXPECT_FALSE(reinterpret_cast<const flatbuffers::Table*>(table)->CheckField(
      fb::TaskState::VT_RESULT));
  EXPECT_FALSE(reinterpret_cast<const flatbuffers::Table*>(table)->CheckField(
      fb::TaskState::VT_INTERRUPTED_ATTEMPTS));
  in.interrupted_attempts = 3;
  ASSERT_TRUE(DecodeState(42, EncodeState(in), &out).ok());
  EXPECT_EQ(out.interrupted_attempts, 3u);
  in.interrupted_attempts = 0;
  // With them, both survive; an empty result is a result.
  in.snoozes = 7;
  for (const std::string& result :
       {std::string("{\"n\":1}"), std::string("\0\xff", 2), std::string()}) {
    in.result = result;
    ASSERT_TRUE(DecodeState(42, EncodeState(in), &out).ok());
    EXPECT_EQ(out.snoozes, 7u);
    EXPECT_EQ(out.result, std::optional<std::string>(result));
  }
  in.snoozes = 0;
  in.result.reset();

  // Every status, retry kind and dependency policy survives.
  for (size_t s = 0; s < kTaskStatusCount; ++s) {
    in.status = static_cast<TaskStatus>(s);
    ASSERT_TRUE(DecodeState(42, EncodeState(in), &out).ok()) << s;
    EXPECT_EQ(out.status, in.status);
  }
  for (RetryPolicy policy :
       {RetryPolicy::None(), RetryPolicy::Fixed(3, Duration(7)),
        RetryPolicy::Exponential(9, Duration(1), Duration(100), 0.5)}) {
    in.retry = policy;
    ASSERT_TRUE(DecodeState(42, EncodeState(in), &out).ok());
    EXPECT_EQ(out.retry.kind, policy.kind);
    EXPECT_EQ(out.retry.initial_delay, policy.initial_delay);
    EXPECT_EQ(out.retry.max_delay, policy.max_delay);
    EXPECT_EQ(out.retry.jitter, policy.jitter);
  }
  for (DependencyFailure d :
       {DependencyFailure::kCancel, DependencyFailure::kFail,
        DependencyFailure::kRun}) {
    in.on_dependency_failure = d;
    ASSERT_TRUE(DecodeState(42, EncodeState(in), &out).ok());
    EXPECT_EQ(out.on_dependency_failure, d);
  }

  // A state never carries its new failures: they go to the history.
  StateRecord with_new = SampleState();
  RecordFailure(&with_new, 3, 2500, "boom");
  ASSERT_TRUE(DecodeState(42, EncodeState(with_new), &out).ok());
  EXPECT_TRUE(out.new_failures.empty());
  EXPECT_EQ(out.failures_total, 3u);
  EXPECT_EQ(out.last_error, "boom");
}

TEST(RecordTest, FailureRoundTrip) {
  FailureEntry in{7, -12345, std::string("err\0or\xff", 7)};
  std::string bytes = EncodeFailure(in);
  FailureEntry out;
  ASSERT_TRUE(DecodeFailure(1, bytes, &out).ok());
  EXPECT_EQ(out.attempt, 7u);
  EXPECT_EQ(out.at_us, -12345);
  EXPECT_EQ(out.error, in.error);
  flatbuffers::FlatBufferBuilder builder;
  EncodeFailure(in, &builder);
  EXPECT_EQ(Bytes(builder), bytes);
}

// DecodeState fills every field of *state, so a reused StateRecord must
// come back as the stored state; record.h: new_failures is "Empty in a
// state read from storage".
TEST(RecordTest, DecodeStateIntoAReusedRecordClearsItsNewFailures) {
  std::string bytes = EncodeState(SampleState());
  StateRecord reused;
  RecordFailure(&reused, 1, 10, "left over");
  ASSERT_EQ(reused.new_failures.size(), 1u);
  ASSERT_TRUE(DecodeState(42, bytes, &reused).ok());
  EXPECT_EQ(reused.failures_total, 2u);
  EXPECT_EQ(reused.last_error, "timeout");
  // A reused record keeps no failures of the one before, which the next
  // WriteTxn::Update would write into the history a second time.
  EXPECT_TRUE(reused.new_failures.empty());
}

TEST(RecordTest, InPlaceReadMatchesDecode) {
  TaskBytes task;
  *task.mutable_spec() = EncodeSpec(SampleSpec());
  task.set_has_spec();
  *task.mutable_state() = EncodeState(SampleState());
  task.set_has_state();
  for (const FailureEntry& f : SampleFailures()) {
    *task.AddFailure() = EncodeFailure(f);
  }
  ASSERT_TRUE(task.Verify(42).ok());
  const TaskView& view = task.view();
  ASSERT_NE(view.spec, nullptr);
  ASSERT_NE(view.state, nullptr);
  ASSERT_NE(view.failures, nullptr);
  ASSERT_EQ(view.failures->size(), 2u);
  EXPECT_EQ(StatusOf(*view.state), TaskStatus::kRetryScheduled);
  EXPECT_EQ(TypeOf(view), "email.send");

  TaskInfo info;
  FillTaskInfo(view, &info);
  SpecRecord spec = SampleSpec();
  StateRecord state = SampleState();
  EXPECT_EQ(info.id, 42u);
  EXPECT_EQ(info.type, "email.send");
  EXPECT_EQ(info.payload, spec.payload);
  EXPECT_EQ(info.status, TaskStatus::kRetryScheduled);
  EXPECT_EQ(info.priority, -7);
  EXPECT_EQ(info.attempts, 2u);
  EXPECT_EQ(info.max_attempts, 5u);
  EXPECT_EQ(info.created_at.time_since_epoch().count(), 1000);
  EXPECT_EQ(info.updated_at.time_since_epoch().count(), 2000);
  ASSERT_TRUE(info.next_attempt_at.has_value());
  EXPECT_EQ(info.next_attempt_at->time_since_epoch().count(), 3000);
  EXPECT_EQ(info.sequence, 99u);
  EXPECT_EQ(info.last_error, "timeout");
  ASSERT_EQ(info.failures.size(), 2u);
  EXPECT_EQ(info.failures[0].attempt, 1u);
  EXPECT_EQ(info.failures[0].error, "refused");
  EXPECT_EQ(info.failures[1].attempt, 2u);
  EXPECT_EQ(info.failures[1].at.time_since_epoch().count(), 1900);
  EXPECT_EQ(info.failures[1].error, "timeout");
  // The application's group and keys come from the spec, not the state's
  // stored forms.
  EXPECT_EQ(info.group, spec.group);
  EXPECT_EQ(info.dedup_key, spec.dedup_key);
  EXPECT_EQ(info.idempotency_key, spec.idempotency_key);
  EXPECT_EQ(info.depends_on, state.depends_on);
  EXPECT_EQ(info.on_dependency_failure, DependencyFailure::kRun);
  EXPECT_EQ(info.timeout, Duration(250000));
  EXPECT_TRUE(info.cancel_requested);
  EXPECT_EQ(info.handoff_reference, "upload-17");
  EXPECT_EQ(info.payload_version, 4u);

  // A task that may start now has no next attempt time, and one without
  // failures an empty history.
  TaskBytes plain;
  *plain.mutable_spec() = EncodeSpec(SampleSpec());
  plain.set_has_spec();
  StateRecord now = SampleState();
  now.next_attempt_us = 0;
  *plain.mutable_state() = EncodeState(now);
  plain.set_has_state();
  ASSERT_TRUE(plain.Verify(42).ok());
  FillTaskInfo(plain.view(), &info);
  EXPECT_FALSE(info.next_attempt_at.has_value());
  EXPECT_TRUE(info.failures.empty());
}

TEST(RecordTest, TaskBytesNeedsSpecAndStateAndVerifiesEveryFailure) {
  TaskBytes task;
  Status s = task.Verify(42);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("task 42"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("spec is missing"), std::string::npos);
  *task.mutable_spec() = EncodeSpec(SampleSpec());
  task.set_has_spec();
  s = task.Verify(42);
  EXPECT_NE(s.message().find("state is missing"), std::string::npos)
      << s.ToString();
  *task.mutable_state() = EncodeState(SampleState());
  task.set_has_state();
  ASSERT_TRUE(task.Verify(42).ok());
  EXPECT_EQ(task.view().failures->size(), 0u);

  // A damaged failure entry fails the whole task, naming the entry's kind.
  *task.AddFailure() = EncodeFailure(SampleFailures()[0]);
  *task.AddFailure() = "not a failure entry at all";
  s = task.Verify(42);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("failure entry"), std::string::npos)
      << s.ToString();
  EXPECT_EQ(task.view().spec, nullptr) << "no view after a failed Verify";

  // A state passed off as a spec, and the other way round.
  TaskBytes swapped;
  *swapped.mutable_spec() = EncodeState(SampleState());
  swapped.set_has_spec();
  *swapped.mutable_state() = EncodeSpec(SampleSpec());
  swapped.set_has_state();
  EXPECT_TRUE(swapped.Verify(42).IsCorruption());
  // Values of another task.
  TaskBytes good;
  *good.mutable_spec() = EncodeSpec(SampleSpec());
  good.set_has_spec();
  *good.mutable_state() = EncodeState(SampleState());
  good.set_has_state();
  EXPECT_TRUE(good.Verify(43).IsCorruption());
  EXPECT_TRUE(good.Verify(42).ok());
}

TEST(RecordTest, TaskBytesMovesCopiesAndClears) {
  TaskBytes a;
  *a.mutable_spec() = EncodeSpec(SampleSpec());
  a.set_has_spec();
  *a.mutable_state() = EncodeState(SampleState());
  a.set_has_state();
  for (const FailureEntry& f : SampleFailures()) {
    *a.AddFailure() = EncodeFailure(f);
  }
  ASSERT_TRUE(a.Verify(42).ok());
  const std::string spec = a.spec();

  TaskBytes b(std::move(a));
  EXPECT_TRUE(b.has_spec());
  EXPECT_TRUE(b.has_state());
  EXPECT_EQ(b.failure_count(), 2u);
  EXPECT_EQ(b.spec(), spec);
  EXPECT_EQ(b.view().spec, nullptr) << "the view is not carried over";
  EXPECT_FALSE(a.has_spec());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(a.failure_count(), 0u);
  ASSERT_TRUE(b.Verify(42).ok());
  EXPECT_EQ(b.view().failures->size(), 2u);

  TaskBytes c;
  c.CopyFrom(b);
  ASSERT_TRUE(c.Verify(42).ok());
  EXPECT_EQ(c.failure_count(), 2u);
  EXPECT_EQ(c.failure(1), b.failure(1));
  // The copy's view reads its own buffers.
  EXPECT_NE(static_cast<const void*>(c.view().spec),
            static_cast<const void*>(b.view().spec));

  // Clear forgets the values (and the view) but keeps buffers for reuse.
  c.Clear();
  EXPECT_FALSE(c.has_spec());
  EXPECT_FALSE(c.has_state());
  EXPECT_EQ(c.failure_count(), 0u);
  EXPECT_EQ(c.view().state, nullptr);
  *c.AddFailure() = EncodeFailure(SampleFailures()[1]);
  EXPECT_EQ(c.failure_count(), 1u);
  EXPECT_TRUE(c.Verify(42).IsCorruption());

  TaskBytes d;
  d = std::move(b);
  ASSERT_TRUE(d.Verify(42).ok());
  EXPECT_EQ(d.failure_count(), 2u);
}

TEST(RecordTest, ValuesFromBeforeLaterFieldsLoadWithDefaults) {
  // Values as a first writer of the schema might have written them, with
  // only the leading fields. FlatBuffers fields only ever get appended, so
  // they must read with their defaults.
  flatbuffers::FlatBufferBuilder builder;
  auto type = builder.CreateString("t");
  fb::TaskStateBuilder table(builder);
  table.add_id(5);
  table.add_type(type);
  builder.Finish(table.Finish(), "SPST");
  StateRecord state;
  ASSERT_TRUE(DecodeState(5, Bytes(builder), &state).ok());
  EXPECT_EQ(state.status, TaskStatus::kPending);
  EXPECT_EQ(state.max_attempts, 1u);
  EXPECT_EQ(state.failures_total, 0u);
  EXPECT_TRUE(state.stored_group.empty());
  EXPECT_TRUE(state.depends_on.empty());
  EXPECT_EQ(state.on_dependency_failure, DependencyFailure::kCancel);
  EXPECT_EQ(state.timeout_us, 0);
  EXPECT_FALSE(state.cancel_requested);
  EXPECT_EQ(state.retry.kind, RetryPolicy::Kind::kNone);
  EXPECT_EQ(state.retry.max_attempts, 1u);
  EXPECT_EQ(state.snoozes, 0u);
  EXPECT_EQ(state.result, std::nullopt);

  builder.Clear();
  type = builder.CreateString("t");
  fb::TaskSpecBuilder spec_table(builder);
  spec_table.add_id(5);
  spec_table.add_type(type);
  builder.Finish(spec_table.Finish(), "SPSP");
  SpecRecord spec;
  ASSERT_TRUE(DecodeSpec(5, Bytes(builder), &spec).ok());
  EXPECT_TRUE(spec.payload.empty());
  EXPECT_EQ(spec.payload_version, 0u);
  EXPECT_EQ(spec.periodic_slot_us, 0);

  builder.Clear();
  builder.Finish(fb::FailureBuilder(builder).Finish(), "SPFL");
  FailureEntry failure;
  ASSERT_TRUE(DecodeFailure(5, Bytes(builder), &failure).ok());
  EXPECT_EQ(failure.attempt, 0u);
  EXPECT_TRUE(failure.error.empty());
}

TEST(RecordTest, EachKindRefusesTheOthersIdentifier) {
  for (Kind encoded : kKinds) {
    std::string bytes = EncodeSample(encoded);
    for (Kind read_as : kKinds) {
      Status s = VerifyAs(read_as, 42, bytes);
      if (encoded == read_as) {
        EXPECT_TRUE(s.ok()) << KindName(encoded) << ": " << s.ToString();
        EXPECT_TRUE(DecodeAs(read_as, 42, bytes).ok());
        continue;
      }
      EXPECT_TRUE(s.IsCorruption())
          << KindName(encoded) << " read as " << KindName(read_as);
      EXPECT_NE(s.message().find("bad identifier"), std::string::npos)
          << s.ToString();
      EXPECT_NE(s.message().find("task 42"), std::string::npos);
      EXPECT_TRUE(DecodeAs(read_as, 42, bytes).IsCorruption());
    }
  }
  // The right structure under an unknown identifier.
  std::string bytes = EncodeState(SampleState());
  bytes[4] = 'X';
  EXPECT_TRUE(VerifyAs(Kind::kState, 42, bytes).IsCorruption());
  // No identifier at all: a buffer finished without one.
  flatbuffers::FlatBufferBuilder builder;
  auto type = builder.CreateString("t");
  fb::TaskStateBuilder table(builder);
  table.add_id(42);
  table.add_type(type);
  builder.Finish(table.Finish());
  EXPECT_TRUE(VerifyAs(Kind::kState, 42, Bytes(builder)).IsCorruption());
}

TEST(RecordTest, WrongIdIsCorruptionNamingTheTask) {
  for (Kind kind : {Kind::kSpec, Kind::kState}) {
    std::string bytes = EncodeSample(kind);
    Status s = VerifyAs(kind, 43, bytes);
    EXPECT_TRUE(s.IsCorruption()) << KindName(kind);
    EXPECT_NE(s.message().find("task 43"), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find("holds id 42"), std::string::npos)
        << s.ToString();
    EXPECT_TRUE(DecodeAs(kind, 43, bytes).IsCorruption());
  }
  // A failure entry holds no id: it verifies as any task's (encryption
  // binds it to its key; see task_store_crypto_test.cc).
  EXPECT_TRUE(VerifyAs(Kind::kFailure, 43, EncodeSample(Kind::kFailure)).ok());
}

TEST(RecordTest, GarbageAndTruncationAreDetected) {
  for (Kind kind : kKinds) {
    SCOPED_TRACE(KindName(kind));
    EXPECT_TRUE(VerifyAs(kind, 1, "").IsCorruption());
    EXPECT_TRUE(VerifyAs(kind, 1, "1234567").IsCorruption());
    EXPECT_TRUE(VerifyAs(kind, 1, "not a flatbuffer at all").IsCorruption());
    EXPECT_TRUE(DecodeAs(kind, 1, "not a flatbuffer at all").IsCorruption());
    std::string bytes = EncodeSample(kind);
    // The last few bytes may be alignment padding that nothing refers to;
    // cutting into real data must always be detected. Each cut is copied
    // into a string of its own, so that it is aligned (the verifier's
    // precondition) and so that ASan sees reads past its end.
    for (size_t cut = 0; cut + 8 < bytes.size(); ++cut) {
      std::string truncated = bytes.substr(0, cut);
      EXPECT_FALSE(VerifyAs(kind, 42, truncated).ok()) << cut;
      EXPECT_FALSE(DecodeAs(kind, 42, truncated).ok()) << cut;
    }
  }
}

TEST(RecordTest, BitFlipsNeverCrashAndAreMostlyDetected) {
  for (Kind kind : kKinds) {
    SCOPED_TRACE(KindName(kind));
    std::string clean = EncodeSample(kind);
    std::mt19937 rng(1234);
    int detected = 0;
    const int kTrials = 3000;
    for (int i = 0; i < kTrials; ++i) {
      std::string bytes = clean;
      int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f) {
        bytes[rng() % bytes.size()] ^= static_cast<char>(1u << (rng() % 8));
      }
      // Decoding reads every field, dependency lists included.
      if (!DecodeAs(kind, 42, bytes).ok()) ++detected;
    }
    // Flips inside payload or string bytes are undetectable by structure
    // alone; the point is that none of them crashes.
    EXPECT_GT(detected, 0);
  }
}

TEST(RecordTest, OutOfRangeEnumsAreCorruption) {
  StateRecord r = SampleState();
  StateRecord out;
  for (int status : {static_cast<int>(kTaskStatusCount), 200, 255}) {
    r.status = static_cast<TaskStatus>(status);
    std::string bytes = EncodeState(r);
    Status s = DecodeState(42, bytes, &out);
    EXPECT_TRUE(s.IsCorruption()) << status;
    EXPECT_NE(s.message().find("status value " + std::to_string(status)),
              std::string::npos)
        << s.ToString();
    EXPECT_TRUE(VerifyAs(Kind::kState, 42, bytes).IsCorruption());
  }
  r = SampleState();
  r.retry.kind = static_cast<RetryPolicy::Kind>(3);
  Status s = DecodeState(42, EncodeState(r), &out);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("retry kind"), std::string::npos) << s.ToString();
  r = SampleState();
  r.on_dependency_failure = static_cast<DependencyFailure>(3);
  s = DecodeState(42, EncodeState(r), &out);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("dependency failure policy"), std::string::npos)
      << s.ToString();
}

TEST(RecordTest, ATaskWithoutATypeIsCorruption) {
  SpecRecord spec = SampleSpec();
  spec.type.clear();
  Status s = VerifyAs(Kind::kSpec, 42, EncodeSpec(spec));
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("no task type"), std::string::npos)
      << s.ToString();
  StateRecord state = SampleState();
  state.type.clear();
  s = VerifyAs(Kind::kState, 42, EncodeState(state));
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("no task type"), std::string::npos)
      << s.ToString();
}

// FlatBuffers reads scalars in place, so the verifiers require 8-byte
// aligned input; RocksDB hands out values at any address. AlignedRecordBytes
// copies a misaligned value, and the decoders use it themselves.
TEST(RecordTest, MisalignedInputGoesThroughAlignedRecordBytes) {
  for (Kind kind : kKinds) {
    SCOPED_TRACE(KindName(kind));
    std::string clean = EncodeSample(kind);
    for (size_t offset = 0; offset < 8; ++offset) {
      OffsetBuffer buffer(clean, offset);
      std::string_view input = buffer.view();
      ASSERT_EQ(reinterpret_cast<uintptr_t>(input.data()) % 8, offset);
      std::string scratch;
      std::string_view aligned = AlignedRecordBytes(input, &scratch);
      EXPECT_EQ(aligned, clean);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(aligned.data()) % 8, 0u);
      if (offset == 0) {
        EXPECT_EQ(aligned.data(), input.data())
            << "aligned input is not copied";
        EXPECT_TRUE(scratch.empty());
      } else {
        EXPECT_EQ(aligned.data(), scratch.data());
      }
      EXPECT_TRUE(VerifyAs(kind, 42, aligned).ok());
      // The decoders align by themselves (UBSan reports a misaligned load
      // if they do not).
      EXPECT_TRUE(DecodeAs(kind, 42, input).ok()) << offset;
    }
  }
  // A decoded misaligned state has every field.
  OffsetBuffer buffer(EncodeState(SampleState()), 3);
  StateRecord out;
  ASSERT_TRUE(DecodeState(42, buffer.view(), &out).ok());
  EXPECT_EQ(out.depends_on, (std::vector<TaskId>{3, 5}));
  EXPECT_EQ(out.retry.jitter, 0.25);
  EXPECT_EQ(out.timeout_us, 250000);
}

// A damaged offset can leave the 8-byte dependency ids misaligned inside an
// aligned buffer (the verifier only aligns the vector's length); reading
// them would be undefined behaviour, so it is corruption.
TEST(RecordTest, AMisalignedDependencyListIsCorruption) {
  // A state whose offset to its dependency list is moved 4 bytes on: the
  // list's length stays 4-aligned (the verifier is content), its 8-byte
  // elements no longer are.
  StateRecord state = SampleState();
  std::string bytes = EncodeState(state);
  const fb::TaskState* table = nullptr;
  ASSERT_TRUE(VerifyState(42, bytes, &table).ok());
  const auto* deps = table->depends_on();
  ASSERT_NE(deps, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(deps->data()) % 8, 0u);
  // Find the table field (a uoffset_t relative to itself) that points at
  // the vector.
  const auto* base = reinterpret_cast<const uint8_t*>(bytes.data());
  size_t vec_at = reinterpret_cast<const uint8_t*>(deps) - base;
  size_t field_at = 0;
  for (size_t at = 0; at + 4 <= bytes.size(); at += 4) {
    uint32_t rel;
    std::memcpy(&rel, base + at, 4);
    if (at + rel == vec_at) {
      field_at = at;
      break;
    }
  }
  ASSERT_NE(field_at, 0u) << "no offset points at the dependency list";
  std::string damaged = bytes;
  uint32_t rel;
  std::memcpy(&rel, damaged.data() + field_at, 4);
  rel += 4;
  std::memcpy(&damaged[field_at], &rel, 4);
  // Now the vector is read 4 bytes later: its "length" is the low half of
  // the first id (3), its elements start at a 4 mod 8 address.
  Status s = VerifyState(42, damaged, &table);
  EXPECT_TRUE(s.IsCorruption()) << "a misaligned dependency list verified";
  EXPECT_NE(s.message().find("dependency list is misaligned"),
            std::string::npos)
      << s.ToString();
  StateRecord out;
  EXPECT_FALSE(DecodeState(42, damaged, &out).ok());
}

TEST(RecordTest, RecordFailureFeedsTheHistoryAndCutsErrors) {
  StateRecord r;
  for (uint32_t i = 1; i <= kMaxFailureHistory + 5; ++i) {
    RecordFailure(&r, i, i * 10, "error " + std::to_string(i));
  }
  // Every failure goes to the next Update, which keeps the newest
  // kMaxFailureHistory (see task_store_test.cc); the count is of all.
  ASSERT_EQ(r.new_failures.size(), kMaxFailureHistory + 5);
  EXPECT_EQ(r.failures_total, kMaxFailureHistory + 5);
  EXPECT_EQ(r.new_failures.front().attempt, 1u);
  EXPECT_EQ(r.new_failures.front().at_us, 10);
  EXPECT_EQ(r.new_failures.back().error,
            "error " + std::to_string(kMaxFailureHistory + 5));
  EXPECT_EQ(r.last_error, "error " + std::to_string(kMaxFailureHistory + 5));

  RecordFailure(&r, 99, 0, std::string(kMaxErrorBytes * 2, 'x'));
  EXPECT_EQ(r.last_error.size(), kMaxErrorBytes);
  EXPECT_EQ(r.last_error.substr(kMaxErrorBytes - 3), "...");
  EXPECT_EQ(r.new_failures.back().error, r.last_error);
  // A cut never splits a multi-byte character: "é" is 0xC3 0xA9.
  std::string accented;
  while (accented.size() < kMaxErrorBytes * 2) accented += "\xC3\xA9";
  RecordFailure(&r, 100, 0, accented);
  ASSERT_GE(r.last_error.size(), 4u);
  std::string_view body(r.last_error.data(), r.last_error.size() - 3);
  EXPECT_EQ(body.size() % 2, 0u);
  EXPECT_EQ(static_cast<uint8_t>(body.back()), 0xA9);
  EXPECT_LE(r.last_error.size(), kMaxErrorBytes);

  EXPECT_EQ(CutError("short"), "short");
  EXPECT_EQ(CutError(std::string(kMaxErrorBytes, 'y')),
            std::string(kMaxErrorBytes, 'y'));
  EXPECT_EQ(CutError(std::string(kMaxErrorBytes + 1, 'y')).size(),
            kMaxErrorBytes);
}

}  // namespace
}  // namespace spool::storage
