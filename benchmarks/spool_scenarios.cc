// spool's side of every scenario except codec.
//
// Measurements go through the public API (Runtime). Two internal pieces are
// used, each for a reason:
//   - storage::TaskStore / WriteTxn write set-up data (a crash's leftovers, a
//     long history) in a few large batches, exactly as the writer would have
//     left it on disk, so that set-up takes a second instead of minutes;
//   - actors::ReadyQueue is the scheduler's in-memory ready order. spool's
//     next-task selection is ReadyQueue::PopNext, which touches no storage,
//     so that is what long_history's next_task_us times.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <sys/resource.h>
#include <thread>
#include <vector>

#include <spool/runtime.h>
#include <spool/statistics.h>

#include "actors/ready_queue.h"
#include "actors/recovery.h"
#include "actors/transitions.h"
#include "benchmarks/reads_bench.h"
#include "benchmarks/scenarios.h"
#include "runtime/test_hooks.h"
#include "storage/record.h"
#include "storage/task_store.h"

namespace spool::bench {
namespace {

// Bounds every wait on spool. Far above any healthy figure; a runtime that
// takes longer is reported as hung and the worker gives up (Abandon).
constexpr auto kWaitTimeout = std::chrono::seconds(120);
constexpr char kType[] = "noop";
// EnqueueBatch size for set-up data stored through the API.
constexpr int kPreloadBatch = 10000;
// Set-up records written directly per WriteTxn.
constexpr int kSetupChunk = 10000;

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Waits for `future`, at most kWaitTimeout; abandons the worker when it does
// not resolve (see Abandon).
template <class T>
void WaitBounded(const Future<T>& future, const std::string& what,
                 Reporter* out) {
  if (!future.WaitFor(kWaitTimeout)) {
    Abandon(out, Status::TimedOut("spool: " + what + ": no answer within " +
                                  std::to_string(kWaitTimeout.count()) + " s"));
  }
}

// The result of `future`, waited for as WaitBounded does. A copy: the
// reference Wait returns lives only as long as the future, and callers pass
// temporaries.
template <class T>
Result<T> Await(const Future<T>& future, const std::string& what,
                Reporter* out) {
  WaitBounded(future, what, out);
  return future.Wait();
}

template <class T>
Status AwaitStatus(const Future<T>& future, const std::string& what,
                   Reporter* out) {
  Status s = Await(future, what, out).status();
  return s.ok() ? s : s.WithContext(what);
}

void Emit(Reporter* out, const std::string& scenario,
          const std::string& variant, const std::string& metric, double value,
          const std::string& unit) {
  Row row;
  row.scenario = scenario;
  row.system = "spool";
  row.variant = variant;
  row.metric = metric;
  row.value = value;
  row.unit = unit;
  row.group = scenario;
  out->AddRow(row);
}

// p50/p95/p99/max (or p50/p99 when !full) of `samples`, in µs.
void EmitPercentiles(Reporter* out, const std::string& scenario,
                     const std::string& variant, Samples* samples, bool full) {
  Emit(out, scenario, variant, "p50_us", samples->Percentile(50), "us");
  if (full)
    Emit(out, scenario, variant, "p95_us", samples->Percentile(95), "us");
  Emit(out, scenario, variant, "p99_us", samples->Percentile(99), "us");
  if (full) Emit(out, scenario, variant, "max_us", samples->Max(), "us");
}

// What the writer did between two snapshots, per item (a task enqueued, or
// a task claimed and settled): its thread's CPU time per item, and the size
// of its commits (tasks changed per commit: mean, p50, p90 and p99, each as
// the power of two that bounds it).
struct WriterWork {
  std::vector<double> cpu_us_per_item;
  std::vector<double> mean_commit;
  std::vector<uint64_t> sizes;  // summed histogram over rounds

  void Add(const WriterStatsSnapshot& before, const WriterStatsSnapshot& after,
           uint64_t items) {
    if (items == 0) return;
    cpu_us_per_item.push_back((after.cpu_ns - before.cpu_ns) / 1e3 / items);
    uint64_t commits = after.commits - before.commits;
    if (commits > 0) {
      mean_commit.push_back(double(after.tasks_changed - before.tasks_changed) /
                            commits);
    }
    sizes.resize(after.commit_sizes.size());
    for (size_t i = 0; i < after.commit_sizes.size(); ++i) {
      sizes[i] += after.commit_sizes[i] - before.commit_sizes[i];
    }
  }

  // The bound of the bucket holding the commit at `percent`.
  double SizePercentile(double percent) const {
    uint64_t total = 0;
    for (uint64_t n : sizes) total += n;
    if (total == 0) return 0;
    uint64_t seen = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      seen += sizes[i];
      if (seen * 100.0 >= percent * total) return double(uint64_t{1} << i);
    }
    return double(uint64_t{1} << (sizes.size() - 1));
  }

  void EmitTo(Reporter* out, const std::string& scenario,
              const std::string& variant, const std::string& per) const;
};

void WriterWork::EmitTo(Reporter* out, const std::string& scenario,
                        const std::string& variant,
                        const std::string& per) const {
  if (cpu_us_per_item.empty()) return;
  Emit(out, scenario, variant, "writer_cpu_us_per_" + per,
       Median(cpu_us_per_item), "us");
  if (!mean_commit.empty()) {
    Emit(out, scenario, variant, "commit_tasks_mean", Median(mean_commit),
         "tasks");
  }
  Emit(out, scenario, variant, "commit_tasks_p50", SizePercentile(50), "tasks");
  Emit(out, scenario, variant, "commit_tasks_p90", SizePercentile(90), "tasks");
  Emit(out, scenario, variant, "commit_tasks_p99", SizePercentile(99), "tasks");
}

// counts its runs and notes when the first one happened.
class SpoolInstance {
 public:
  SpoolInstance(const Options& base, Durability durability, int workers,
                const char* label, TestHooks hooks = {})
      : dir_(label), options_(base), hooks_(std::move(hooks)) {
    options_.durability = durability;
    options_.workers = workers;
    options_.path = dir_.path() + "/spool";
  }
  ~SpoolInstance() {
    if (runtime_ != nullptr && out_ != nullptr) {
      Status ignored = Close(out_);  // An error path; the error is reported.
      (void)ignored;
    }
  }

  const std::string& path() const { return options_.path; }
  Runtime* runtime() { return runtime_.get(); }
  uint64_t runs() const { return runs_.load(); }
  Future<void> first_run() const { return first_run_.GetFuture(); }
  SteadyClock::time_point first_run_time() const { return first_run_time_; }

