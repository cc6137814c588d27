// Writes the seed corpus of every fuzz target from spool's real encoders and
// its shipped config:
//
//   build/fuzz/make_corpus fuzz/corpus
//
// writes fuzz/corpus/<target>/<name> for each seed, replacing files of the
// same name and leaving others (e.g. crash inputs added by hand) alone. Run
// it again after a change to the record schema, the key layout or
// config/spool.toml, and commit the result. Seeds stay small: each under
// 16 KiB (the largest, fuzz_record/error-cut, holds an error text longer
// than kMaxErrorBytes twice).

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

#include <flatbuffers/flatbuffers.h>

#include "storage/json_writer.h"
#include "storage/keys.h"
#include "storage/record.h"
#include "storage/record_json.h"
#include "storage/task_record_generated.h"

namespace spool::fuzz {
namespace {

namespace fs = std::filesystem;
using storage::TaskRecord;

constexpr size_t kMaxSeedBytes = 16384;

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
// Records.

TaskRecord Minimal() {
  TaskRecord r;
  r.id = 1;
  r.type = "t";
  r.created_us = r.updated_us = 1'700'000'000'000'000;
  r.sequence = 1;
  return r;
}

TaskRecord Full() {
  TaskRecord r;
  r.id = 42;
  r.type = "email.send";
  r.payload = std::string("\0binary\xff", 8);
  r.status = TaskStatus::kRetryScheduled;
  r.priority = -7;
  r.attempts = 2;
  r.max_attempts = 5;
  r.created_us = 1'700'000'000'000'000;
  r.updated_us = 1'700'000'000'500'000;
  r.next_attempt_us = 1'700'000'001'000'000;
  r.sequence = 99;
  r.retry = RetryPolicy::Exponential(5, Duration(10), Duration(1000), 0.25);
  storage::RecordFailure(&r, 1, 1'700'000'000'100'000, "connection refused");
  storage::RecordFailure(&r, 2, 1'700'000'000'400'000, "timeout");
  return r;
}

void WriteRecords(CorpusWriter* out) {
  const std::string_view t = "fuzz_record";
  out->Write(t, "minimal", storage::EncodeRecord(Minimal()));
  out->Write(t, "full", storage::EncodeRecord(Full()));

  static const char* const kStatusNames[] = {
      "pending", "running",   "retry_scheduled", "succeeded",
      "failed",  "cancelled", "waiting",         "held"};
  for (size_t s = 0; s < kTaskStatusCount; ++s) {
    TaskRecord r = Minimal();
    r.status = static_cast<TaskStatus>(s);
    out->Write(t, std::string("status-") + kStatusNames[s],
               storage::EncodeRecord(r));
  }

  TaskRecord json = Minimal();
  json.type = "json.task";
  json.payload =
      R"( {"to":"a@example.com","n":[1,2.5e3,-0,true,null],"s":"\u00e9\ud83d\ude00"} )";
  out->Write(t, "json-payload", storage::EncodeRecord(json));

  TaskRecord fixed = Minimal();
  fixed.retry = RetryPolicy::Fixed(3, std::chrono::seconds(2));
  fixed.max_attempts = 3;
  out->Write(t, "retry-fixed", storage::EncodeRecord(fixed));
  TaskRecord none = Minimal();
  none.retry = RetryPolicy::None();
  out->Write(t, "retry-none", storage::EncodeRecord(none));

  // A full failure history, each error a different kind of text.
  TaskRecord history = Minimal();
  history.status = TaskStatus::kFailed;
  history.attempts = history.max_attempts = 20;
  for (uint32_t a = 1; a <= 20; ++a) {
    storage::RecordFailure(&history, a, 1'700'000'000'000'000 + a,
                           a % 2 ? "line\nbreak \"quoted\" \xE2\x80\xA8"
                                 : "caf\xC3\xA9 \xF0\x9F\x98\x80 bad \xC3");
  }
  out->Write(t, "history-full", storage::EncodeRecord(history));

  // A long error, cut to kMaxErrorBytes next to a multi-byte character.
  TaskRecord cut = Minimal();
  std::string long_error(storage::kMaxErrorBytes - 4, 'e');
  long_error += "\xE2\x82\xAC\xE2\x82\xAC";  // Two euro signs across the cut.
  storage::RecordFailure(&cut, 1, 1, long_error);
  out->Write(t, "error-cut", storage::EncodeRecord(cut));

  // Times and numbers at their limits.
  TaskRecord extremes = Minimal();
  extremes.id = std::numeric_limits<uint64_t>::max();
  extremes.priority = std::numeric_limits<int32_t>::min();
  extremes.created_us = std::numeric_limits<int64_t>::min();
  extremes.updated_us = std::numeric_limits<int64_t>::max();
  extremes.next_attempt_us = -1;
  extremes.sequence = std::numeric_limits<uint64_t>::max();
  extremes.attempts = std::numeric_limits<uint32_t>::max();
  out->Write(t, "extremes", storage::EncodeRecord(extremes));

  // Type and payload that are not UTF-8.
  TaskRecord bad_utf8 = Minimal();
  bad_utf8.type = "\xC0\xAF\xED\xA0\x80\xF4\x90\x80\x80";
  bad_utf8.payload = "\xFF\xFE[1]";
  out->Write(t, "not-utf8", storage::EncodeRecord(bad_utf8));

  // Optional fields left out, as FlatBuffers allows and EncodeRecord never
  // writes: no payload, retry or last_error, and a failure without error
  // text (a null string; the JSON writer once passed its null data() to
  // memcpy, which UBSan reports).
  {
    flatbuffers::FlatBufferBuilder builder;
    auto type = builder.CreateString("sparse");
    std::vector<flatbuffers::Offset<storage::fb::Failure>> entries = {
        storage::fb::CreateFailure(builder, 1, 5),
        storage::fb::CreateFailure(builder, 2, 6, builder.CreateString(""))};
    auto failures = builder.CreateVector(entries);
    storage::fb::TaskRecordBuilder table(builder);
    table.add_id(7);
    table.add_type(type);
    table.add_failures(failures);
    storage::fb::FinishTaskRecordBuffer(builder, table.Finish());
    out->Write(t, "sparse-null-fields",
               std::string_view(
                   reinterpret_cast<const char*>(builder.GetBufferPointer()),
                   builder.GetSize()));
  }

  // Records VerifyRecord must refuse.
  const std::string full = storage::EncodeRecord(Full());
  out->Write(t, "bad-truncated", full.substr(0, full.size() / 2));
  std::string bad_id = full;
  bad_id[4] = 'X';  // The file identifier "SPTR" at bytes 4..7.
  out->Write(t, "bad-identifier", bad_id);
  TaskRecord bad_status = Minimal();
  bad_status.status = static_cast<TaskStatus>(kTaskStatusCount);
  out->Write(t, "bad-status", storage::EncodeRecord(bad_status));
  TaskRecord no_type = Minimal();
  no_type.type.clear();
  out->Write(t, "bad-empty-type", storage::EncodeRecord(no_type));
  TaskRecord bad_retry = Minimal();
  bad_retry.retry.kind = static_cast<RetryPolicy::Kind>(3);
  out->Write(t, "bad-retry-kind", storage::EncodeRecord(bad_retry));
}

// ---------------------------------------------------------------------------
// Keys.

void WriteKeys(CorpusWriter* out) {
  const std::string_view t = "fuzz_keys";
  out->Write(t, "empty", "");
  out->Write(t, "task", storage::TaskKey(42));
  out->Write(t, "ready", storage::EncodeReadyKey({-7, 99}));
  out->Write(t, "ready-extremes",
             storage::EncodeReadyKey({std::numeric_limits<int32_t>::min(),
                                      std::numeric_limits<uint64_t>::max()}));
  out->Write(t, "scheduled",
             storage::EncodeScheduledKey({1'700'000'001'000'000, 99}));
  out->Write(t, "scheduled-negative", storage::EncodeScheduledKey({-1, 0}));
  out->Write(t, "queue-value",
             storage::EncodeQueueValue({42, 100, "email.send", "tenant-7"}));
  // Long enough for the order checks: two keys of each kind back to back.
  std::string pairs = "\x03";
  pairs += storage::EncodeReadyKey({5, 1}) + storage::EncodeReadyKey({5, 2});
  pairs += storage::EncodeScheduledKey({-5, 1}) +
           storage::EncodeScheduledKey({5, 1});
  pairs += storage::TaskKey(7) + storage::TaskKey(8);
  out->Write(t, "order-pairs", pairs);
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
  // The JSON a reader answers with, for a real record.
  const std::string full = storage::EncodeRecord(Full());
  const storage::fb::TaskRecord* table = nullptr;
  if (storage::VerifyRecord(42, full, &table).ok()) {
    std::string json;
    storage::AppendTaskJson(*table, storage::PayloadFormat::kJson, &json);
    out->Write(t, "task", json);
  } else {
    out->Fail("the sample record does not verify");
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
  out->Write(t, "deep-512", std::string(512, '[') + std::string(512, ']'));
  out->Write(t, "deep-513", std::string(513, '[') + std::string(513, ']'));
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
  if (out.failed()) return 1;
  std::printf("make_corpus: wrote %d seeds under %s\n", out.written(), argv[1]);
  return 0;
}
