// The peers' side of the scenarios that apply to them: enqueue (and its
// caller-thread CPU time) and drain, through the Peer interface of
// benchmarks/peers/peer.h. The work per call is the same as spool's: an
// enqueue is one durable task insert, acknowledged once durable; a drained
// task is a durable claim plus a durable completion.

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "benchmarks/peers/peer.h"
#include "benchmarks/scenarios.h"

namespace spool::bench {
namespace {

constexpr char kType[] = "noop";

// A peer set up in its own scratch directory, torn down on destruction.
class PeerInstance {
 public:
  explicit PeerInstance(const std::string& name)
      : dir_(name), peer_(MakePeer(name)) {}
  ~PeerInstance() {
    if (peer_ != nullptr) peer_->Teardown();
  }
  PeerInstance(const PeerInstance&) = delete;
  PeerInstance& operator=(const PeerInstance&) = delete;

  Status Setup() {
    if (peer_ == nullptr) return Status::InvalidArgument("unknown peer");
    if (!dir_.ok()) return Status::IOError("mkdtemp failed");
    return peer_->Setup(dir_.path());
  }
  Peer* peer() { return peer_.get(); }

 private:
  ScratchDir dir_;  // Declared first: outlives the peer.
  std::unique_ptr<Peer> peer_;
};

class PeerRun {
 public:
  PeerRun(std::string name, const Plan& plan, Reporter* out)
      : name_(std::move(name)),
        plan_(plan),
        out_(out),
        payload_(plan.payload_bytes, 'p') {}

  // Sets up a fresh instance. NotSupported (noted once) when the peer cannot
  // run here.
  Status Setup(PeerInstance* instance) {
    Status s = instance->Setup();
    if (s.IsNotSupported()) {
      out_->Note(name_ + " skipped: " + s.message());
      Progress("%s skipped: %s", name_.c_str(), s.message().c_str());
      return s;
    }
    if (!s.ok()) return s;
    if (!described_) {
      out_->Info("describe", instance->peer()->Describe());
      described_ = true;
    }
    return s;
  }

  Status Enqueue(bool with_latency_rows, bool with_cpu) {
    const bool limit = IsLimitPeer(name_);
    Samples sequential, cpu;
    std::vector<double> sequential_rate;
    std::map<int, std::vector<double>> rate;
    std::map<int, Samples> latency;
    for (int round = 1; round <= plan_.rounds; ++round) {
      Progress("%s %s: round %d/%d", name_.c_str(),
               with_latency_rows ? "enqueue" : "caller_thread", round,
               plan_.rounds);
      PeerInstance instance(name_);
      Status s = Setup(&instance);
      if (!s.ok()) return s;
      {
        Result<std::unique_ptr<PeerClient>> client = instance.peer()->Connect();
        if (!client.ok()) return client.status();
        PeerClient* c = client->get();
        for (int i = 0; i < plan_.warmup_calls; ++i) {
          if (!(s = c->Enqueue(kType, payload_)).ok()) return s;
        }
        const int calls =
            with_latency_rows ? plan_.sequential_enqueues : plan_.cpu_calls;
        auto start = SteadyClock::now();
        for (int i = 0; i < calls; ++i) {
          double c0 = ThreadCpuMicros();
          auto before = SteadyClock::now();
          s = c->Enqueue(kType, payload_);
          auto after = SteadyClock::now();
          double c1 = ThreadCpuMicros();
          if (!s.ok()) return s;
          sequential.Add(MicrosBetween(before, after));
          cpu.Add(c1 - c0);
        }
        sequential_rate.push_back(
            calls / (MicrosBetween(start, SteadyClock::now()) / 1e6));
      }
      if (with_latency_rows) {
        for (int callers : plan_.callers) {
          // Connections are made before the clock starts.
          std::vector<std::unique_ptr<PeerClient>> clients;
          for (int i = 0; i < callers; ++i) {
            Result<std::unique_ptr<PeerClient>> client =
                instance.peer()->Connect();
            if (!client.ok()) return client.status();
            clients.push_back(std::move(client).value());
          }
          CallerRun run =
              RunCallers(callers, plan_.caller_warmup_s, plan_.caller_window_s,
                         [&](int i) {
                           return clients[static_cast<size_t>(i)]->Enqueue(
                               kType, payload_);
                         });
          if (!run.error.ok()) return run.error;
          rate[callers].push_back(run.ops_per_s);
          latency[callers].Append(run.latencies_us);
        }
      }
    }
    const std::string scenario = limit ? "limit" : "enqueue";
    if (with_latency_rows) {
      Emit(scenario, "enqueue", "sync,callers=1", "p50_us",
           sequential.Percentile(50), "us");
      Emit(scenario, "enqueue", "sync,callers=1", "p95_us",
           sequential.Percentile(95), "us");
      Emit(scenario, "enqueue", "sync,callers=1", "p99_us",
           sequential.Percentile(99), "us");
      Emit(scenario, "enqueue", "sync,callers=1", "max_us", sequential.Max(),
           "us");
      Emit(scenario, "enqueue", "sync,sequential", "ops_per_s",
           Median(sequential_rate), "ops/s");
      for (int callers : plan_.callers) {
        const std::string variant = "sync,callers=" + std::to_string(callers);
        Emit(scenario, "enqueue", variant, "ops_per_s", Median(rate[callers]),
             "ops/s");
        if (callers > 1) {
          Emit(scenario, "enqueue", variant, "p50_us",
               latency[callers].Percentile(50), "us");
          Emit(scenario, "enqueue", variant, "p99_us",
               latency[callers].Percentile(99), "us");
        }
      }
    }
    if (with_cpu) {
      // A peer's enqueue blocks until durable: call and wait are one.
      const std::string cpu_scenario = limit ? "limit" : "caller_thread";
      Emit(cpu_scenario, "caller_thread", "sync,enqueue+wait", "p50_us",
           cpu.Percentile(50), "us");
      Emit(cpu_scenario, "caller_thread", "sync,enqueue+wait", "p99_us",
           cpu.Percentile(99), "us");
    }
    return Status::OK();
  }