  // Runtime::Open alone, so that callers can time it.
  Status OpenRuntime(Reporter* out) {
    out_ = out;
    if (!dir_.ok()) return Status::IOError("mkdtemp failed");
    return OpenWithHooks(options_, hooks_, &runtime_);
  }

  Status Register() {
    return runtime_->RegisterHandler(kType, [this](TaskContext&) {
      if (runs_.fetch_add(1, std::memory_order_relaxed) == 0) {
        first_run_time_ = SteadyClock::now();
        first_run_.Set(Result<void>());
      }
      return Status::OK();
    });
  }

  Status Open(Reporter* out) {
    Status s = OpenRuntime(out);
    return s.ok() ? Register() : s;
  }

  // Close, bounded.
  Status Close(Reporter* out) {
    if (runtime_ == nullptr) return Status::OK();
    Status s = AwaitStatus(runtime_->Close(), "close", out);
    runtime_.reset();
    return s;
  }

 private:
  ScratchDir dir_;  // Declared first: outlives the runtime.
  Options options_;
  TestHooks hooks_;
  std::unique_ptr<Runtime> runtime_;
  Reporter* out_ = nullptr;
  std::atomic<uint64_t> runs_{0};
  Promise<void> first_run_;
  SteadyClock::time_point first_run_time_;
};

// ---- enqueue ----

Status EnqueueScenario(const Plan& plan, const Options& base, Reporter* out) {
  const std::string payload(plan.payload_bytes, 'p');
  for (Durability mode : {Durability::kSync, Durability::kRelaxed}) {
    const std::string m = DurabilityName(mode);
    Samples sequential;
    std::vector<double> sequential_rate;
    std::map<int, std::vector<double>> rate;
    std::map<int, Samples> latency;
    std::map<int, WriterWork> writer;
    for (int round = 1; round <= plan.rounds; ++round) {
      Progress("spool enqueue %s: round %d/%d", m.c_str(), round, plan.rounds);
      // Not started: enqueue alone, as the peers' enqueue stores tasks
      // without running them.
      SpoolInstance instance(base, mode, base.workers, "enqueue");
      Status s = instance.Open(out);
      if (!s.ok()) return s;
      Runtime* runtime = instance.runtime();
      auto enqueue_awaited = [&]() -> Status {
        Ticket ticket = runtime->Enqueue(kType, payload);
        return AwaitStatus(ticket.stored, "enqueue", out);
      };
      for (int i = 0; i < plan.warmup_calls; ++i) {
        if (!(s = enqueue_awaited()).ok()) return s;
      }
      auto start = SteadyClock::now();
      for (int i = 0; i < plan.sequential_enqueues; ++i) {
        auto before = SteadyClock::now();
        s = enqueue_awaited();
        auto after = SteadyClock::now();
        if (!s.ok()) return s;
        sequential.Add(MicrosBetween(before, after));
      }
      sequential_rate.push_back(
          plan.sequential_enqueues /
          (MicrosBetween(start, SteadyClock::now()) / 1e6));
      for (int callers : plan.callers) {
        WriterStatsSnapshot before = GetWriterStats(*runtime);
        CallerRun run =
            RunCallers(callers, plan.caller_warmup_s, plan.caller_window_s,
                       [&](int) { return enqueue_awaited(); });
        if (!run.error.ok()) return run.error;
        WriterStatsSnapshot after = GetWriterStats(*runtime);
        writer[callers].Add(before, after, after.enqueued - before.enqueued);
        rate[callers].push_back(run.ops_per_s);
        latency[callers].Append(run.latencies_us);
      }
      if (!(s = instance.Close(out)).ok()) return s;
    }
    const std::string one = m + ",callers=1";
    EmitPercentiles(out, "enqueue", one, &sequential, /*full=*/true);
    Emit(out, "enqueue", m + ",sequential", "ops_per_s",
         Median(sequential_rate), "ops/s");
    for (int callers : plan.callers) {
      const std::string variant = m + ",callers=" + std::to_string(callers);
      Emit(out, "enqueue", variant, "ops_per_s", Median(rate[callers]),
           "ops/s");
      if (callers > 1) {
        EmitPercentiles(out, "enqueue", variant, &latency[callers], false);
      }
      writer[callers].EmitTo(out, "enqueue", variant, "task");
    }
  }
  return Status::OK();
}

// ---- statistics being read ----

// Reads a runtime's statistics every `interval` on a thread of its own, as a
// Prometheus scrape or a dashboard would: GetStatistics, then
// FormatPrometheus. Stops and joins when destroyed.
class StatisticsPoller {
 public:
  StatisticsPoller(Runtime* runtime, std::chrono::milliseconds interval)
      : thread_([this, runtime, interval] {
          std::unique_lock<std::mutex> lock(mutex_);
          while (!stop_) {
            lock.unlock();
            bytes_ += FormatPrometheus(runtime->GetStatistics()).size();
            ++polls_;
            lock.lock();
            wake_.wait_for(lock, interval, [this] { return stop_; });
          }
        }) {}
  ~StatisticsPoller() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  uint64_t polls() const { return polls_.load(); }

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::atomic<uint64_t> polls_{0};
  std::atomic<uint64_t> bytes_{0};
  std::thread thread_;  // Last: starts once the rest is built.
};

constexpr auto kPollInterval = std::chrono::milliseconds(10);

// How a measured runtime treats its statistics.
enum class StatsMode {
  kOff,     // not kept (TestHooks::collect_statistics = false)
  kKept,    // kept, as always, and read by nobody
  kPolled,  // kept, and read every kPollInterval by a StatisticsPoller
};

// The CPU time of this whole process so far (every thread: callers,
// actors, workers, a poller), in microseconds.
double ProcessCpuMicros() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto us = [](const timeval& t) { return t.tv_sec * 1e6 + t.tv_usec; };
  return us(usage.ru_utime) + us(usage.ru_stime);
}

TestHooks HooksFor(StatsMode mode) {
  TestHooks hooks;
  hooks.collect_statistics = mode != StatsMode::kOff;
  return hooks;
}

// ---- drain ----

