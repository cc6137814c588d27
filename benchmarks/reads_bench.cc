#include "benchmarks/reads_bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <filesystem>
#include <memory>
#include <thread>
#include <time.h>

#include <spool/runtime.h>

#include "storage/queries.h"
#include "storage/task_store.h"

namespace spool::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kWaitTimeout = std::chrono::seconds(120);

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) +
         static_cast<double>(ts.tv_nsec) * 1e-9;
}

template <class T>
Status Wait(const Future<T>& future, const char* what) {
  if (!future.WaitFor(kWaitTimeout)) {
    return Status::TimedOut(std::string(what) + ": no answer in 120 s");
  }
  return future.Wait().status();
}

// Median, min and max of one figure over rounds.
class Figure {
 public:
  void Add(double value) { values_.push_back(value); }
  void Emit(const std::function<void(const ReadsRow&)>& emit,
            const std::string& scenario, const std::string& variant,
            const std::string& metric, const std::string& unit) {
    if (values_.empty()) return;
    std::vector<double> v = values_;
    std::sort(v.begin(), v.end());
    double median = v.size() % 2 ? v[v.size() / 2]
                                 : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    emit(ReadsRow{scenario, "spool", variant, metric, median, unit});
    if (v.size() > 1) {
      emit(ReadsRow{scenario, "spool", variant, metric + "_min", v.front(),
                    unit});
      emit(ReadsRow{scenario, "spool", variant, metric + "_max", v.back(),
                    unit});
    }
  }

 private:
  std::vector<double> values_;
};

Status NoopHandler(TaskContext&) { return Status::OK(); }

// A runtime on a fresh sub-directory, removed with it.
class Instance {
 public:
  Instance(const ReadsBenchOptions& options, const std::string& name)
      : path_(options.dir + "/" + name) {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
    options_.path = path_;
    options_.durability = options.durability;
    options_.readers = options.readers;
    options_.workers = 2;
  }
  ~Instance() {
    if (runtime_) (void)runtime_->Close().WaitFor(kWaitTimeout);
    runtime_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }

  Status Open(const std::vector<std::string>& types) {
    Status s = Runtime::Open(options_, &runtime_);
    for (const std::string& type : types) {
      if (s.ok()) s = runtime_->RegisterHandler(type, NoopHandler);
    }
    return s;
  }

  // Stores `n` tasks of `type` in batches; returns their ids.
  Result<std::vector<TaskId>> Preload(size_t n, const std::string& type,
                                      const std::string& payload) {
    std::vector<TaskId> ids;
    while (ids.size() < n) {
      size_t chunk = std::min<size_t>(10000, n - ids.size());
      std::vector<TaskSpec> specs(chunk, TaskSpec{type, payload, {}});
      BatchTicket ticket = runtime_->EnqueueBatch(std::move(specs));
      Status s = Wait(ticket.stored, "preload");
      if (!s.ok()) return s;
      ids.insert(ids.end(), ticket.ids.begin(), ticket.ids.end());
    }
    return ids;
  }

  Runtime* operator->() { return runtime_.get(); }

 private:
  std::string path_;
  Options options_;
  std::unique_ptr<Runtime> runtime_;
};

// A payload like a small job description.
const std::string kPayload =
    R"({"to":"user@example.com","template":"welcome","locale":"en"})";

// ---- point_get ----

Status PointGets(const ReadsBenchOptions& options,
                 const std::function<void(const ReadsRow&)>& emit) {
  Instance instance(options, "point_get");
  Status s = instance.Open({"job"});
  if (!s.ok()) return s;
  auto ids = instance.Preload(10000, "job", kPayload);
  if (!ids.ok()) return ids.status();
  const size_t total = options.quick ? 20000 : 200000;
  for (size_t window : {size_t{1}, size_t{64}}) {
    for (int callers : {1, 2, 4, 8}) {
      Figure rate;
      for (int round = 0; round < options.rounds; ++round) {
        std::atomic<bool> failed{false};
        size_t per_caller = (window == 1 ? total / 10 : total) / callers;
        auto started = Clock::now();
        std::vector<std::thread> threads;
        for (int c = 0; c < callers; ++c) {
          threads.emplace_back([&, c] {
            std::deque<Future<TaskInfo>> in_flight;
            size_t next = static_cast<size_t>(c) * 7919;
            for (size_t done = 0; done < per_caller;) {
              while (in_flight.size() < window &&
                     done + in_flight.size() < per_caller) {
                in_flight.push_back(
                    instance->GetTask((*ids)[next++ % ids->size()]));
              }
              if (!Wait(in_flight.front(), "get").ok()) failed = true;
              in_flight.pop_front();
              ++done;
            }
          });
        }
        for (auto& thread : threads) thread.join();
        double seconds = Seconds(Clock::now() - started);
        if (failed) return Status::Aborted("a point get failed");
        rate.Add(static_cast<double>(per_caller * callers) / seconds);
      }
      rate.Emit(emit, "point_get",
                "callers=" + std::to_string(callers) +
                    ",in_flight_per_caller=" + std::to_string(window) +
                    ",readers=" + std::to_string(options.readers),
                "gets_per_s", "1/s");
    }
  }
  return Status::OK();
}