  // One round of drain: preload, then `concurrency` clients claim and
  // complete until the queue is empty.
  Status DrainRound(int concurrency, double* tasks_per_s) {
    PeerInstance instance(name_);
    Status s = Setup(&instance);
    if (!s.ok()) return s;
    std::vector<std::unique_ptr<PeerClient>> clients;
    for (int i = 0; i < concurrency; ++i) {
      Result<std::unique_ptr<PeerClient>> client = instance.peer()->Connect();
      if (!client.ok()) return client.status();
      clients.push_back(std::move(client).value());
    }
    s = clients[0]->Preload(static_cast<size_t>(plan_.drain_tasks), kType,
                            payload_);
    if (!s.ok()) return s;

    std::atomic<bool> go{false};
    std::atomic<int64_t> drained{0};
    std::vector<Status> errors(static_cast<size_t>(concurrency));
    std::vector<std::thread> threads;
    for (int i = 0; i < concurrency; ++i) {
      threads.emplace_back([&, i] {
        PeerClient* c = clients[static_cast<size_t>(i)].get();
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        Status r;
        while ((r = c->ClaimAndComplete()).ok()) {
          drained.fetch_add(1, std::memory_order_relaxed);
        }
        if (!r.IsNotFound()) errors[static_cast<size_t>(i)] = r;
      });
    }
    auto start = SteadyClock::now();
    go.store(true, std::memory_order_release);
    for (std::thread& t : threads) t.join();
    auto end = SteadyClock::now();
    for (const Status& e : errors) {
      if (!e.ok()) return e;
    }
    if (drained.load() != plan_.drain_tasks) {
      return Status::Corruption(name_ + " drain: drained " +
                                std::to_string(drained.load()) + " of " +
                                std::to_string(plan_.drain_tasks));
    }
    *tasks_per_s = plan_.drain_tasks / (MicrosBetween(start, end) / 1e6);
    return Status::OK();
  }

  Status Drain(int concurrency_n) {
    std::vector<int> concurrencies = {1};
    if (concurrency_n > 1) concurrencies.push_back(concurrency_n);
    for (int concurrency : concurrencies) {
      std::vector<double> rates;
      for (int round = 1; round <= plan_.rounds; ++round) {
        Progress("%s drain %s tasks, concurrency %d: round %d/%d",
                 name_.c_str(), WithCommas(plan_.drain_tasks).c_str(),
                 concurrency, round, plan_.rounds);
        double rate = 0;
        Status s = DrainRound(concurrency, &rate);
        if (!s.ok()) return s;
        rates.push_back(rate);
      }
      Emit("drain", "drain", "sync,concurrency=" + std::to_string(concurrency),
           "tasks_per_s", Median(rates), "tasks/s");
    }
    return Status::OK();
  }

 private:
  void Emit(const std::string& scenario, const std::string& group,
            const std::string& variant, const std::string& metric, double value,
            const std::string& unit) {
    Row row;
    row.scenario = scenario;
    row.system = name_;
    row.variant = variant;
    row.metric = metric;
    row.value = value;
    row.unit = unit;
    row.group = group;
    out_->AddRow(row);
  }

  std::string name_;
  const Plan& plan_;
  Reporter* out_;
  std::string payload_;
  bool described_ = false;
};

}  // namespace

Status RunPeerScenario(const std::string& peer, const std::string& scenario,
                       const Plan& plan, int concurrency, bool with_cpu,
                       Reporter* out) {
  PeerRun run(peer, plan, out);
  if (scenario == "enqueue") return run.Enqueue(true, with_cpu);
  if (scenario == "caller_thread") return run.Enqueue(false, true);
  if (scenario == "drain") {
    if (IsLimitPeer(peer)) {
      return Status::InvalidArgument(peer + " is a limit: it cannot drain");
    }
    return run.Drain(concurrency);
  }
  return Status::InvalidArgument("scenario " + scenario +
                                 " does not apply to peers");
}

}  // namespace spool::bench
