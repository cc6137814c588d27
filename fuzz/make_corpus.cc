// Writes the seed corpus of every fuzz target from spool's real encoders and
// its shipped config:
//
//   build/fuzz/make_corpus fuzz/corpus
//
// writes fuzz/corpus/<target>/<name> for each seed, replacing files of the
// same name and leaving others (e.g. crash inputs added by hand) alone. Run
// it again after a change to the record schema, the key layout or
// config/spool.toml, and commit the result. Seeds stay small: each under
// 32 KiB (the largest, fuzz_config/shipped, is config/spool.toml itself).

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <spool/config.h>
#include <spool/options.h>
#include <spool/task.h>

#include <caf/binary_serializer.hpp>
#include <flatbuffers/flatbuffers.h>

#include "actors/messages.h"
#include "actors/remote_protocol.h"
#include "storage/json_writer.h"
#include "storage/keys.h"
#include "storage/record.h"
#include "storage/record_json.h"
#include "storage/task_record_generated.h"

namespace spool::fuzz {
namespace {

namespace fs = std::filesystem;
using storage::FailureEntry;
using storage::SpecRecord;
using storage::StateRecord;

constexpr size_t kMaxSeedBytes = 32768;

class CorpusWriter {
 public:
  explicit CorpusWriter(fs::path root) : root_(std::move(root)) {}

  void Write(std::string_view target, std::string_view name,
             std::string_view bytes) {
    if (bytes.size() > kMaxSeedBytes) {
      std::fprintf(stderr, "make_corpus: seed %.*s/%.*s is %zu bytes\n",
                   static_cast<int>(target.size()), target.data(),
                   static_cast<int>(name.size()), name.data(), bytes.size());
      failed_ = true;
      return;
    }
    const fs::path dir = root_ / std::string(target);
    fs::create_directories(dir);
    std::ofstream out(dir / std::string(name), std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      std::fprintf(stderr, "make_corpus: cannot write %s\n",
                   (dir / std::string(name)).c_str());
      failed_ = true;
      return;
    }
    ++written_;
  }

  void Fail(const std::string& why) {
    std::fprintf(stderr, "make_corpus: %s\n", why.c_str());
    failed_ = true;
  }

  bool failed() const { return failed_; }
  int written() const { return written_; }

