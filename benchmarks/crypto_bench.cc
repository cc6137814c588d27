// Microbenchmarks for encryption at rest: sealing and opening a task's
// values (its spec at several sizes, sealed once per enqueue, and its state,
// sealed again by every transition), the lookup tag of a group or dedup key,
// and enqueue throughput through the runtime with and without a key.
//
//   ninja -C build crypto_bench
//   build/benchmarks/crypto_bench --benchmark_repetitions=10
//       --benchmark_enable_random_interleaving=true
//       --benchmark_report_aggregates_only=true     (one command line)
//
// On a shared machine, compare the "min" rows (the least disturbed of the
// repetitions, interleaved at random so that a burst of load elsewhere does
// not land on one configuration only); "median" is also reported.
//
// BM_Enqueue stores kBatch tasks per iteration from one thread, waiting for
// all of them to be stored; items/s is the enqueue throughput. Its first
// argument is the key (0: none, 1: a key), the second the durability
// (0: sync, every batch fsynced; 1: relaxed, no fsync), the third whether
// the tasks carry a group and a dedup key (two HMAC tags per index change).

#include <algorithm>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include <spool/encryption.h>
#include <spool/runtime.h>

#include <benchmark/benchmark.h>

#include "storage/crypto.h"
#include "storage/keys.h"
#include "storage/record.h"