// ---- list_json ----

Status ListJson(const ReadsBenchOptions& options,
                const std::function<void(const ReadsRow&)>& emit) {
  Instance instance(options, "list_json");
  Status s = instance.Open({"job", "other"});
  if (!s.ok()) return s;
  // 1,000 pending "job" tasks among 5,000 "other" ones, interleaved in id
  // order, so that a filtered listing skips nothing in its index but reads
  // records spread over the family.
  for (int i = 0; i < 5; ++i) {
    if (auto r = instance.Preload(1000, "other", kPayload); !r.ok()) {
      return r.status();
    }
    if (auto r = instance.Preload(200, "job", kPayload); !r.ok()) {
      return r.status();
    }
  }
  struct Variant {
    std::string name;
    TaskQuery query;
  };
  std::vector<Variant> variants;
  TaskQuery all;
  all.limit = 1000;
  variants.push_back({"no_filter", all});
  TaskQuery by_status = all;
  by_status.status = TaskStatus::kPending;
  variants.push_back({"status", by_status});
  TaskQuery by_type = all;
  by_type.type = "job";
  variants.push_back({"type", by_type});
  TaskQuery by_type_status = by_type;
  by_type_status.status = TaskStatus::kPending;
  variants.push_back({"type_status", by_type_status});
  // Newest first reads its records with point lookups (no forward run
  // scans); without payloads writes less.
  TaskQuery newest = all;
  newest.order = ListOrder::kNewestFirst;
  variants.push_back({"no_filter_newest", newest});
  TaskQuery type_newest = by_type;
  type_newest.order = ListOrder::kNewestFirst;
  variants.push_back({"type_newest", type_newest});
  TaskQuery type_bare = by_type;
  type_bare.include_payload = false;
  variants.push_back({"type_no_payload", type_bare});

  // The store, for the same listing without the actor hops.
  const int calls = options.quick ? 20 : 200;
  for (const Variant& variant : variants) {
    Figure json_ms;
    Figure info_ms;
    Figure bytes;
    for (int round = 0; round < options.rounds; ++round) {
      std::vector<double> samples;
      size_t size = 0;
      for (int i = 0; i < calls; ++i) {
        auto started = Clock::now();
        auto future = instance->ListTasksJson(variant.query);
        s = Wait(future, "list json");
        if (!s.ok()) return s;
        samples.push_back(Seconds(Clock::now() - started) * 1e3);
        size = future.Wait()->size();
      }
      std::sort(samples.begin(), samples.end());
      json_ms.Add(samples[samples.size() / 2]);
      bytes.Add(static_cast<double>(size));
      samples.clear();
      for (int i = 0; i < calls; ++i) {
        auto started = Clock::now();
        auto future = instance->ListTasks(variant.query);
        s = Wait(future, "list");
        if (!s.ok()) return s;
        if (future.Wait()->tasks.size() != 1000) {
          return Status::Aborted("listing returned " +
                                 std::to_string(future.Wait()->tasks.size()) +
                                 " tasks, not 1000");
        }
        samples.push_back(Seconds(Clock::now() - started) * 1e3);
      }
      std::sort(samples.begin(), samples.end());
      info_ms.Add(samples[samples.size() / 2]);
    }
    json_ms.Emit(emit, "list_1000", "json," + variant.name, "latency_p50_ms",
                 "ms");
    bytes.Emit(emit, "list_1000", "json," + variant.name, "bytes", "B");
    info_ms.Emit(emit, "list_1000", "taskinfo," + variant.name,
                 "latency_p50_ms", "ms");
  }
  return Status::OK();
}

