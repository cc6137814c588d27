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

// Tasks shaped like a busy queue's, as a reader gets them from the store: a
// short type, a ~250-byte JSON payload, every status, and for a third of
// them a last error and two failure entries.
std::vector<TaskBytes> MakeTasks(size_t count) {
  std::mt19937 rng(1);
  std::vector<TaskBytes> tasks(count);
  for (size_t i = 0; i < count; ++i) {
    SpecRecord spec;
    spec.id = 1000000 + i;
    spec.type = i % 2 == 0 ? "email.send" : "report.render";
    spec.payload = R"({"to":"user)" + std::to_string(i) +
                   R"(@example.com","subject":"Your order has shipped",)"
                   R"("order_id":)" +
                   std::to_string(rng()) +
                   R"(,"items":[{"sku":"A-1","qty":2,"price":9.99},)"
                   R"({"sku":"B-22","qty":1,"price":129.5}],"locale":"de-DE"})";
    spec.created_us = 1709211909000123 + static_cast<int64_t>(i) * 1000;
    StateRecord state;
    state.id = spec.id;
    state.type = spec.type;
    state.status = static_cast<TaskStatus>(i % kTaskStatusCount);
    state.priority = static_cast<int32_t>(i % 5);
    state.attempts = static_cast<uint32_t>(i % 3);
    state.max_attempts = 5;
    state.updated_us = spec.created_us + 250000;
    state.next_attempt_us = i % 3 == 0 ? state.updated_us + 60000000 : 0;
    state.sequence = i;
    if (i % 3 == 0) {
      RecordFailure(&state, 1, spec.created_us + 100000,
                    "connection refused by smtp.example.com:25");
      RecordFailure(&state, 2, spec.created_us + 200000, "timeout after 30s");
    }
    TaskBytes& task = tasks[i];
    *task.mutable_spec() = EncodeSpec(spec);
    task.set_has_spec();
    *task.mutable_state() = EncodeState(state);
    task.set_has_state();
    for (const FailureEntry& failure : state.new_failures) {
      *task.AddFailure() = EncodeFailure(failure);
    }
  }
  return tasks;
}

// What a list query does per row once RocksDB has returned the bytes:
// verify the task's values, then render them in place into the shared
// buffer.
void BM_ListTasksJson(benchmark::State& state) {
  const auto count = static_cast<size_t>(state.range(0));
  std::vector<TaskBytes> tasks = MakeTasks(count);
  const auto format = static_cast<PayloadFormat>(state.range(1));
  std::string out;
  for (auto _ : state) {
    out.clear();
    JsonWriter writer(&out);
    writer.BeginArray();
    for (size_t i = 0; i < count; ++i) {
      if (!tasks[i].Verify(1000000 + i).ok()) {
        state.SkipWithError("task failed verification");
        return;
      }
      WriteTaskJson(tasks[i].view(), format, &writer);
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

// Rendering alone, with the tasks verified beforehand.
void BM_AppendTaskJson1000(benchmark::State& state) {
  std::vector<TaskBytes> tasks = MakeTasks(1000);
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (!tasks[i].Verify(1000000 + i).ok()) {
      state.SkipWithError("task failed verification");
      return;
    }
  }
  std::string out;
  for (auto _ : state) {
    out.clear();
    for (const TaskBytes& task : tasks) {
      AppendTaskJson(task.view(), PayloadFormat::kJson, &out);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * tasks.size());
}
BENCHMARK(BM_AppendTaskJson1000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace spool::storage
