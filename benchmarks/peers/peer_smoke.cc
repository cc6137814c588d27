// peer-smoke: runs each available peer for a few seconds, to check that the
// drivers work end to end and give rough numbers. Not a benchmark: one run,
// no warm-up, no repetitions (spool-bench does that).
//
//   peer-smoke [peer...]    default: every peer
//
// Per peer, each phase on a fresh instance in a temporary directory:
//   1. 2,000 sequential Enqueue calls from one client: latency p50/p99;
//   2. 64 concurrent callers (one client each) enqueue for ~2 s: ops/s;
//   3. Preload 5,000 tasks, then drain them with one client: tasks/s.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "benchmarks/peers/peer.h"

namespace spool::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kSequentialEnqueues = 2000;
constexpr int kConcurrentCallers = 64;
constexpr auto kConcurrentDuration = std::chrono::seconds(2);
constexpr int kDrainTasks = 5000;
const std::string kType = "noop";
const std::string kPayload(100, 'p');

double Micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}
double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// The p-th percentile (0 < p <= 1; 1 is the maximum) of `samples`, in
// microseconds. Sorts.
double Percentile(std::vector<Clock::duration>* samples, double p) {
  if (samples->empty()) return 0;
  std::sort(samples->begin(), samples->end());
  size_t index =
      static_cast<size_t>(p * static_cast<double>(samples->size() - 1) + 0.5);
  return Micros((*samples)[index]);
}

// A fresh directory, removed with its contents on destruction.
class ScratchDir {
 public:
  ScratchDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base != nullptr ? base : "/tmp") + "/peer-smoke-XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A peer set up in its own scratch directory, torn down on destruction.
class Instance {
 public:
  explicit Instance(std::string_view name) : peer_(MakePeer(name)) {}
  ~Instance() {
    if (peer_ != nullptr) peer_->Teardown();
  }

  Status Setup() {
    if (!dir_.ok()) return Status::IOError("mkdtemp failed");
    return peer_->Setup(dir_.path());
  }
  Peer* peer() { return peer_.get(); }

 private:
  ScratchDir dir_;  // Outlives the peer: declared first.
  std::unique_ptr<Peer> peer_;
};

Status Sequential(Peer* peer) {
  Result<std::unique_ptr<PeerClient>> client = peer->Connect();
  if (!client.ok()) return client.status();
  std::vector<Clock::duration> latencies;
  latencies.reserve(kSequentialEnqueues);
  const auto start = Clock::now();
  for (int i = 0; i < kSequentialEnqueues; ++i) {
    const auto before = Clock::now();
    Status s = (*client)->Enqueue(kType, kPayload);
    if (!s.ok()) return s;
    latencies.push_back(Clock::now() - before);
  }
  const double elapsed = Seconds(Clock::now() - start);
  std::printf(
      "  sequential: %d enqueues, p50 %.0f us, p99 %.0f us, max %.0f us "
      "(%.0f ops/s)\n",
      kSequentialEnqueues, Percentile(&latencies, 0.50),
      Percentile(&latencies, 0.99), Percentile(&latencies, 1.0),
      kSequentialEnqueues / elapsed);
  return Status::OK();
}