// Stores `tasks` tasks before the timer, then times Start until Drain
// resolves: every task claimed durably, run, and its completion durable.
Status DrainRound(const Plan& plan, const Options& base, int workers, int tasks,
                  Reporter* out, double* tasks_per_s, WriterWork* writer,
                  StatsMode stats = StatsMode::kKept,
                  double* cpu_us_per_task = nullptr) {
  const std::string payload(plan.payload_bytes, 'p');
  SpoolInstance instance(base, Durability::kSync, workers, "drain",
                         HooksFor(stats));
  Status s = instance.Open(out);
  if (!s.ok()) return s;
  Runtime* runtime = instance.runtime();
  for (int done = 0; done < tasks;) {
    int n = std::min(kPreloadBatch, tasks - done);
    std::vector<TaskSpec> batch(static_cast<size_t>(n),
                                TaskSpec{kType, payload, {}});
    s = AwaitStatus(runtime->EnqueueBatch(std::move(batch)).stored,
                    "preload batch", out);
    if (!s.ok()) return s;
    done += n;
  }

  std::optional<StatisticsPoller> poller;
  if (stats == StatsMode::kPolled) poller.emplace(runtime, kPollInterval);
  WriterStatsSnapshot before = GetWriterStats(*runtime);
  double cpu_before = ProcessCpuMicros();
  auto start = SteadyClock::now();
  if (!(s = runtime->Start()).ok()) return s;
  s = AwaitStatus(runtime->Drain(), "drain", out);
  auto end = SteadyClock::now();
  if (cpu_us_per_task != nullptr) {
    *cpu_us_per_task = (ProcessCpuMicros() - cpu_before) / tasks;
  }
  poller.reset();
  if (!s.ok()) return s;
  writer->Add(before, GetWriterStats(*runtime), static_cast<uint64_t>(tasks));

  Result<StatusCounts> counts =
      Await(runtime->CountByStatus(), "count by status", out);
  if (!counts.ok()) return counts.status();
  uint64_t succeeded = counts->of(TaskStatus::kSucceeded);
  if (instance.runs() != static_cast<uint64_t>(tasks) ||
      succeeded != static_cast<uint64_t>(tasks)) {
    return Status::Corruption("spool drain: " + std::to_string(tasks) +
                              " tasks, but " + std::to_string(instance.runs()) +
                              " handler runs and " + std::to_string(succeeded) +
                              " succeeded");
  }
  *tasks_per_s = tasks / (MicrosBetween(start, end) / 1e6);
  return instance.Close(out);
}

// Drains `tasks` stored tasks at `concurrency`, `rounds` times, and emits
// the median rate under `variant`.
Status DrainRounds(const Plan& plan, const Options& base, int concurrency,
                   int tasks, int rounds, const std::string& variant,
                   Reporter* out) {
  std::vector<double> rates;
  WriterWork writer;
  for (int round = 1; round <= rounds; ++round) {
    Progress("spool drain %s tasks, concurrency %d: round %d/%d",
             WithCommas(tasks).c_str(), concurrency, round, rounds);
    double rate = 0;
    Status s = DrainRound(plan, base, concurrency, tasks, out, &rate, &writer);
    if (!s.ok()) return s;
    rates.push_back(rate);
  }
  Emit(out, "drain", variant, "tasks_per_s", Median(rates), "tasks/s");
  // Per task drained: its claim and its outcome.
  writer.EmitTo(out, "drain", variant, "task");
  return Status::OK();
}

Status DrainScenario(const Plan& plan, const Options& base, Reporter* out) {
  std::vector<int> concurrencies = {1};
  if (base.workers > 1) concurrencies.push_back(base.workers);
  for (int concurrency : concurrencies) {
    Status s =
        DrainRounds(plan, base, concurrency, plan.drain_tasks, plan.rounds,
                    "sync,concurrency=" + std::to_string(concurrency), out);
    if (!s.ok()) return s;
  }
  if (plan.big_drain_tasks > 0) {
    return DrainRounds(plan, base, base.workers, plan.big_drain_tasks,
                       plan.big_drain_rounds,
                       "sync,concurrency=" + std::to_string(base.workers) +
                           ",tasks=" + std::to_string(plan.big_drain_tasks),
                       out);
  }
  return Status::OK();
}

// ---- statistics: the hot path with and without them ----

// Enqueue (8 callers, sync) and drain (runtime.workers, sync), each three
// ways: statistics not kept (the runtime as before they existed), kept and
// read by nobody, and kept and read every 10 ms by a poller. The three run
// in rotating order round by round, so that drift in the machine's load
// falls on all alike. Emits each median and its ratio to "off".
Status StatisticsScenario(const Plan& plan, const Options& base,
                          Reporter* out) {
  const std::string payload(plan.payload_bytes, 'p');
  constexpr int kCallers = 8;
  const int drain_tasks = std::max(plan.drain_tasks * 4, 8000);
  constexpr StatsMode kModes[] = {StatsMode::kOff, StatsMode::kKept,
                                  StatsMode::kPolled};
  constexpr const char* kNames[] = {"off", "kept", "polled"};
  std::vector<double> enqueue_rate[3], drain_rate[3];
  std::vector<double> enqueue_cpu[3], drain_cpu[3];
  WriterWork enqueue_writer[3], drain_writer[3];
  for (int round = 1; round <= plan.rounds; ++round) {
    for (int i = 0; i < 3; ++i) {
      int m = (round + i) % 3;
      StatsMode mode = kModes[m];
      Progress("spool statistics %s: round %d/%d", kNames[m], round,
               plan.rounds);
      SpoolInstance instance(base, Durability::kSync, base.workers, "stats",
                             HooksFor(mode));
      Status s = instance.Open(out);
      if (!s.ok()) return s;
      Runtime* runtime = instance.runtime();
      std::optional<StatisticsPoller> poller;
      if (mode == StatsMode::kPolled) poller.emplace(runtime, kPollInterval);
      WriterStatsSnapshot before = GetWriterStats(*runtime);
      double cpu_before = ProcessCpuMicros();
      CallerRun run = RunCallers(
          kCallers, plan.caller_warmup_s, plan.caller_window_s, [&](int) {
            return AwaitStatus(runtime->Enqueue(kType, payload).stored,
                               "enqueue", out);
          });
      double cpu = ProcessCpuMicros() - cpu_before;
      WriterStatsSnapshot after = GetWriterStats(*runtime);
      if (poller && poller->polls() == 0) {
        return Status::FailedPrecondition("the statistics poller never ran");
      }
      poller.reset();
      if (!run.error.ok()) return run.error;
      uint64_t enqueued = after.enqueued - before.enqueued;
      enqueue_rate[m].push_back(run.ops_per_s);
      if (enqueued > 0) enqueue_cpu[m].push_back(cpu / enqueued);
      enqueue_writer[m].Add(before, after, enqueued);
      if (!(s = instance.Close(out)).ok()) return s;

      double rate = 0, cpu_per_task = 0;
      s = DrainRound(plan, base, base.workers, drain_tasks, out, &rate,
                     &drain_writer[m], mode, &cpu_per_task);
      if (!s.ok()) return s;
      drain_rate[m].push_back(rate);
      drain_cpu[m].push_back(cpu_per_task);
    }
  }
  // Each figure's median, and for kept and polled its ratio to off's.
  auto emit = [out, &kNames](const std::string& variant,
                             std::vector<double>* rates,
                             const std::string& unit, std::vector<double>* cpu,
                             WriterWork* writer) {
    double off_rate = Median(rates[0]);
    double off_cpu = Median(cpu[0]);
    for (int m = 0; m < 3; ++m) {
      std::string name = variant + ",statistics=" + kNames[m];
      double rate = Median(rates[m]);
      double cpu_us = Median(cpu[m]);
      Emit(out, "statistics", name, "rate", rate, unit);
      Emit(out, "statistics", name, "process_cpu_us_per_task", cpu_us, "us");
      writer[m].EmitTo(out, "statistics", name, "task");
      if (m > 0) {
        Emit(out, "statistics", name, "rate_over_off",
             off_rate > 0 ? rate / off_rate : 0, "x");
        Emit(out, "statistics", name, "cpu_over_off",
             off_cpu > 0 ? cpu_us / off_cpu : 0, "x");
      }
    }
  };
  emit("enqueue,sync,callers=" + std::to_string(kCallers), enqueue_rate,
       "ops/s", enqueue_cpu, enqueue_writer);
  emit("drain,sync,concurrency=" + std::to_string(base.workers) +
           ",tasks=" + std::to_string(drain_tasks),
       drain_rate, "tasks/s", drain_cpu, drain_writer);
  return Status::OK();
}