namespace spool {
namespace {

double Min(const std::vector<double>& values) {
  return *std::min_element(values.begin(), values.end());
}

// A spec of about `size` bytes, as the writer stores it at enqueue: the
// payload makes up the rest.
storage::SpecRecord SpecOfSize(size_t size) {
  storage::SpecRecord spec;
  spec.id = 42;
  spec.type = "email";
  spec.group = "tenant-17";
  spec.created_us = 1'700'000'000'000'000;
  std::string bytes = storage::EncodeSpec(spec);
  spec.payload.assign(size > bytes.size() ? size - bytes.size() : 0, 'p');
  return spec;
}

// The state stored with it, as every transition rewrites it (with the
// group's 32-byte lookup tag, as an encrypted store holds it).
storage::StateRecord TypicalState() {
  storage::StateRecord state;
  state.id = 42;
  state.type = "email";
  state.stored_group = std::string(storage::kLookupTagBytes, 'g');
  state.sequence = 7;
  state.updated_us = 1'700'000'000'000'000;
  return state;
}

std::shared_ptr<const storage::KeyRing> Ring() {
  std::shared_ptr<const storage::KeyRing> ring;
  if (!storage::KeyRing::Create(GenerateEncryptionKey(), {}, &ring).ok()) {
    std::abort();
  }
  return ring;
}

// A spec of about range(0) bytes: what an enqueue seals once.
void BM_Seal(benchmark::State& state) {
  auto ring = Ring();
  std::string record =
      storage::EncodeSpec(SpecOfSize(static_cast<size_t>(state.range(0))));
  std::string context = storage::ValueContext(storage::SpecKey(42));
  std::string sealed;
  for (auto _ : state) {
    if (!ring->Seal(context, record, &sealed).ok()) state.SkipWithError("seal");
    benchmark::DoNotOptimize(sealed.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() *
                          static_cast<int64_t>(record.size()));
  state.counters["record_bytes"] = static_cast<double>(record.size());
}
BENCHMARK(BM_Seal)->Arg(200)->Arg(1024)->Arg(16384)->ComputeStatistics("min",
                                                                       Min);

void BM_Open(benchmark::State& state) {
  auto ring = Ring();
  std::string record =
      storage::EncodeSpec(SpecOfSize(static_cast<size_t>(state.range(0))));
  std::string context = storage::ValueContext(storage::SpecKey(42));
  std::string sealed;
  if (!ring->Seal(context, record, &sealed).ok()) std::abort();
  std::string opened;
  for (auto _ : state) {
    if (!ring->Open(context, sealed, &opened).ok()) state.SkipWithError("open");
    benchmark::DoNotOptimize(opened.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() *
                          static_cast<int64_t>(record.size()));
}
BENCHMARK(BM_Open)->Arg(200)->Arg(1024)->Arg(16384)->ComputeStatistics("min",
                                                                       Min);

// A state: what every transition seals, and a reader opens per task.
void BM_SealState(benchmark::State& state) {
  auto ring = Ring();
  std::string record = storage::EncodeState(TypicalState());
  std::string context = storage::ValueContext(storage::StateKey(42));
  std::string sealed;
  for (auto _ : state) {
    if (!ring->Seal(context, record, &sealed).ok()) state.SkipWithError("seal");
    benchmark::DoNotOptimize(sealed.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["record_bytes"] = static_cast<double>(record.size());
}
BENCHMARK(BM_SealState)->ComputeStatistics("min", Min);

void BM_OpenState(benchmark::State& state) {
  auto ring = Ring();
  std::string record = storage::EncodeState(TypicalState());
  std::string context = storage::ValueContext(storage::StateKey(42));
  std::string sealed;
  if (!ring->Seal(context, record, &sealed).ok()) std::abort();
  std::string opened;
  for (auto _ : state) {
    if (!ring->Open(context, sealed, &opened).ok()) state.SkipWithError("open");
    benchmark::DoNotOptimize(opened.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_OpenState)->ComputeStatistics("min", Min);

// What the values cost without encryption, for scale: encoding them.
void BM_EncodeSpec(benchmark::State& state) {
  const storage::SpecRecord spec = SpecOfSize(200);
  for (auto _ : state) {
    std::string encoded = storage::EncodeSpec(spec);
    benchmark::DoNotOptimize(encoded.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EncodeSpec)->ComputeStatistics("min", Min);

void BM_EncodeState(benchmark::State& state) {
  const storage::StateRecord record = TypicalState();
  for (auto _ : state) {
    std::string encoded = storage::EncodeState(record);
    benchmark::DoNotOptimize(encoded.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EncodeState)->ComputeStatistics("min", Min);

void BM_LookupTag(benchmark::State& state) {
  storage::LookupTagger tagger(GenerateEncryptionKey());
  std::string group = "tenant-17";
  for (auto _ : state) {
    std::string tag = tagger.Tag(storage::kGroupTagDomain, group);
    benchmark::DoNotOptimize(tag.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LookupTag)->ComputeStatistics("min", Min);

constexpr int kBatch = 2000;

void BM_Enqueue(benchmark::State& state) {
  bool keyed = state.range(0) != 0;
  bool relaxed = state.range(1) != 0;
  bool lookup_keys = state.range(2) != 0;
  std::string path = (std::filesystem::temp_directory_path() /
                      ("spool-crypto-bench-" + std::to_string(::getpid())))
                         .string();
  std::filesystem::remove_all(path);
  Options options;
  options.path = path;
  options.durability = relaxed ? Durability::kRelaxed : Durability::kSync;
  options.log_level = LogLevel::kError;
  if (keyed) options.encryption_key = GenerateEncryptionKey();
  std::unique_ptr<Runtime> runtime;
  Status s = Runtime::Open(options, &runtime);
  if (!s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  // Not started: the tasks are only stored.
  if (!runtime
           ->RegisterHandler("email", [](TaskContext&) { return Status::OK(); })
           .ok()) {
    std::abort();
  }
  std::string payload(160, 'p');
  uint64_t n = 0;
  std::vector<Future<TaskId>> stored;
  stored.reserve(kBatch);
  for (auto _ : state) {
    stored.clear();
    for (int i = 0; i < kBatch; ++i) {
      EnqueueOptions enqueue;
      if (lookup_keys) {
        enqueue.group = "tenant-" + std::to_string(n % 64);
        enqueue.dedup_key = "order-" + std::to_string(n);
      }
      ++n;
      stored.push_back(runtime->Enqueue("email", payload, enqueue).stored);
    }
    for (auto& future : stored) {
      if (!future.Wait().ok()) state.SkipWithError("enqueue failed");
    }
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
  if (!runtime->Close().Wait().ok()) state.SkipWithError("close failed");
  runtime.reset();
  std::filesystem::remove_all(path);
}
BENCHMARK(BM_Enqueue)
    ->ArgNames({"key", "relaxed", "group_dedup"})
    ->Args({0, 1, 0})
    ->Args({1, 1, 0})
    ->Args({0, 1, 1})
    ->Args({1, 1, 1})
    ->Args({0, 0, 0})
    ->Args({1, 0, 0})
    ->Args({0, 0, 1})
    ->Args({1, 0, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(0.5)
    ->ComputeStatistics("min", Min);

}  // namespace
}  // namespace spool
