// Microbenchmarks for JSON output straight from storage.
//
// Part of the codec microbenchmarks (benchmarks/CMakeLists.txt): spool-bench
// runs them in its `codec` scenario, and spool-microbench on their own:
//
//   build/benchmarks/spool-microbench --benchmark_filter=Json
//
// Budget: listing 1,000 tasks as JSON (BM_ListTasksJson/1000) should take at
// most 1 ms in total.

#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "storage/json_writer.h"
#include "storage/record.h"
#include "storage/record_json.h"
#include "storage/task_record_generated.h"

namespace spool::storage {
namespace {

std::string AsciiText(size_t size) {
  static const char kWords[] =
      "the quick brown fox jumps over the lazy dog while the task queue "
      "drains its backlog of pending jobs at a steady rate ";
  std::string text;
  while (text.size() < size) text += kWords;
  text.resize(size);
  return text;
}

// Roughly what error messages and payload strings from many languages look
// like: mostly ASCII, with 2-, 3- and 4-byte sequences and a few characters
// that need escaping.
std::string MixedUtf8Text(size_t size) {
  static const char* const kPieces[] = {
      "h\xC3\xA9llo ",  // Latin-1 supplement
      "stra\xC3\x9F"
      "e ",                                                 // German
      "\xD0\xBF\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 ",  // Cyrillic
      "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E ",              // Japanese
      "\xE2\x82\xAC"
      "42 ",                // Euro sign
      "\xF0\x9F\x98\x80 ",  // Emoji
      "line\n",             // Escape
      "\"quoted\" ",        // Escapes
      "plain ascii words here ",
  };
  std::string text;
  size_t i = 0;
  while (text.size() < size) {
    text += kPieces[i++ % (sizeof(kPieces) / sizeof(kPieces[0]))];
  }
  // Cut at a character boundary so the text stays valid UTF-8.
  size_t cut = size;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) {
    --cut;
  }
  text.resize(cut);
  return text;
}

void BM_EscapeAscii1K(benchmark::State& state) {
  const std::string text = AsciiText(1024);
  std::string out;
  for (auto _ : state) {
    out.clear();
    AppendJsonString(text, &out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * text.size());
}
BENCHMARK(BM_EscapeAscii1K);

void BM_EscapeMixedUtf81K(benchmark::State& state) {
  const std::string text = MixedUtf8Text(1024);
  std::string out;
  for (auto _ : state) {
    out.clear();
    AppendJsonString(text, &out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * text.size());
}
BENCHMARK(BM_EscapeMixedUtf81K);

void BM_ValidateJsonPayload(benchmark::State& state) {
  const std::string payload =
      R"({"to":"user@example.com","subject":"Your order has shipped",)"
      R"("order_id":123456789,"items":[{"sku":"A-1","qty":2,"price":9.99},)"
      R"({"sku":"B-22","qty":1,"price":129.5}],"locale":"de-DE",)"
      R"("tags":["priority","retry-safe"],"note":"gr\u00fc\u00dfe"})";
  for (auto _ : state) {
    benchmark::DoNotOptimize(IsValidJson(payload));
  }
  state.SetBytesProcessed(state.iterations() * payload.size());
}
BENCHMARK(BM_ValidateJsonPayload);

// Encoded records shaped like a busy queue's: a short type, a ~250-byte JSON
// payload, and for a third of them a failure history.
std::vector<std::string> MakeRecords(size_t count) {
  std::mt19937 rng(1);
  std::vector<std::string> records;
  records.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    TaskRecord r;
    r.id = 1000000 + i;
    r.type = i % 2 == 0 ? "email.send" : "report.render";
    r.payload = R"({"to":"user)" + std::to_string(i) +
                R"(@example.com","subject":"Your order has shipped",)"
                R"("order_id":)" +
                std::to_string(rng()) +
                R"(,"items":[{"sku":"A-1","qty":2,"price":9.99},)"
                R"({"sku":"B-22","qty":1,"price":129.5}],"locale":"de-DE"})";
    r.status = static_cast<TaskStatus>(i % kTaskStatusCount);
    r.priority = static_cast<int32_t>(i % 5);
    r.attempts = static_cast<uint32_t>(i % 3);
    r.max_attempts = 5;
    r.created_us = 1709211909000123 + static_cast<int64_t>(i) * 1000;
    r.updated_us = r.created_us + 250000;
    r.next_attempt_us = i % 3 == 0 ? r.updated_us + 60000000 : 0;
    r.sequence = i;
    if (i % 3 == 0) {
      RecordFailure(&r, 1, r.created_us + 100000,
                    "connection refused by smtp.example.com:25");
      RecordFailure(&r, 2, r.created_us + 200000, "timeout after 30s");
    }
    records.push_back(EncodeRecord(r));
  }
  return records;
}

// What a list query does per row once RocksDB has returned the bytes:
// verify the record, then render it in place into the shared buffer.
void BM_ListTasksJson(benchmark::State& state) {
  const auto count = static_cast<size_t>(state.range(0));
  const std::vector<std::string> records = MakeRecords(count);
  const auto format = static_cast<PayloadFormat>(state.range(1));
  std::string out;
  for (auto _ : state) {
    out.clear();
    JsonWriter writer(&out);
    writer.BeginArray();
    for (size_t i = 0; i < count; ++i) {
      const fb::TaskRecord* table = nullptr;
      if (!VerifyRecord(1000000 + i, records[i], &table).ok()) {
        state.SkipWithError("record failed verification");
        return;
      }
      WriteTaskJson(*table, format, &writer);
    }
    writer.EndArray();
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * count);
  state.counters["json_bytes"] = static_cast<double>(out.size());
}
// Named arguments, so that reports say "tasks:1000/json_payload:1".
BENCHMARK(BM_ListTasksJson)
    ->ArgNames({"tasks", "json_payload"})
    ->Args({1000, static_cast<int>(PayloadFormat::kJson)})
    ->Args({1000, static_cast<int>(PayloadFormat::kBinary)})
    ->Unit(benchmark::kMicrosecond);

// Rendering alone, with the tables verified beforehand.
void BM_AppendTaskJson1000(benchmark::State& state) {
  const std::vector<std::string> records = MakeRecords(1000);
  std::vector<const fb::TaskRecord*> tables(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    if (!VerifyRecord(1000000 + i, records[i], &tables[i]).ok()) {
      state.SkipWithError("record failed verification");
      return;
    }
  }
  std::string out;
  for (auto _ : state) {
    out.clear();
    for (const fb::TaskRecord* table : tables) {
      AppendTaskJson(*table, PayloadFormat::kJson, &out);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * tables.size());
}
BENCHMARK(BM_AppendTaskJson1000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace spool::storage