// ---- set-up data written straight through the store ----

// A task's values as the writer creates them at enqueue (pending), through
// the same transition code.
actors::NewRecords NewPendingRecord(TaskId id, uint64_t sequence,
                                    const std::string& payload,
                                    int64_t now_us) {
  actors::NewTask task;
  task.id = id;
  task.type = kType;
  task.payload = payload;
  task.retry = RetryPolicy{};  // The handler default: 3 attempts, backoff.
  return actors::NewRecord(task, sequence, now_us, {}, "", "");
}

Status OpenStore(const std::string& path, Durability durability,
                 std::unique_ptr<storage::TaskStore>* store) {
  storage::StoreOptions options;
  options.path = path;
  options.durability = durability;
  return storage::TaskStore::Open(options, store);
}

// Commits a transaction that fills it with `fn`.
Status CommitTxn(storage::TaskStore* store,
                 const std::function<Status(storage::WriteTxn*)>& fn) {
  storage::WriteTxn txn(store);
  Status s = fn(&txn);
  return s.ok() ? store->Commit(&txn) : s;
}

// The state a crash leaves: `total` tasks, the first `running` of them (the
// oldest, claimed first) running with their attempt counted, the rest
// pending. Written unsynced, then flushed.
Status WriteCrashState(const std::string& path, const Plan& plan) {
  std::unique_ptr<storage::TaskStore> store;
  Status s = OpenStore(path, Durability::kRelaxed, &store);
  if (!s.ok()) return s;
  const std::string payload(plan.payload_bytes, 'p');
  const int64_t now = NowMicros();
  for (int first = 1; first <= plan.recovery_tasks; first += kSetupChunk) {
    int last = std::min(first + kSetupChunk - 1, plan.recovery_tasks);
    s = CommitTxn(store.get(), [&](storage::WriteTxn* txn) {
      for (int id = first; id <= last; ++id) {
        actors::NewRecords task = NewPendingRecord(
            static_cast<TaskId>(id), txn->NextSequence(), payload, now);
        if (id <= plan.recovery_running) actors::Claim(&task.state, now);
        txn->Insert(std::move(task.spec), std::move(task.state));
      }
      return Status::OK();
    });
    if (!s.ok()) return s;
  }
  return store->Flush();
}

// A long history: `history_done` tasks that each went through the states a
// real task does (stored pending, claimed, succeeded; one commit per step
// per chunk, as the writer batches them, so that the index families see
// their puts and deletes), then `history_pending` pending tasks. Written
// unsynced, then flushed.
// Its tasks finish `age_us` before now.
Status WriteHistory(const std::string& path, const Plan& plan,
                    int64_t age_us = 0) {
  std::unique_ptr<storage::TaskStore> store;
  Status s = OpenStore(path, Durability::kRelaxed, &store);
  if (!s.ok()) return s;
  const std::string payload(plan.payload_bytes, 'p');
  const int64_t now = NowMicros() - age_us;
  auto insert = [&](int first, int last) {
    return CommitTxn(store.get(), [&](storage::WriteTxn* txn) {
      for (int id = first; id <= last; ++id) {
        actors::NewRecords task = NewPendingRecord(
            static_cast<TaskId>(id), txn->NextSequence(), payload, now);
        txn->Insert(std::move(task.spec), std::move(task.state));
      }
      return Status::OK();
    });
  };
  auto update = [&](int first, int last,
                    const std::function<void(storage::StateRecord*)>& change) {
    return CommitTxn(store.get(), [&](storage::WriteTxn* txn) {
      for (int id = first; id <= last; ++id) {
        storage::StateRecord record;
        Status g = txn->GetState(static_cast<TaskId>(id), &record);
        if (!g.ok()) return g;
        change(&record);
        txn->Update(std::move(record));
      }
      return Status::OK();
    });
  };
  actors::Outcome success;
  success.attempt = 1;
  for (int first = 1; first <= plan.history_done; first += kSetupChunk) {
    int last = std::min(first + kSetupChunk - 1, plan.history_done);
    s = insert(first, last);
    if (s.ok()) {
      s = update(first, last,
                 [&](storage::StateRecord* r) { actors::Claim(r, now); });
    }
    if (s.ok()) {
      s = update(first, last, [&](storage::StateRecord* r) {
        success.id = r->id;
        actors::Settle(r, success, now, 0.0);
      });
    }
    if (!s.ok()) return s;
  }
  int total = plan.history_done + plan.history_pending;
  for (int first = plan.history_done + 1; first <= total;
       first += kSetupChunk) {
    s = insert(first, std::min(first + kSetupChunk - 1, total));
    if (!s.ok()) return s;
  }
  return store->Flush();
}