 private:
  fs::path root_;
  bool failed_ = false;
  int written_ = 0;
};

// ---------------------------------------------------------------------------
// Task values (fuzz_record).

constexpr int64_t kT0 = 1'700'000'000'000'000;

std::string Bytes(const flatbuffers::FlatBufferBuilder& builder) {
  return std::string(reinterpret_cast<const char*>(builder.GetBufferPointer()),
                     builder.GetSize());
}

SpecRecord MinimalSpec(TaskId id = 1) {
  SpecRecord s;
  s.id = id;
  s.type = "t";
  s.created_us = kT0;
  return s;
}

StateRecord MinimalState(TaskId id = 1) {
  StateRecord s;
  s.id = id;
  s.type = "t";
  s.updated_us = kT0;
  s.sequence = 1;
  return s;
}

SpecRecord FullSpec() {
  SpecRecord s;
  s.id = 42;
  s.type = "email.send";
  s.payload = std::string("\0binary\xff", 8);
  s.created_us = kT0;
  s.group = "tenant-7";
  s.dedup_key = "order-1234";
  s.idempotency_key = "idem-\xC3\xA9";
  s.payload_version = 3;
  s.periodic_name = "nightly";
  s.periodic_slot_us = kT0 - 86'400'000'000;
  return s;
}

// Retried twice, with every optional field set. Its failures are staged
// in new_failures (the failure entries to write).
StateRecord FullState() {
  StateRecord s;
  s.id = 42;
  s.status = TaskStatus::kRetryScheduled;
  s.priority = -7;
  s.attempts = 2;
  s.max_attempts = 5;
  s.updated_us = kT0 + 500'000;
  s.next_attempt_us = kT0 + 1'000'000;
  s.sequence = 99;
  s.retry = RetryPolicy::Exponential(5, Duration(10), Duration(1000), 0.25);
  s.cancel_requested = true;
  s.handoff_reference = "ext-ref-9";
  s.stored_group = "tenant-7";
  s.stored_dedup_key = "order-1234";
  s.type = "email.send";
  s.depends_on = {3, 5, 8};
  s.on_dependency_failure = DependencyFailure::kRun;
  s.timeout_us = 30'000'000;
  storage::RecordFailure(&s, 1, kT0 + 100'000, "connection refused");
  storage::RecordFailure(&s, 2, kT0 + 400'000, "timeout");
  return s;
}

// A task in fuzz_record's framed form (see fuzz_record.cc): a flags byte,
// then each value with a 4-byte big-endian length.
std::string Framed(const std::string* spec, const std::string* state,
                   const std::vector<std::string>& failures) {
  std::string out(1, static_cast<char>((spec ? 1 : 0) | (state ? 2 : 0)));
  auto add = [&](const std::string& value) {
    storage::PutBigEndian32(&out, static_cast<uint32_t>(value.size()));
    out += value;
  };
  if (spec) add(*spec);
  if (state) add(*state);
  for (const std::string& f : failures) add(f);
  return out;
}

std::vector<std::string> EncodedFailures(const StateRecord& state) {
  std::vector<std::string> out;
  for (const FailureEntry& f : state.new_failures) {
    out.push_back(storage::EncodeFailure(f));
  }
  return out;
}

std::string FramedTask(const SpecRecord& spec, const StateRecord& state) {
  const std::string s = storage::EncodeSpec(spec);
  const std::string t = storage::EncodeState(state);
  return Framed(&s, &t, EncodedFailures(state));
}

// `bytes` with its file identifier (bytes 4..7) replaced.
std::string WithIdentifier(std::string bytes, std::string_view identifier) {
  bytes.replace(4, 4, identifier);
  return bytes;
}

// An encoded state whose dependency list has been moved so that its 8-byte
// elements sit 4 bytes off their alignment, with every other field where
// the builder put it: FlatBuffers' verifier accepts it (it checks only the
// length's alignment), VerifyState must not.
std::string MisalignedDependencies() {
  StateRecord state = MinimalState();
  state.status = TaskStatus::kWaiting;
  state.depends_on = {3, 5, 8};
  std::string bytes = storage::EncodeState(state);
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  const auto table = flatbuffers::ReadScalar<flatbuffers::uoffset_t>(data);
  const auto vtable = static_cast<flatbuffers::uoffset_t>(
      table - flatbuffers::ReadScalar<flatbuffers::soffset_t>(data + table));
  const auto vtable_size =
      flatbuffers::ReadScalar<flatbuffers::voffset_t>(data + vtable);
  if (storage::fb::TaskState::VT_DEPENDS_ON >= vtable_size) return "";
  const auto field_offset = flatbuffers::ReadScalar<flatbuffers::voffset_t>(
      data + vtable + storage::fb::TaskState::VT_DEPENDS_ON);
  if (field_offset == 0) return "";
  const size_t field = table + field_offset;
  // The new vector: its length at 0 mod 8, so its elements at 4 mod 8.
  while (bytes.size() % 8 != 0) bytes.push_back('\0');
  const size_t vector = bytes.size();
  auto put_le = [&](uint64_t value, int n) {
    for (int i = 0; i < n; ++i) {
      bytes.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
    }
  };
  put_le(state.depends_on.size(), 4);
  for (TaskId id : state.depends_on) put_le(id, 8);
  const auto offset = static_cast<uint32_t>(vector - field);
  for (int i = 0; i < 4; ++i) {
    bytes[field + i] = static_cast<char>((offset >> (8 * i)) & 0xff);
  }
  return bytes;
}

void WriteRecords(CorpusWriter* out) {
  const std::string_view t = "fuzz_record";

  // ---- Single values, each kind ----
  out->Write(t, "spec-minimal", storage::EncodeSpec(MinimalSpec()));
  out->Write(t, "spec-full", storage::EncodeSpec(FullSpec()));
  out->Write(t, "state-minimal", storage::EncodeState(MinimalState()));
  out->Write(t, "state-full", storage::EncodeState(FullState()));
  out->Write(t, "failure",
             storage::EncodeFailure({2, kT0 + 400'000, "timeout"}));

  static const char* const kStatusNames[] = {
      "pending", "running",   "retry_scheduled", "succeeded",
      "failed",  "cancelled", "waiting",         "held"};
  for (size_t s = 0; s < kTaskStatusCount; ++s) {
    StateRecord r = MinimalState();
    r.status = static_cast<TaskStatus>(s);
    out->Write(t, std::string("state-status-") + kStatusNames[s],
               storage::EncodeState(r));
  }

  StateRecord fixed = MinimalState();
  fixed.retry = RetryPolicy::Fixed(3, std::chrono::seconds(2));
  fixed.max_attempts = 3;
  out->Write(t, "state-retry-fixed", storage::EncodeState(fixed));
  StateRecord none = MinimalState();
  none.retry = RetryPolicy::None();
  out->Write(t, "state-retry-none", storage::EncodeState(none));
  for (DependencyFailure d :
       {DependencyFailure::kCancel, DependencyFailure::kFail}) {
    StateRecord waiting = MinimalState();
    waiting.status = TaskStatus::kWaiting;
    waiting.depends_on = {2, 3};
    waiting.on_dependency_failure = d;
    out->Write(t,
               d == DependencyFailure::kCancel ? "state-waiting-cancel"
                                               : "state-waiting-fail",
               storage::EncodeState(waiting));
  }

  // Times and numbers at their limits.
  StateRecord extremes = MinimalState(std::numeric_limits<uint64_t>::max());
  extremes.priority = std::numeric_limits<int32_t>::min();
  extremes.updated_us = std::numeric_limits<int64_t>::max();
  extremes.next_attempt_us = -1;
  extremes.sequence = std::numeric_limits<uint64_t>::max();
  extremes.attempts = std::numeric_limits<uint32_t>::max();
  extremes.failures_total = std::numeric_limits<uint32_t>::max();
  extremes.timeout_us = std::numeric_limits<int64_t>::min();
  out->Write(t, "state-extremes", storage::EncodeState(extremes));
  SpecRecord spec_extremes = MinimalSpec(std::numeric_limits<uint64_t>::max());
  spec_extremes.created_us = std::numeric_limits<int64_t>::min();
  spec_extremes.payload_version = std::numeric_limits<uint32_t>::max();
  out->Write(t, "spec-extremes", storage::EncodeSpec(spec_extremes));

  // Optional fields left out, as FlatBuffers allows and the encoders never
  // write: no payload, retry policy or strings, and a failure entry without
  // error text (a null string; the JSON writer once passed its null data()
  // to memcpy, which UBSan reports).
  std::string sparse_spec, sparse_state, sparse_failure, empty_failure;
  {
    flatbuffers::FlatBufferBuilder builder;
    auto type = builder.CreateString("sparse");
    storage::fb::TaskSpecBuilder table(builder);
    table.add_id(7);
    table.add_type(type);
    builder.Finish(table.Finish(), "SPSP");
    sparse_spec = Bytes(builder);
  }
  {
    flatbuffers::FlatBufferBuilder builder;
    auto type = builder.CreateString("sparse");
    storage::fb::TaskStateBuilder table(builder);
    table.add_id(7);
    table.add_type(type);
    builder.Finish(table.Finish(), "SPST");
    sparse_state = Bytes(builder);
  }
  {
    flatbuffers::FlatBufferBuilder builder;
    builder.Finish(storage::fb::CreateFailure(builder, 1, 5), "SPFL");
    sparse_failure = Bytes(builder);
  }
  {
    flatbuffers::FlatBufferBuilder builder;
    builder.Finish(
        storage::fb::CreateFailure(builder, 2, 6, builder.CreateString("")),
        "SPFL");
    empty_failure = Bytes(builder);
  }
  out->Write(t, "spec-sparse-null-fields", sparse_spec);
  out->Write(t, "state-sparse-null-fields", sparse_state);
  out->Write(t, "failure-null-error", sparse_failure);

  // ---- Whole tasks, framed ----
  out->Write(t, "task-minimal", FramedTask(MinimalSpec(), MinimalState()));
  out->Write(t, "task-full", FramedTask(FullSpec(), FullState()));
  out->Write(
      t, "task-sparse-null-fields",
      Framed(&sparse_spec, &sparse_state, {sparse_failure, empty_failure}));

  SpecRecord json = MinimalSpec();
  json.type = "json.task";
  json.payload =
      R"( {"to":"a@example.com","n":[1,2.5e3,-0,true,null],"s":"\u00e9\ud83d\ude00"} )";
  StateRecord json_state = MinimalState();
  json_state.type = json.type;
  out->Write(t, "task-json-payload", FramedTask(json, json_state));

  // A full failure history, each error a different kind of text.
  StateRecord history = MinimalState();
  history.status = TaskStatus::kFailed;
  history.attempts = history.max_attempts = 20;
  for (uint32_t a = 1; a <= 20; ++a) {
    storage::RecordFailure(&history, a, kT0 + a,
                           a % 2 ? "line\nbreak \"quoted\" \xE2\x80\xA8"
                                 : "caf\xC3\xA9 \xF0\x9F\x98\x80 bad \xC3");
  }
  // The store keeps the newest kMaxFailureHistory.
  history.new_failures.erase(
      history.new_failures.begin(),
      history.new_failures.end() - storage::kMaxFailureHistory);
  out->Write(t, "task-history-full", FramedTask(MinimalSpec(), history));

  // A long error, cut to kMaxErrorBytes next to a multi-byte character.
  StateRecord cut = MinimalState();
  std::string long_error(storage::kMaxErrorBytes - 4, 'e');
  long_error += "\xE2\x82\xAC\xE2\x82\xAC";  // Two euro signs across the cut.
  storage::RecordFailure(&cut, 1, 1, long_error);
  out->Write(t, "task-error-cut", FramedTask(MinimalSpec(), cut));

  // Type, payload, keys and error text that are not UTF-8.
  SpecRecord bad_utf8 = MinimalSpec();
  bad_utf8.type = "\xC0\xAF\xED\xA0\x80\xF4\x90\x80\x80";
  bad_utf8.payload = "\xFF\xFE[1]";
  bad_utf8.group = "\xFF";
  bad_utf8.dedup_key = "\xED\xBF\xBF";
  StateRecord bad_utf8_state = MinimalState();
  bad_utf8_state.type = bad_utf8.type;
  storage::RecordFailure(&bad_utf8_state, 1, 1, "\xF8\x88\x80\x80\x80");
  out->Write(t, "task-not-utf8", FramedTask(bad_utf8, bad_utf8_state));

  // ---- Values the verifiers must refuse ----
  const std::string full_spec = storage::EncodeSpec(FullSpec());
  const std::string full_state = storage::EncodeState(FullState());
  const std::string failure = storage::EncodeFailure({1, 5, "boom"});
  out->Write(t, "bad-spec-truncated",
             full_spec.substr(0, full_spec.size() / 2));
  out->Write(t, "bad-state-truncated",
             full_state.substr(0, full_state.size() / 2));
  // (Cut in half: the last bytes of a buffer may be padding, which a cut
  // leaves verifiable.)
  out->Write(t, "bad-failure-truncated", failure.substr(0, failure.size() / 2));
  out->Write(t, "bad-spec-identifier", WithIdentifier(full_spec, "XPSP"));
  out->Write(t, "bad-state-identifier", WithIdentifier(full_state, "XPST"));
  out->Write(t, "bad-failure-identifier", WithIdentifier(failure, "XPFL"));
  // Schema version 1's single record identifier.
  out->Write(t, "bad-old-identifier", WithIdentifier(full_state, "SPTR"));
  // A state where a spec belongs, and the reverse.
  out->Write(t, "bad-state-as-spec", WithIdentifier(full_state, "SPSP"));
  out->Write(t, "bad-spec-as-state", WithIdentifier(full_spec, "SPST"));
  StateRecord bad_status = MinimalState();
  bad_status.status = static_cast<TaskStatus>(kTaskStatusCount);
  out->Write(t, "bad-state-status", storage::EncodeState(bad_status));
  StateRecord no_type = MinimalState();
  no_type.type.clear();
  out->Write(t, "bad-state-empty-type", storage::EncodeState(no_type));
  SpecRecord spec_no_type = MinimalSpec();
  spec_no_type.type.clear();
  out->Write(t, "bad-spec-empty-type", storage::EncodeSpec(spec_no_type));
  StateRecord bad_retry = MinimalState();
  bad_retry.retry.kind = static_cast<RetryPolicy::Kind>(3);
  out->Write(t, "bad-state-retry-kind", storage::EncodeState(bad_retry));
  StateRecord bad_dependency = MinimalState();
  bad_dependency.on_dependency_failure = static_cast<DependencyFailure>(3);
  out->Write(t, "bad-state-dependency-failure",
             storage::EncodeState(bad_dependency));
  const std::string misaligned = MisalignedDependencies();
  if (misaligned.empty()) {
    out->Fail("cannot build bad-state-misaligned-dependencies");
  } else {
    out->Write(t, "bad-state-misaligned-dependencies", misaligned);
  }

  // Tasks TaskBytes::Verify must refuse.
  const std::string min_spec = storage::EncodeSpec(MinimalSpec());
  const std::string min_state = storage::EncodeState(MinimalState());
  out->Write(t, "task-bad-no-spec", Framed(nullptr, &min_state, {}));
  out->Write(t, "task-bad-no-state", Framed(&min_spec, nullptr, {}));
  const std::string other_state = storage::EncodeState(MinimalState(2));
  out->Write(t, "task-bad-id-mismatch", Framed(&min_spec, &other_state, {}));
  out->Write(t, "task-bad-swapped", Framed(&min_state, &min_spec, {}));
  const std::string bad_failure = failure.substr(0, failure.size() / 2);
  out->Write(t, "task-bad-failure",
             Framed(&min_spec, &min_state, {failure, bad_failure}));
  out->Write(t, "task-bad-state-as-failure",
             Framed(&min_spec, &min_state, {min_state}));
}

// ---------------------------------------------------------------------------
// Keys.

// fuzz_keys' CheckOrder input (see fuzz_keys.cc), field by field.
class OrderInput {
 public:
  explicit OrderInput(uint8_t ties) : bytes_(1, static_cast<char>(ties)) {}
  OrderInput& U64(uint64_t v) {
    storage::PutBigEndian64(&bytes_, v);
    return *this;
  }
  OrderInput& U32(uint32_t v) {
    storage::PutBigEndian32(&bytes_, v);
    return *this;
  }
  OrderInput& Byte(uint8_t v) {
    bytes_.push_back(static_cast<char>(v));
    return *this;
  }
  OrderInput& Text(std::string_view s) {
    Byte(static_cast<uint8_t>(s.size()));
    bytes_.append(s.data(), s.size());
    return *this;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

std::string OrderSeed(uint8_t ties, TaskStatus status1, TaskStatus status2,
                      TaskId a, TaskId b, int64_t due1, int64_t due2,
                      std::string_view type1, std::string_view type2) {
  OrderInput in(ties);
  in.U64(a).Byte(2).U32(7).U64(b).Byte(1).U32(0);             // task keys
  in.Byte(static_cast<uint8_t>(status1)).Text(type1).U64(a);  // status
  in.Byte(static_cast<uint8_t>(status2)).Text(type2).U64(b);
  in.Text("tenant-7").U64(a).Text("tenant-70").U64(b);  // group
  in.U64(a).U64(b).U64(a).U64(a);                       // waiting
  in.U64(static_cast<uint64_t>(due1)).U64(1);           // due
  in.U64(static_cast<uint64_t>(due2)).U64(2);
  in.U32(static_cast<uint32_t>(-5)).U64(99).U64(0).Text("g");  // queue value
  for (size_t s = 0; s < kTaskStatusCount; ++s) {              // counts
    in.U64(s == 3 ? std::numeric_limits<uint64_t>::max() : s);
  }
  return in.bytes();
}

// A status entry's key with the type length at bytes 2..3 replaced.
std::string WithTypeLength(std::string key, size_t length) {
  key[2] = static_cast<char>((length >> 8) & 0xff);
  key[3] = static_cast<char>(length & 0xff);
  return key;
}

void WriteKeys(CorpusWriter* out) {
  const std::string_view t = "fuzz_keys";
  out->Write(t, "empty", "");
  out->Write(t, "spec-key", storage::SpecKey(42));
  out->Write(t, "state-key", storage::StateKey(42));
  out->Write(t, "failure-key", storage::FailureKey(42, 3));
  out->Write(t, "bad-task-key-kind", storage::TaskPrefix(42) + "\x03");

  // Status entries: (status, type, id).
  const std::string status_key =
      storage::StatusIndexKey(TaskStatus::kRetryScheduled, "email.send", 42);
  out->Write(t, "status-key", status_key);
  out->Write(t, "status-key-empty-type",
             storage::StatusIndexKey(TaskStatus::kHeld, "",
                                     std::numeric_limits<uint64_t>::max()));
  out->Write(t, "status-key-binary-type",
             storage::StatusIndexKey(TaskStatus::kPending,
                                     std::string("\0\xff\x01s", 4), 0));
  std::string bad = status_key;
  bad[1] = static_cast<char>(kTaskStatusCount);
  out->Write(t, "bad-status-key-status", bad);
  bad = status_key;
  bad[0] = static_cast<char>(storage::IndexKind::kGroup);
  out->Write(t, "bad-status-key-kind", bad);
  // "email.send" is 10 bytes: 19 runs one byte past the end, 11 leaves 7
  // bytes for the id, 9 leaves 9.
  out->Write(t, "bad-status-key-type-past-end", WithTypeLength(status_key, 19));
  out->Write(t, "bad-status-key-type-into-id", WithTypeLength(status_key, 11));
  out->Write(t, "bad-status-key-type-short", WithTypeLength(status_key, 9));
  out->Write(t, "bad-status-key-short-id",
             status_key.substr(0, status_key.size() - 1));
  out->Write(t, "bad-status-key-trailing", status_key + '\0');

  out->Write(t, "group-key", storage::GroupIndexKey("tenant-7", 42));
  out->Write(t, "dedup-key", storage::DedupIndexKey("order-1234"));
  out->Write(t, "waiting-key", storage::WaitingIndexKey(7, 42));
  out->Write(t, "due-key", storage::DueIndexKey(kT0, 99));
  out->Write(t, "due-key-negative", storage::DueIndexKey(-1, 0));
  out->Write(t, "id-value", storage::IdValue(42));

  // Queue values: (priority, sequence, due time, group).
  out->Write(t, "queue-value",
             storage::EncodeQueueValue({100, 42, 0, "tenant-7"}));
  out->Write(
      t, "queue-value-extremes",
      storage::EncodeQueueValue({std::numeric_limits<int32_t>::min(),
                                 std::numeric_limits<uint64_t>::max(),
                                 std::numeric_limits<int64_t>::min(), ""}));
  const std::string queue_value =
      storage::EncodeQueueValue({1, 2, kT0, "tenant-7"});
  out->Write(t, "bad-queue-value-trailing", queue_value + "x");
  out->Write(t, "bad-queue-value-truncated",
             queue_value.substr(0, queue_value.size() - 1));

  // Counts by type: one key per type, a count per status in its value.
  const std::string type_count_key = storage::TypeCountKey("email.send");
  out->Write(t, "type-count-key", type_count_key);
  // The old layout: a key per type and status.
  out->Write(t, "bad-type-count-key-trailing",
             type_count_key + static_cast<char>(TaskStatus::kFailed));
  storage::StatusCountArray counts{};
  for (size_t s = 0; s < kTaskStatusCount; ++s) counts[s] = s * 1000;
  counts[3] = std::numeric_limits<uint64_t>::max();
  std::string encoded_counts;
  storage::PutCounts(&encoded_counts, counts);
  out->Write(t, "counts", encoded_counts);
  out->Write(t, "bad-counts-short",
             encoded_counts.substr(0, encoded_counts.size() - 1));

  out->Write(t, "prefix-all-ff", std::string(4, '\xff'));
  // Long enough for the order checks: two keys of each kind.
  out->Write(t, "order-pairs",
             OrderSeed(0, TaskStatus::kPending, TaskStatus::kRetryScheduled, 7,
                       8, -5, 5, "email.send", "email.sender"));
  // One status, and types that are prefixes of one another.
  out->Write(t, "order-type-prefix",
             OrderSeed(0, TaskStatus::kPending, TaskStatus::kPending, 8, 7, 5,
                       5, "email.sender", "email.send"));
  // Every tie flag: each second key shares the first's fields, its type cut
  // to a prefix of the first's ("email" of "email.send").
  out->Write(t, "order-ties",
             OrderSeed(0xff, TaskStatus::kPending, TaskStatus::kPending, 7, 7,
                       -1, -1, "email.send", "email"));
}

// ---------------------------------------------------------------------------
// Config.

bool ReadText(const fs::path& path, std::string* text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  text->assign(std::istreambuf_iterator<char>(in),
               std::istreambuf_iterator<char>());
  return true;
}

void WriteConfig(CorpusWriter* out, const fs::path& source_dir) {
  const std::string_view t = "fuzz_config";
  std::string shipped;
  if (!ReadText(source_dir / "config" / "spool.toml", &shipped)) {
    out->Fail("cannot read " + (source_dir / "config" / "spool.toml").string());
    return;
  }
  out->Write(t, "shipped", shipped);
  Options defaults;
  defaults.path = "./spool-data";
  out->Write(t, "describe-defaults", DescribeOptions(defaults));
  out->Write(t, "empty", "");
  out->Write(t, "minimal", "[storage]\npath = \"/var/lib/spool\"\n");
  out->Write(
      t, "every-notation",
      "[storage]\npath = 'lit\\eral'\ndurability = \"memory\"\n"
      "max_payload_bytes = 1_048_576\nmax_type_bytes = 0x80\n"
      "[runtime]\nreaders = +2\nworkers = 0o10\nscheduler_threads = 0b1\n"
      "close_timeout_ms = 0\n[writer]\nmax_batch = 1_000_000\n"
      "[log]\nlevel = \"off\"\n");
  out->Write(t, "inline-and-dotted",
             "storage = { path = \"a\\u00e9\\n\", durability = \"relaxed\" }\n"
             "runtime.workers = 8\n");
  out->Write(t, "errors",
             "[storage]\npath = \"\"\nmax_payload_bytes = -1\n"
             "[runtim]\nworkers = \"four\"\n[log]\nlevel = 3.5\n"
             "[writer.nested]\nx = 1979-05-27T07:32:00Z\n");
  out->Write(t, "syntax-error", "[storage\npath = \"unterminated\n");
  out->Write(t, "overrides",
             "[storage]\npath = \"q\"\n\n%%\nruntime.workers=+1_0\n"
             "storage.path=/tmp/x y\nlog.level=debug\nwriter.max_batch=0\n"
             "runtime.readers\nnope=1\n");
  out->Write(t, "types-groups-retry",
             "[storage]\npath = \"q\"\n[retry]\npolicy = \"fixed\"\n"
             "attempts = 5\nbase_ms = 2000\n[types.email]\nconcurrency = 3\n"
             "timeout_ms = 1500\ngates = [\"smtp\"]\n"
             "[types.email.rate_limit]\ncount = 10\nperiod_ms = 60000\n"
             "[types.email.retry]\nattempts = 7\njitter = 0.25\n"
             "[types.\"http.post\"]\nretry = { policy = \"none\" }\n"
             "[groups.bulk]\nconcurrency = 0\n\n%%\n"
             "types.email.concurrency=5\ntypes.a.b.retry.max_ms=9000\n"
             "retry.jitter=0.5\ngroups.x.concurrency=2\n"
             "types.email.gates=a,b\ntypes.email.speed=1\n"
             "retry.base_ms=99999999999\n");
  out->Write(
      t, "command-line",
      "--config\nspool.toml\n--set\nruntime.workers=8\n--set=log.level=info\n"
      "--print-config\npositional\n--help\n--\n--config\n");
  out->Write(t, "command-line-errors",
             "--config=a\n--config\n--set\n--other\n");
}

// ---------------------------------------------------------------------------
// JSON.

void WriteJson(CorpusWriter* out) {
  const std::string_view t = "fuzz_json";
  // The JSON a reader answers with, for a real task.
  const StateRecord state = FullState();
  storage::TaskBytes task;
  *task.mutable_spec() = storage::EncodeSpec(FullSpec());
  task.set_has_spec();
  *task.mutable_state() = storage::EncodeState(state);
  task.set_has_state();
  for (const std::string& f : EncodedFailures(state)) *task.AddFailure() = f;
  if (task.Verify(42).ok()) {
    std::string json;
    storage::AppendTaskJson(task.view(), storage::PayloadFormat::kJson, &json);
    out->Write(t, "task", json);
  } else {
    out->Fail("the sample task does not verify");
  }
  out->Write(t, "scalars", " [true,false,null,0,-0,1.5e-3,-12E+4,\"\"] ");
  out->Write(t, "object",
             "{\"a\":{\"b\":[{}],\"c\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}}");
  out->Write(
      t, "unicode",
      "[\"caf\xC3\xA9\",\"\\u00e9\",\"\\ud83d\\ude00\",\"\xF0\x9F\x98\x80\","
      "\"\xE2\x80\xA8\xE2\x80\xA9\",\"\xE2\x82\xAC\"]");
  out->Write(t, "bad-surrogate",
             "[\"\\ud800\",\"\\udc00\",\"\\ud800\\u0041\"]");
  out->Write(t, "bad-utf8",
             "\"\xC0\xAF \xED\xA0\x80 \xF4\x90\x80\x80 \xE2\x82\"");
  out->Write(t, "bad-numbers", "[01,1.,.5,1e,-,+1,0x10,Infinity,NaN]");
  out->Write(t, "bad-structure", "{\"a\" 1,}");
  out->Write(t, "control-characters", std::string("\"tab\there\0nul\"", 14));
  out->Write(t, "deep-64", std::string(64, '[') + std::string(64, ']'));
  out->Write(t, "deep-65", std::string(65, '[') + std::string(65, ']'));
  out->Write(t, "deep-objects", [] {
    std::string s;
    for (int i = 0; i < 100; ++i) s += "{\"k\":";
    s += "1";
    for (int i = 0; i < 100; ++i) s += "}";
    return s;
  }());
  // Eight bytes read as a time, then text: the earliest representable time.
  out->Write(t, "time-min", std::string("\x80\0\0\0\0\0\0\0rest", 12));
}

// Requests as a client sends them: every route's shape, the guard's
// headers, and the attacks of tests/security/spoold_attack_test.py.
void WriteHttpRequests(CorpusWriter* out) {
  const std::string_view t = "fuzz_http_request";
  const std::string auth =
      "Authorization: Bearer 0123456789abcdef-fuzz-token\r\n";
  auto post = [&](std::string_view target, const std::string& body) {
    return "POST " + std::string(target) +
           " HTTP/1.1\r\nHost: 127.0.0.1:8470\r\n" + auth +
           "Content-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  };
  out->Write(t, "get-tasks",
             "GET /v1/tasks?status=failed&type=email&limit=50&order=oldest"
             "&payload=true&created_from=2026-01-01T00:00:00Z HTTP/1.1\r\n"
             "Host: localhost\r\n" +
                 auth + "\r\n");
  out->Write(t, "get-events",
             "GET /v1/events?status=running&cursor=abc%20def+x HTTP/1.1\r\n"
             "Host: [::1]:8470\r\nAccept: text/event-stream\r\n\r\n");
  out->Write(t, "post-task",
             post("/v1/tasks",
                  "{\"type\":\"email\",\"payload\":{\"to\":\"a@b\"},"
                  "\"priority\":3,\"delay_ms\":100,\"group\":\"g\","
                  "\"retry\":{\"max_attempts\":3,\"backoff\":"
                  "\"exponential\",\"initial_delay_ms\":10}}"));
  out->Write(t, "post-batch",
             post("/v1/tasks:batch",
                  "{\"tasks\":[{\"type\":\"a\"},{\"type\":\"b\","
                  "\"payload_base64\":\"AAEC\"}]}"));
  out->Write(t, "post-purge",
             post("/v1/purge",
                  "{\"statuses\":[\"succeeded\"],"
                  "\"older_than_ms\":86400000}"));
  out->Write(t, "post-retry", post("/v1/tasks/7/retry", "{\"retry\":{}}"));
  out->Write(
      t, "deep-body",
      post("/v1/tasks", "{\"type\":\"x\",\"payload\":" + std::string(100, '[') +
                            std::string(100, ']') + "}"));
  out->Write(t, "chunked",
             "POST /v1/tasks HTTP/1.1\r\nHost: localhost\r\n" + auth +
                 "Transfer-Encoding: chunked\r\n\r\n"
                 "e\r\n{\"type\":\"x\"}\r\n0\r\n\r\n");
  out->Write(t, "rebind-host",
             "GET /v1/counts HTTP/1.1\r\nHost: Rebind.Example:80\r\n"
             "Authorization: bearer wrong\r\n\r\n");
}

// A hello as CAF serializes it, valid and at the limits, and the outcome
// message the door passes on.
void WriteRemoteHellos(CorpusWriter* out) {
  const std::string_view t = "fuzz_remote_hello";
  auto bytes = [out](auto&... values) {
    std::vector<char> buffer;
    caf::binary_serializer sink{nullptr, buffer};
    if (sink(values...)) out->Fail("a hello seed does not serialize");
    return std::string(buffer.begin(), buffer.end());
  };
  actors::RemoteHello hello;
  hello.door_nonce = std::string(actors::kNonceHexBytes, 'a');
  hello.worker_nonce = std::string(actors::kNonceHexBytes, 'b');
  hello.node = "host-1/4242";
  hello.types = {"email", "resize"};
  hello.concurrency = 16;
  hello.proof = actors::WorkerProof("fuzz-secret-of-32-bytes-or-so!!!", hello);
  out->Write(t, "hello", bytes(hello));
  actors::RemoteHello wide = hello;
  wide.node = std::string(actors::kMaxNodeNameBytes + 1, 'n');
  wide.types.assign(4, std::string(actors::kMaxHelloTypeBytes, 't'));
  out->Write(t, "hello-over-limits", bytes(wide));
  uint64_t session = 3;
  std::string key(64, 'k');
  std::vector<actors::RemoteOutcome> outcomes(2);
  outcomes[0].message = "failed";
  outcomes[1].has_result = true;
  outcomes[1].result = "{\"ok\":true}";
  out->Write(t, "outcome", bytes(session, key, outcomes));
}
}  // namespace
}  // namespace spool::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR  (e.g. fuzz/corpus)\n", argv[0]);
    return 2;
  }
  spool::fuzz::CorpusWriter out{std::filesystem::path(argv[1])};
  spool::fuzz::WriteRecords(&out);
  spool::fuzz::WriteKeys(&out);
  spool::fuzz::WriteConfig(&out, SPOOL_SOURCE_DIR);
  spool::fuzz::WriteJson(&out);
  spool::fuzz::WriteHttpRequests(&out);
  spool::fuzz::WriteRemoteHellos(&out);
  if (out.failed()) return 1;
  std::printf("make_corpus: wrote %d seeds under %s\n", out.written(), argv[1]);
  return 0;
}