Status Concurrent(Peer* peer) {
  std::vector<std::unique_ptr<PeerClient>> clients;
  for (int i = 0; i < kConcurrentCallers; ++i) {
    Result<std::unique_ptr<PeerClient>> client = peer->Connect();
    if (!client.ok()) return client.status();
    clients.push_back(std::move(client).value());
  }
  std::atomic<bool> go{false};
  std::vector<std::vector<Clock::duration>> latencies(kConcurrentCallers);
  std::vector<Status> errors(kConcurrentCallers);
  std::vector<std::thread> threads;
  Clock::time_point deadline;
  for (int t = 0; t < kConcurrentCallers; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      while (Clock::now() < deadline) {
        const auto before = Clock::now();
        Status s = clients[t]->Enqueue(kType, kPayload);
        if (!s.ok()) {
          errors[t] = s;
          return;
        }
        latencies[t].push_back(Clock::now() - before);
      }
    });
  }
  const auto start = Clock::now();
  deadline = start + kConcurrentDuration;
  go.store(true, std::memory_order_release);
  for (std::thread& t : threads) t.join();
  const double elapsed = Seconds(Clock::now() - start);
  for (const Status& s : errors) {
    if (!s.ok()) return s;
  }
  std::vector<Clock::duration> all;
  for (const auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::printf(
      "  concurrent: %d callers, %zu enqueues in %.2f s: %.0f ops/s "
      "(p50 %.0f us, p99 %.0f us, max %.0f us)\n",
      kConcurrentCallers, all.size(), elapsed, all.size() / elapsed,
      Percentile(&all, 0.50), Percentile(&all, 0.99), Percentile(&all, 1.0));
  return Status::OK();
}

Status Drain(Peer* peer) {
  Result<std::unique_ptr<PeerClient>> client = peer->Connect();
  if (!client.ok()) return client.status();
  Status probe = (*client)->ClaimAndComplete();
  if (probe.IsNotSupported()) {
    std::printf("  drain: n/a (%s)\n", probe.message().c_str());
    return Status::OK();
  }
  if (!probe.IsNotFound()) {
    return probe.ok() ? Status::Corruption("a fresh queue had a task") : probe;
  }
  auto start = Clock::now();
  Status s = (*client)->Preload(kDrainTasks, kType, kPayload);
  if (!s.ok()) return s;
  const double preload_s = Seconds(Clock::now() - start);

  start = Clock::now();
  int drained = 0;
  while ((s = (*client)->ClaimAndComplete()).ok()) ++drained;
  const double drain_s = Seconds(Clock::now() - start);
  if (!s.IsNotFound()) return s;
  std::printf(
      "  drain: preloaded %d in %.2f s; 1 client drained %d in %.2f s: "
      "%.0f tasks/s%s\n",
      kDrainTasks, preload_s, drained, drain_s, drained / drain_s,
      drained == kDrainTasks ? "" : "  (MISMATCH)");
  return drained == kDrainTasks
             ? Status::OK()
             : Status::Corruption("drained " + std::to_string(drained) +
                                  " of " + std::to_string(kDrainTasks));
}

// Runs the three phases; returns false if the peer failed (not skipped).
bool RunPeer(std::string_view name) {
  std::printf("== %.*s\n", static_cast<int>(name.size()), name.data());
  using Phase = Status (*)(Peer*);
  for (Phase phase : {Phase{Sequential}, Phase{Concurrent}, Phase{Drain}}) {
    Instance instance(name);
    Status s = instance.Setup();
    if (s.IsNotSupported()) {
      std::printf("  skipped: %s\n", s.message().c_str());
      return true;
    }
    if (!s.ok()) {
      std::printf("  setup FAILED: %s\n", s.ToString().c_str());
      return false;
    }
    if (phase == Phase{Sequential}) {
      std::printf("  %s\n", instance.peer()->Describe().c_str());
    }
    s = phase(instance.peer());
    if (!s.ok()) {
      std::printf("  FAILED: %s\n", s.ToString().c_str());
      return false;
    }
    std::fflush(stdout);
  }
  return true;
}

int Main(int argc, char** argv) {
  std::vector<std::string> names;
  for (int i = 1; i < argc; ++i) names.emplace_back(argv[i]);
  if (names.empty()) {
    for (const auto& peer : MakeAllPeers()) names.push_back(peer->name());
  }
  bool ok = true;
  for (const std::string& name : names) {
    if (MakePeer(name) == nullptr) {
      std::fprintf(stderr, "peer-smoke: unknown peer \"%s\"\n", name.c_str());
      return 2;
    }
    ok = RunPeer(name) && ok;
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace spool::bench

int main(int argc, char** argv) { return spool::bench::Main(argc, argv); }