// ---- recovery ----

Status RecoveryScenario(const Plan& plan, const Options& base, Reporter* out) {
  std::vector<double> total_ms, open_ms, start_ms;
  for (int round = 1; round <= plan.rounds; ++round) {
    Progress("spool recovery (%s stored, %s running): round %d/%d",
             WithCommas(plan.recovery_tasks).c_str(),
             WithCommas(plan.recovery_running).c_str(), round, plan.rounds);
    SpoolInstance instance(base, Durability::kSync, base.workers, "recovery");
    Status s = WriteCrashState(instance.path(), plan);
    if (!s.ok()) return s.WithContext("recovery set-up");

    // Recovery runs inside Open (interrupted attempts recorded in one synced
    // batch, queue loaded); Start then hands the queue to the workers. The
    // clock stops when the first task runs again: by then the scheduler holds
    // every rescheduled task.
    auto t0 = SteadyClock::now();
    if (!(s = instance.OpenRuntime(out)).ok()) return s;
    auto opened = SteadyClock::now();
    if (!(s = instance.Register()).ok()) return s;
    if (!(s = instance.runtime()->Start()).ok()) return s;
    auto started = SteadyClock::now();
    if (!(s = AwaitStatus(instance.first_run(), "first run", out)).ok()) {
      return s;
    }
    total_ms.push_back(MillisBetween(t0, instance.first_run_time()));
    open_ms.push_back(MillisBetween(t0, opened));
    start_ms.push_back(MillisBetween(t0, started));

    // Every interrupted task must now be rescheduled with its attempt
    // counted (or, if its retry came due already, have run again).
    int rescheduled = 0;
    for (int id = 1; id <= plan.recovery_running; ++id) {
      Result<TaskInfo> info = Await(
          instance.runtime()->GetTask(static_cast<TaskId>(id)), "get", out);
      if (!info.ok()) return info.status();
      bool ok =
          (info->status == TaskStatus::kRetryScheduled && info->attempts == 1 &&
           info->last_error == actors::kInterruptedError) ||
          info->attempts >= 2;
      rescheduled += ok ? 1 : 0;
    }
    if (rescheduled != plan.recovery_running) {
      return Status::Corruption(
          "spool recovery: " + std::to_string(rescheduled) + " of " +
          std::to_string(plan.recovery_running) +
          " interrupted tasks were rescheduled");
    }
    if (!(s = instance.Close(out)).ok()) return s;
  }
  const std::string variant =
      "sync,tasks=" + std::to_string(plan.recovery_tasks) +
      ",running=" + std::to_string(plan.recovery_running);
  Emit(out, "recovery", variant, "ms", Median(total_ms), "ms");
  Emit(out, "recovery", variant, "open_ms", Median(open_ms), "ms");
  Emit(out, "recovery", variant, "start_ms", Median(start_ms), "ms");
  return Status::OK();
}

// ---- long_history ----

// Times `plan.selections` next-task selections on the scheduler's ready
// order, loaded from the store as Open loads it. Returns the mean per
// selection and adds each batch's per-selection time to *batches.
Status TimeSelections(const std::string& path, const Plan& plan,
                      double* mean_us, Samples* batches) {
  std::unique_ptr<storage::TaskStore> store;
  Status s = OpenStore(path, Durability::kSync, &store);
  if (!s.ok()) return s;
  Result<std::vector<actors::QueueEntry>> loaded = actors::LoadQueue(*store);
  if (!loaded.ok()) return loaded.status();
  actors::ReadyQueue queue;
  for (const actors::QueueEntry& entry : *loaded) queue.Add(entry);
  if (queue.ready_size() < static_cast<size_t>(plan.selections)) {
    return Status::Corruption(
        "long_history: " + std::to_string(queue.ready_size()) +
        " ready tasks loaded, fewer than the " +
        std::to_string(plan.selections) + " selections");
  }
  std::vector<actors::QueueEntry> picked(static_cast<size_t>(plan.selections));
  double total_us = 0;
  size_t next = 0;
  while (next < picked.size()) {
    size_t end = std::min(next + static_cast<size_t>(plan.selection_batch),
                          picked.size());
    auto before = SteadyClock::now();
    for (size_t i = next; i < end; ++i) {
      std::optional<actors::QueueEntry> entry = queue.PopNext();
      if (entry) picked[i] = *entry;
    }
    double us = MicrosBetween(before, SteadyClock::now());
    total_us += us;
    batches->Add(us / static_cast<double>(end - next));
    next = end;
  }
  // The selections must have been real: the oldest pending tasks, in order.
  for (size_t i = 0; i < picked.size(); ++i) {
    TaskId want = static_cast<TaskId>(plan.history_done) + 1 + i;
    if (picked[i].id != want) {
      return Status::Corruption("long_history: selection " + std::to_string(i) +
                                " picked task " + std::to_string(picked[i].id) +
                                ", not " + std::to_string(want));
    }
  }
  *mean_us = total_us / static_cast<double>(picked.size());
  return Status::OK();
}

// Issue 3's measure: next-task selection with 100,000 delayed tasks and
// 10,000 groups in the scheduler's queue. The delayed tasks are due in an
// hour and spread over the groups; 10,000 ready tasks, one per group, are
// selected 1,000 times in batches. Returns the mean per selection, and adds
// each batch's mean to *batches.
Status TimeSelectionsAmongDelayed(const Plan& plan, double* mean_us,
                                  Samples* batches) {
  constexpr int kGroups = 10000;
  const int64_t later_us =
      std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::system_clock::now().time_since_epoch() +
          std::chrono::hours(1))
          .count();
  actors::ReadyQueue queue;
  uint64_t sequence = 0;
  TaskId id = 0;
  for (int i = 0; i < plan.delayed_tasks; ++i) {
    actors::QueueEntry entry;
    entry.id = ++id;
    entry.sequence = ++sequence;
    entry.due_us = later_us + i;
    entry.type = kType;
    entry.group = "g" + std::to_string(i % kGroups);
    queue.Add(entry);
  }
  for (int g = 0; g < kGroups; ++g) {
    actors::QueueEntry entry;
    entry.id = ++id;
    entry.sequence = ++sequence;
    entry.priority = g % 3;
    entry.type = kType;
    entry.group = "g" + std::to_string(g);
    queue.Add(entry);
  }
  double total_us = 0;
  int done = 0;
  while (done < plan.selections) {
    const int n = std::min(plan.selection_batch, plan.selections - done);
    auto before = SteadyClock::now();
    for (int i = 0; i < n; ++i) {
      std::optional<actors::QueueEntry> entry = queue.PopNext();
      if (!entry || entry->due_us != 0) {
        return Status::Corruption(
            "long_history: a selection among delayed tasks picked " +
            std::string(entry ? "a delayed task" : "nothing"));
      }
    }
    double us = MicrosBetween(before, SteadyClock::now());
    total_us += us;
    batches->Add(us / n);
    done += n;
  }
  *mean_us = total_us / plan.selections;
  return Status::OK();
}