// The JSON listing on the storage layer alone, on this thread: what the
// reader spends, without the hops.
Status ListJsonDirect(const ReadsBenchOptions& options,
                      const std::function<void(const ReadsRow&)>& emit) {
  storage::StoreOptions store_options;
  store_options.path = options.dir + "/list_direct";
  store_options.durability = options.durability;
  {
    Instance instance(options, "list_direct");
    Status s = instance.Open({"job", "other"});
    if (!s.ok()) return s;
    for (int i = 0; i < 5; ++i) {
      if (auto r = instance.Preload(1000, "other", kPayload); !r.ok()) {
        return r.status();
      }
      if (auto r = instance.Preload(200, "job", kPayload); !r.ok()) {
        return r.status();
      }
    }
    // Close the runtime, then open its directory as a bare store; the store
    // goes before the Instance, which removes the directory.
    s = Wait(instance->Close(), "close");
    if (!s.ok()) return s;
    std::unique_ptr<storage::TaskStore> store;
    s = storage::TaskStore::Open(store_options, &store);
    if (!s.ok()) return s;
    const int calls = options.quick ? 20 : 200;
    for (bool by_status : {false, true}) {
      Figure ms;
      Figure cpu_ms;
      for (int round = 0; round < options.rounds; ++round) {
        std::vector<double> samples;
        std::vector<double> cpu_samples;
        for (int i = 0; i < calls; ++i) {
          TaskQuery q;
          q.limit = 1000;
          if (by_status) q.status = TaskStatus::kPending;
          storage::ListSpec spec;
          s = storage::ParseTaskQuery(q, &spec);
          if (!s.ok()) return s;
          std::string json;
          double cpu = ThreadCpuSeconds();
          auto started = Clock::now();
          auto view = store->NewReadView();
          s = storage::ListPageJson(*view, spec, nullptr, &json);
          samples.push_back(Seconds(Clock::now() - started) * 1e3);
          cpu_samples.push_back((ThreadCpuSeconds() - cpu) * 1e3);
          if (!s.ok()) return s;
        }
        std::sort(samples.begin(), samples.end());
        std::sort(cpu_samples.begin(), cpu_samples.end());
        ms.Add(samples[samples.size() / 2]);
        cpu_ms.Add(cpu_samples[cpu_samples.size() / 2]);
      }
      std::string variant = std::string("json_storage_only,") +
                            (by_status ? "status" : "no_filter");
      ms.Emit(emit, "list_1000", variant, "latency_p50_ms", "ms");
      // Thread CPU time: the work itself, whatever else runs on the machine.
      cpu_ms.Emit(emit, "list_1000", variant, "cpu_p50_ms", "ms");
    }
  }
  return Status::OK();
}

// ---- watch_fanout ----