Status LongHistoryScenario(const Plan& plan, const Options& base,
                           Reporter* out) {
  {
    std::vector<double> delayed_us;
    Samples delayed_batches;
    for (int round = 1; round <= plan.rounds; ++round) {
      double mean_us = 0;
      Status s = TimeSelectionsAmongDelayed(plan, &mean_us, &delayed_batches);
      if (!s.ok()) return s;
      delayed_us.push_back(mean_us);
    }
    const std::string variant =
        "memory,delayed=" + std::to_string(plan.delayed_tasks) +
        ",groups=10000";
    Emit(out, "long_history", variant, "next_task_us", Median(delayed_us),
         "us");
    Emit(out, "long_history", variant, "next_task_p99_us",
         delayed_batches.Percentile(99), "us");
  }
  std::vector<double> open_ms, next_us, run_ms;
  Samples batches;
  for (int round = 1; round <= plan.rounds; ++round) {
    Progress("spool long_history (%s done + %s pending): round %d/%d",
             WithCommas(plan.history_done).c_str(),
             WithCommas(plan.history_pending).c_str(), round, plan.rounds);
    SpoolInstance instance(base, Durability::kSync, base.workers, "history");
    auto setup_start = SteadyClock::now();
    Status s = WriteHistory(instance.path(), plan);
    if (!s.ok()) return s.WithContext("long_history set-up");
    if (round == 1) {
      Progress("  set-up wrote %s records in %.0f ms",
               WithCommas(plan.history_done + plan.history_pending).c_str(),
               MillisBetween(setup_start, SteadyClock::now()));
    }

    double mean_us = 0;
    if (!(s = TimeSelections(instance.path(), plan, &mean_us, &batches)).ok()) {
      return s;
    }
    next_us.push_back(mean_us);

    auto t0 = SteadyClock::now();
    if (!(s = instance.OpenRuntime(out)).ok()) return s;
    open_ms.push_back(MillisBetween(t0, SteadyClock::now()));
    if (!(s = instance.Register()).ok()) return s;
    auto t1 = SteadyClock::now();
    if (!(s = instance.runtime()->Start()).ok()) return s;
    if (!(s = AwaitStatus(instance.runtime()->Drain(), "drain", out)).ok()) {
      return s;
    }
    run_ms.push_back(MillisBetween(t1, SteadyClock::now()));
    if (instance.runs() != static_cast<uint64_t>(plan.history_pending)) {
      return Status::Corruption(
          "long_history: " + std::to_string(instance.runs()) +
          " handler runs for " + std::to_string(plan.history_pending) +
          " pending tasks");
    }
    if (!(s = instance.Close(out)).ok()) return s;
  }
  const std::string variant =
      "sync,done=" + std::to_string(plan.history_done) +
      ",pending=" + std::to_string(plan.history_pending);
  Emit(out, "long_history", variant, "open_ms", Median(open_ms), "ms");
  Emit(out, "long_history", variant, "next_task_us", Median(next_us), "us");
  Emit(out, "long_history", variant, "next_task_p99_us", batches.Percentile(99),
       "us");
  Emit(out, "long_history", variant, "run_ms", Median(run_ms), "ms");
  return Status::OK();
}

// ---- caller_thread ----

Status CallerThreadScenario(const Plan& plan, const Options& base,
                            Reporter* out) {
  const std::string payload(plan.payload_bytes, 'p');
  Samples enqueue_call, enqueue_wait, get_call, get_wait, clock_cost;
  Samples busy_call;
  for (int round = 1; round <= plan.rounds; ++round) {
    Progress("spool caller_thread: round %d/%d", round, plan.rounds);
    SpoolInstance instance(base, Durability::kSync, base.workers, "cpu");
    Status s = instance.Open(out);
    if (!s.ok()) return s;
    Runtime* runtime = instance.runtime();
    for (int i = 0; i < plan.warmup_calls; ++i) {
      s = AwaitStatus(runtime->Enqueue(kType, payload).stored, "enqueue", out);
      if (!s.ok()) return s;
    }
    // What reading the clock itself costs, for scale.
    for (int i = 0; i < 1000; ++i) {
      double a = ThreadCpuMicros();
      double b = ThreadCpuMicros();
      clock_cost.Add(b - a);
    }
    std::vector<TaskId> ids;
    ids.reserve(static_cast<size_t>(plan.cpu_calls));
    for (int i = 0; i < plan.cpu_calls; ++i) {
      double c0 = ThreadCpuMicros();
      Ticket ticket = runtime->Enqueue(kType, payload);
      double c1 = ThreadCpuMicros();
      s = AwaitStatus(ticket.stored, "enqueue", out);
      double c2 = ThreadCpuMicros();
      if (!s.ok()) return s;
      enqueue_call.Add(c1 - c0);
      enqueue_wait.Add(c2 - c0);
      ids.push_back(ticket.id);
    }
    for (TaskId id : ids) {
      double c0 = ThreadCpuMicros();
      Future<TaskInfo> future = runtime->GetTask(id);
      double c1 = ThreadCpuMicros();
      WaitBounded(future, "get", out);
      const Result<TaskInfo>& info = future.Wait();  // Lives with `future`.
      double c2 = ThreadCpuMicros();
      if (!info.ok()) return info.status();
      if (info->id != id) return Status::Corruption("GetTask: wrong task");
      get_call.Add(c1 - c0);
      get_wait.Add(c2 - c0);
    }
    // The same call while the writer is busy: 8 callers at once. A
    // sequential caller always finds the writer asleep and pays for waking
    // its thread; a busy writer needs no wake-up.
    constexpr int kBusyCallers = 8;
    std::vector<Samples> per_caller(kBusyCallers);
    CallerRun run = RunCallers(
        kBusyCallers, plan.caller_warmup_s, plan.caller_window_s, [&](int i) {
          double c0 = ThreadCpuMicros();
          Ticket ticket = runtime->Enqueue(kType, payload);
          double c1 = ThreadCpuMicros();
          per_caller[static_cast<size_t>(i)].Add(c1 - c0);
          return AwaitStatus(ticket.stored, "enqueue", out);
        });
    if (!run.error.ok()) return run.error;
    for (const Samples& samples : per_caller) busy_call.Append(samples);
    if (!(s = instance.Close(out)).ok()) return s;
  }
  EmitPercentiles(out, "caller_thread", "sync,enqueue", &enqueue_call, false);
  EmitPercentiles(out, "caller_thread", "sync,enqueue+wait", &enqueue_wait,
                  false);
  EmitPercentiles(out, "caller_thread", "sync,enqueue,callers=8", &busy_call,
                  false);
  EmitPercentiles(out, "caller_thread", "sync,get_task", &get_call, false);
  EmitPercentiles(out, "caller_thread", "sync,get_task+wait", &get_wait, false);
  Emit(out, "caller_thread", "clock_gettime", "p50_us",
       clock_cost.Percentile(50), "us");
  return Status::OK();
}

// ---- retention: the drain and a read while retention prunes ----

// How a retention round is set up: its history's age and whether
// retention (retention.succeeded = 24h) runs.
struct RetentionMode {
  const char* name;
  int64_t history_age_us;
  bool retention;
};

// Point gets (GetTask) of random ids among `ids`, one after another on a
// thread of their own, until stopped; their latencies in µs.
class PointReader {
 public:
  PointReader(Runtime* runtime, std::vector<TaskId> ids)
      : ids_(std::move(ids)), thread_([this, runtime] {
          std::mt19937_64 rng(42);
          while (!stop_.load()) {
            TaskId id = ids_[rng() % ids_.size()];
            auto start = SteadyClock::now();
            Future<TaskInfo> info = runtime->GetTask(id);
            if (!info.WaitFor(kWaitTimeout) || !info.Wait().ok()) {
              failed_.store(true);
              return;
            }
            samples_.Add(MicrosBetween(start, SteadyClock::now()));
          }
        }) {}
  // Stops and joins; false when a read failed.
  bool Stop(Samples* samples) {
    stop_.store(true);
    thread_.join();
    *samples = samples_;
    return !failed_.load();
  }

 private:
  std::vector<TaskId> ids_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  Samples samples_;
  std::thread thread_;  // Last: starts once the rest is built.
};

// One round: a history of plan.history_done succeeded tasks, then
// `tasks` tasks stored; times Start until Drain resolves while a reader
// gets tasks, and counts what retention deleted meanwhile.
Status RetentionRound(const Plan& plan, const Options& base,
                      const RetentionMode& mode, int tasks, Reporter* out,
                      double* rate, Samples* reads, double* deleted) {
  Options options = base;
  options.retention_succeeded =
      mode.retention ? std::chrono::hours(24) : Duration(0);
  SpoolInstance instance(options, Durability::kSync, base.workers, "retention");
  Plan history = plan;
  history.history_pending = 0;
  Status s = WriteHistory(instance.path(), history, mode.history_age_us);
  if (!s.ok()) return s.WithContext("retention set-up");
  if (!(s = instance.Open(out)).ok()) return s;
  Runtime* runtime = instance.runtime();
  const std::string payload(plan.payload_bytes, 'p');
  std::vector<TaskId> ids;
  for (int done = 0; done < tasks; done += kPreloadBatch) {
    int n = std::min(kPreloadBatch, tasks - done);
    auto stored = Await(runtime
                            ->EnqueueBatch(std::vector<TaskSpec>(
                                n, TaskSpec{kType, payload, {}}))
                            .stored,
                        "preload batch", out);
    if (!stored.ok()) return stored.status();
    ids.insert(ids.end(), stored->begin(), stored->end());
  }
  PointReader reader(runtime, ids);
  auto start = SteadyClock::now();
  if (!(s = runtime->Start()).ok()) return s;
  s = AwaitStatus(runtime->Drain(), "drain", out);
  auto end = SteadyClock::now();
  if (!reader.Stop(reads)) return Status::Corruption("a GetTask failed");
  if (!s.ok()) return s;
  Result<StatusCounts> counts = Await(runtime->CountByStatus(), "count", out);
  if (!counts.ok()) return counts.status();
  *deleted = static_cast<double>(plan.history_done + tasks) -
             static_cast<double>(counts->of(TaskStatus::kSucceeded));
  *rate = tasks / (MicrosBetween(start, end) / 1e6);
  return instance.Close(out);
}

// The drain and point gets with retention off, with it on over a young
// history (each pass reads every succeeded task and deletes none), and
// with it on over a history two days old (it deletes the lot while the
// drain runs), in rotating order round by round. Emits each median and
// its ratio to off.
Status RetentionScenario(const Plan& plan, const Options& base, Reporter* out) {
  constexpr int64_t kTwoDays = int64_t{48} * 3600 * 1'000'000;
  const RetentionMode kModes[] = {
      {"off", kTwoDays, false}, {"scan", 0, true}, {"prune", kTwoDays, true}};
  const int tasks = std::max(plan.drain_tasks * 4, 8000);
  std::vector<double> rates[3], p50[3], p99[3], deleted[3];
  for (int round = 1; round <= plan.rounds; ++round) {
    for (int i = 0; i < 3; ++i) {
      int m = (round + i) % 3;
      Progress("spool retention %s: round %d/%d", kModes[m].name, round,
               plan.rounds);
      double rate = 0, gone = 0;
      Samples reads;
      Status s = RetentionRound(plan, base, kModes[m], tasks, out, &rate,
                                &reads, &gone);
      if (!s.ok()) return s;
      rates[m].push_back(rate);
      p50[m].push_back(reads.Percentile(50));
      p99[m].push_back(reads.Percentile(99));
      deleted[m].push_back(gone);
    }
  }
  for (int m = 0; m < 3; ++m) {
    std::string variant = std::string("retention=") + kModes[m].name +
                          ",history=" + std::to_string(plan.history_done) +
                          ",tasks=" + std::to_string(tasks);
    Emit(out, "retention", variant, "drain_tasks_per_s", Median(rates[m]),
         "tasks/s");
    Emit(out, "retention", variant, "get_p50_us", Median(p50[m]), "us");
    Emit(out, "retention", variant, "get_p99_us", Median(p99[m]), "us");
    Emit(out, "retention", variant, "deleted_by_drain_end", Median(deleted[m]),
         "tasks");
    if (m == 0) continue;
    auto ratio = [](std::vector<double>& a, std::vector<double>& b) {
      double off = Median(b);
      return off > 0 ? Median(a) / off : 0;
    };
    Emit(out, "retention", variant, "drain_over_off", ratio(rates[m], rates[0]),
         "x");
    Emit(out, "retention", variant, "get_p50_over_off", ratio(p50[m], p50[0]),
         "x");
    Emit(out, "retention", variant, "get_p99_over_off", ratio(p99[m], p99[0]),
         "x");
  }
  return Status::OK();
}