// Waits until the watcher has nothing in flight and its counters hold
// still; returns them.
Result<WatchStats> Settle(Instance& instance) {
  WatchStats last{};
  int still = 0;
  auto deadline = Clock::now() + kWaitTimeout;
  while (still < 3) {
    if (Clock::now() > deadline) return Status::TimedOut("watch settle");
    auto future = instance->GetWatchStats();
    Status s = Wait(future, "watch stats");
    if (!s.ok()) return s;
    WatchStats now = *future.Wait();
    bool same = now.in_flight == 0 && now.runs == last.runs &&
                now.emissions == last.emissions;
    still = same ? still + 1 : 0;
    last = now;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return last;
}

Status WatchFanout(const ReadsBenchOptions& options,
                   const std::function<void(const ReadsRow&)>& emit) {
  constexpr int kSubscriptions = 100;
  const int writes = options.quick ? 50 : 200;
  // What the 100 subscriptions watch, and what the writes touch.
  enum class Shape {
    // 100 tasks by id; writes enqueue other tasks: nothing may run.
    kKeyedUnrelated,
    // 100 listings, one per type; each write enqueues a task of one type:
    // exactly one listing runs and emits per write.
    kListPerType,
    // 100 listings of pending tasks with limits 1..100; every write affects
    // all of them: coalescing bounds the runs.
    kListAllAffected,
    // 100 subscriptions to the same counts query: one run per change.
    kSameQuery,
  };
  const std::pair<Shape, const char*> shapes[] = {
      {Shape::kKeyedUnrelated, "task_by_id,unrelated_writes"},
      {Shape::kListPerType, "list_per_type,one_affected_per_write"},
      {Shape::kListAllAffected, "list_pending_limits_1_to_100,all_affected"},
      {Shape::kSameQuery, "same_counts_query"},
  };
  for (const auto& [shape, name] : shapes) {
    for (bool burst : {false, true}) {
      Figure runs;
      Figure emissions;
      Figure delivered;
      Figure total_ms;
      for (int round = 0; round < options.rounds; ++round) {
        Instance instance(options, "watch_fanout");
        std::vector<std::string> types;
        for (int i = 0; i < kSubscriptions; ++i) {
          types.push_back("t" + std::to_string(i));
        }
        types.push_back("other");
        Status s = instance.Open(types);
        if (!s.ok()) return s;
        auto watched = instance.Preload(kSubscriptions, "other", kPayload);
        if (!watched.ok()) return watched.status();
        std::atomic<uint64_t> callbacks{0};
        std::vector<Watch> watches;
        for (int i = 0; i < kSubscriptions; ++i) {
          Result<Watch> watch = Status::Aborted("unset");
          switch (shape) {
            case Shape::kKeyedUnrelated:
              watch = instance->WatchTask(
                  (*watched)[i], [&](const Result<TaskInfo>&) { callbacks++; });
              break;
            case Shape::kListPerType: {
              TaskQuery q;
              q.type = types[i];
              q.status = TaskStatus::kPending;
              watch = instance->WatchList(
                  q, [&](const Result<TaskPage>&) { callbacks++; });
              break;
            }
            case Shape::kListAllAffected: {
              TaskQuery q;
              q.status = TaskStatus::kPending;
              q.limit = static_cast<size_t>(i + 1);
              watch = instance->WatchList(
                  q, [&](const Result<TaskPage>&) { callbacks++; });
              break;
            }
            case Shape::kSameQuery:
              watch = instance->WatchCountByStatus(
                  [&](const Result<StatusCounts>&) { callbacks++; });
              break;
          }
          if (!watch.ok()) return watch.status();
          watches.push_back(std::move(watch).value());
        }
        auto before = Settle(instance);
        if (!before.ok()) return before.status();
        uint64_t callbacks_before = callbacks.load();

        auto started = Clock::now();
        std::vector<Ticket> tickets;
        for (int j = 0; j < writes; ++j) {
          std::string type = shape == Shape::kListPerType
                                 ? types[j % kSubscriptions]
                             : shape == Shape::kKeyedUnrelated ? "other"
                                                               : types[0];
          tickets.push_back(instance->Enqueue(type, kPayload));
          if (!burst) {
            s = Wait(tickets.back().stored, "write");
            if (!s.ok()) return s;
          }
        }
        for (auto& ticket : tickets) {
          s = Wait(ticket.stored, "write");
          if (!s.ok()) return s;
        }
        auto after = Settle(instance);
        if (!after.ok()) return after.status();
        // The settle loop's last looks (3 x ~2 ms) are not part of the work.
        double ms = Seconds(Clock::now() - started) * 1e3;
        runs.Add(static_cast<double>(after->runs - before->runs));
        emissions.Add(
            static_cast<double>(after->emissions - before->emissions));
        delivered.Add(static_cast<double>(callbacks.load() - callbacks_before));
        total_ms.Add(ms);
      }
      std::string variant = std::string(name) +
                            ",subs=100,writes=" + std::to_string(writes) +
                            (burst ? ",burst" : ",sequential");
      runs.Emit(emit, "watch_fanout", variant, "reruns", "count");
      emissions.Emit(emit, "watch_fanout", variant, "emissions", "count");
      delivered.Emit(emit, "watch_fanout", variant, "callbacks", "count");
      total_ms.Emit(emit, "watch_fanout", variant, "total_ms", "ms");
    }
  }
  return Status::OK();
}

// ---- caller_cpu ----

Status CallerCpu(const ReadsBenchOptions& options,
                 const std::function<void(const ReadsRow&)>& emit) {
  Instance instance(options, "caller_cpu");
  Status s = instance.Open({"job"});
  if (!s.ok()) return s;
  auto ids = instance.Preload(10000, "job", kPayload);
  if (!ids.ok()) return ids.status();
  const int n = options.quick ? 2000 : 20000;
  struct Probe {
    const char* name;
    std::function<Status(int)> call;
    int count;
  };
  TaskQuery list;
  list.limit = 1000;
  std::vector<Probe> probes = {
      {"get_task",
       [&](int i) {
         return Wait(
             instance->GetTask((*ids)[static_cast<size_t>(i) % ids->size()]),
             "get");
       },
       n},
      {"get_task_json",
       [&](int i) {
         return Wait(instance->GetTaskJson(
                         (*ids)[static_cast<size_t>(i) % ids->size()]),
                     "get json");
       },
       n},
      {"count_by_status",
       [&](int) { return Wait(instance->CountByStatus(), "counts"); }, n},
      {"list_json_1000",
       [&](int) { return Wait(instance->ListTasksJson(list), "list"); },
       n / 50},
  };
  for (const Probe& probe : probes) {
    Figure cpu_us;
    Figure wall_us;
    for (int round = 0; round < options.rounds; ++round) {
      double cpu = ThreadCpuSeconds();
      auto started = Clock::now();
      for (int i = 0; i < probe.count; ++i) {
        s = probe.call(i);
        if (!s.ok()) return s;
      }
      wall_us.Add(Seconds(Clock::now() - started) * 1e6 / probe.count);
      cpu_us.Add((ThreadCpuSeconds() - cpu) * 1e6 / probe.count);
    }
    cpu_us.Emit(emit, "caller_cpu", std::string(probe.name) + ",call_and_wait",
                "caller_cpu_us_per_query", "us");
    wall_us.Emit(emit, "caller_cpu", std::string(probe.name) + ",call_and_wait",
                 "wall_us_per_query", "us");
  }
  // Issuing only (the caller does not wait): what a caller that pipelines
  // pays per query.
  Figure issue_cpu;
  for (int round = 0; round < options.rounds; ++round) {
    std::vector<Future<TaskInfo>> futures;
    futures.reserve(static_cast<size_t>(n));
    double cpu = ThreadCpuSeconds();
    for (int i = 0; i < n; ++i) {
      futures.push_back(
          instance->GetTask((*ids)[static_cast<size_t>(i) % ids->size()]));
    }
    issue_cpu.Add((ThreadCpuSeconds() - cpu) * 1e6 / n);
    for (auto& future : futures) {
      s = Wait(future, "get");
      if (!s.ok()) return s;
    }
  }
  issue_cpu.Emit(emit, "caller_cpu", "get_task,issue_only",
                 "caller_cpu_us_per_query", "us");
  return Status::OK();
}

bool Wanted(const ReadsBenchOptions& options, const std::string& name) {
  return options.scenarios.empty() ||
         std::find(options.scenarios.begin(), options.scenarios.end(), name) !=
             options.scenarios.end();
}

}  // namespace

std::vector<std::string> ReadsScenarioNames() {
  return {"point_get", "list_json", "watch_fanout", "caller_cpu"};
}

Status RunReadsBenchmarks(const ReadsBenchOptions& options,
                          const std::function<void(const ReadsRow&)>& emit) {
  if (options.dir.empty() || options.rounds < 1) {
    return Status::InvalidArgument("reads bench: dir and rounds >= 1 needed");
  }
  Status s;
  if (s.ok() && Wanted(options, "point_get")) s = PointGets(options, emit);
  if (s.ok() && Wanted(options, "list_json")) s = ListJson(options, emit);
  if (s.ok() && Wanted(options, "list_json")) s = ListJsonDirect(options, emit);
  if (s.ok() && Wanted(options, "watch_fanout")) s = WatchFanout(options, emit);
  if (s.ok() && Wanted(options, "caller_cpu")) s = CallerCpu(options, emit);
  return s;
}

std::string ReadsRowCsv(const ReadsRow& row) {
  auto field = [](const std::string& text) {
    if (text.find_first_of(",\"\n") == std::string::npos) return text;
    std::string quoted = "\"";
    for (char c : text) {
      if (c == '"') quoted += '"';
      quoted += c;
    }
    return quoted + "\"";
  };
  char value[64];
  std::snprintf(value, sizeof(value), "%.6g", row.value);
  return field(row.scenario) + "," + field(row.system) + "," +
         field(row.variant) + "," + field(row.metric) + "," + value + "," +
         field(row.unit);
}

}  // namespace spool::bench