// An online backup under load (issue 28: "a backup of 1,000,000 tasks
// while 64 callers enqueue: the rate drops by under 20 %"). A store of
// `tasks` finished tasks (the quick plan: a tenth), 64 callers enqueueing
// all along; each round compares the enqueues completed in the second
// before a BackupTo with those completed while it ran, into a fresh
// directory (a full backup each time).
Status BackupScenario(const Plan& plan, const Options& base, Reporter* out) {
  Plan setup = plan;
  setup.history_done = plan.quick ? 100'000 : 1'000'000;
  setup.history_pending = 0;
  SpoolInstance instance(base, Durability::kSync, base.workers, "backup");
  Progress("spool backup: writing %s finished tasks",
           WithCommas(setup.history_done).c_str());
  Status s = WriteHistory(instance.path(), setup);
  if (!s.ok()) return s.WithContext("backup set-up");
  if (!(s = instance.Open(out)).ok()) return s;
  Runtime* runtime = instance.runtime();
  const std::string payload(plan.payload_bytes, 'p');
  constexpr int kCallers = 64;
  // Each caller's completion times; the callers run through every round.
  std::vector<std::vector<SteadyClock::time_point>> done(kCallers);
  std::atomic<bool> stop{false};
  std::atomic<bool> failed{false};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      while (!stop.load()) {
        Ticket ticket = runtime->Enqueue(kType, payload);
        if (!ticket.stored.WaitFor(std::chrono::seconds(30)) ||
            !ticket.stored.Wait().ok()) {
          failed = true;
          return;
        }
        done[c].push_back(SteadyClock::now());
      }
    });
  }
  auto completed = [&](SteadyClock::time_point from,
                       SteadyClock::time_point to) {
    size_t n = 0;
    for (const auto& times : done) {
      n += std::count_if(times.begin(), times.end(),
                         [&](auto t) { return t >= from && t < to; });
    }
    return static_cast<double>(n);
  };
  std::vector<double> before_rate, during_rate, backup_ms, bytes;
  for (int round = 1; round <= plan.rounds && s.ok(); ++round) {
    Progress("spool backup under 64 callers: round %d/%d", round, plan.rounds);
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    ScratchDir target("backup-target");
    auto started = SteadyClock::now();
    Result<BackupInfo> info =
        runtime->BackupTo(target.path() + "/backups").Wait();
    auto ended = SteadyClock::now();
    if (!info.ok()) {
      s = info.status().WithContext("BackupTo");
      break;
    }
    double seconds = MicrosBetween(started, ended) / 1e6;
    before_rate.push_back(
        completed(started - std::chrono::seconds(1), started));
    during_rate.push_back(completed(started, ended) / seconds);
    backup_ms.push_back(seconds * 1000);
    bytes.push_back(static_cast<double>(info->size_bytes));
  }
  stop = true;
  for (std::thread& t : callers) t.join();
  if (s.ok() && failed) s = Status::TimedOut("an enqueue took over 30 s");
  Status closed = instance.Close(out);
  if (!s.ok()) return s;
  if (!closed.ok()) return closed;
  const std::string variant =
      "sync,callers=64,tasks=" + std::to_string(setup.history_done);
  Emit(out, "backup", variant, "enqueue_before_ops_per_s", Median(before_rate),
       "ops/s");
  Emit(out, "backup", variant, "enqueue_during_ops_per_s", Median(during_rate),
       "ops/s");
  std::vector<double> ratios;
  for (size_t i = 0; i < during_rate.size(); ++i) {
    ratios.push_back(before_rate[i] > 0 ? during_rate[i] / before_rate[i] : 0);
  }
  Emit(out, "backup", variant, "during_over_before", Median(ratios), "x");
  Emit(out, "backup", variant, "backup_ms", Median(backup_ms), "ms");
  Emit(out, "backup", variant, "backup_bytes", Median(bytes), "bytes");
  return Status::OK();
}

// The read side (benchmarks/reads_bench.h): point gets, JSON listings,
// watch fan-out and a query's caller-thread CPU. Each sub-scenario's name
// leads the variant, e.g. "point_get,callers=8,...".
Status ReadsScenario(const Plan& plan, const Options& base, Reporter* out) {
  ScratchDir dir("reads");
  if (!dir.ok()) return Status::IOError("cannot create a scratch directory");
  ReadsBenchOptions options;
  options.dir = dir.path();
  options.rounds = plan.rounds;
  options.quick = plan.quick;
  options.durability = base.durability;
  options.readers = base.readers;
  return RunReadsBenchmarks(options, [&](const ReadsRow& row) {
    // The medians only, as elsewhere in the report; spool-reads-bench
    // prints each figure's spread.
    if (EndsWith(row.metric, "_min") || EndsWith(row.metric, "_max")) return;
    Emit(out, "reads", row.scenario + "," + row.variant, row.metric, row.value,
         row.unit);
  });
}

}  // namespace

Status RunSpoolScenario(const std::string& scenario, const Plan& plan,
                        const Options& base, Reporter* out) {
  if (scenario == "reads") return ReadsScenario(plan, base, out);
  if (scenario == "enqueue") return EnqueueScenario(plan, base, out);
  if (scenario == "drain") return DrainScenario(plan, base, out);
  if (scenario == "statistics") return StatisticsScenario(plan, base, out);
  if (scenario == "retention") return RetentionScenario(plan, base, out);
  if (scenario == "backup") return BackupScenario(plan, base, out);
  if (scenario == "recovery") return RecoveryScenario(plan, base, out);
  if (scenario == "long_history") return LongHistoryScenario(plan, base, out);
  if (scenario == "caller_thread") {
    return CallerThreadScenario(plan, base, out);
  }
  if (scenario == "codec") return RunCodecScenario(plan, out);
  return Status::InvalidArgument("unknown scenario " + scenario);
}

}  // namespace spool::bench
