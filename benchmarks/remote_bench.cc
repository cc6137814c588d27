// spool-remote-bench: remote workers' figures (docs/benchmarks.md, "Remote
// workers"): drain throughput with 1, 2 and 4 spool-worker processes
// running `sleep 5 ms` at concurrency 16; no-op tasks through 2 remote
// workers beside the in-process drain; lease expiry to re-dispatch; the
// no-op drain through 2 workers over TLS beside plain BASP.
//
//   spool-remote-bench [--dir DIR] [--rounds N] [--scenario
//   sleep|noop|lease|tls]...
//
// Real processes on loopback, a real store (durability relaxed, as the
// drain figures of spool-bench use). Each scenario runs N rounds (default
// 3), the sizes it compares interleaved round by round; a row per round,
// then a median row with the ratios. The figures go to stdout.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <string>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <spool/runtime.h>

#include "benchmarks/bench_util.h"

extern char** environ;

namespace {

using spool::bench::Median;

using Clock = std::chrono::steady_clock;
constexpr char kSecret[] = "bench-secret-0123456789abcdef";

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// A spool-worker child; killed at destruction.
class Child {
 public:
  explicit Child(const std::vector<std::string>& args) {
    std::vector<char*> argv;
    for (const std::string& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ) !=
        0)
      pid_ = -1;
  }
  ~Child() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  void Signal(int s) {
    if (pid_ > 0) ::kill(pid_, s);
  }

 private:
  pid_t pid_ = -1;
};

struct Bench {
  std::string dir;
  int port = 0;
  // The gateway and its workers use TLS, with the PKI in dir/certs
  // (tests/security/make_test_certs.sh).
  bool tls = false;
  std::unique_ptr<spool::Runtime> runtime;
  std::vector<std::unique_ptr<Child>> workers;

  spool::Status Open(const std::string& name, int local_workers,
                     std::chrono::milliseconds lease) {
    std::filesystem::remove_all(dir + "/" + name);
    port = FreePort();
    std::string secret = dir + "/secret";
    std::ofstream(secret) << kSecret << "\n";
    ::chmod(secret.c_str(), 0600);
    spool::Options options;
    options.path = dir + "/" + name;
    options.durability = spool::Durability::kRelaxed;
    options.workers = local_workers;
    options.log_level = spool::LogLevel::kError;
    if (local_workers == 0) {
      options.remote_listen = "127.0.0.1:" + std::to_string(port);
      options.remote_secret_file = secret;
      options.remote_lease = lease;
      options.remote_heartbeat = lease / 5;
      if (tls) {
        options.remote_tls_certificate_file = dir + "/certs/server.pem";
        options.remote_tls_key_file = dir + "/certs/server.key";
        options.remote_tls_ca_file = dir + "/certs/ca.pem";
      }
    }
    spool::Status s = spool::Runtime::Open(options, &runtime);
    if (!s.ok()) return s;
    for (const char* type : {"noop", "sleep"}) {
      s = runtime->RegisterHandler(type, [](spool::TaskContext& task) {
        if (task.type() == "sleep") {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        return spool::Status::OK();
      });
      if (!s.ok()) return s;
    }
    return runtime->Start();
  }

  void Spawn(int n, int concurrency, const std::string& log_prefix = "") {
    for (int i = 0; i < n; ++i) {
      std::vector<std::string> args = {SPOOL_WORKER_BINARY,
                                       "--connect",
                                       "127.0.0.1:" + std::to_string(port),
                                       "--secret-file",
                                       dir + "/secret",
                                       "--types",
                                       "noop,sleep",
                                       "--concurrency",
                                       std::to_string(concurrency),
                                       "--node",
                                       "bench-" + std::to_string(i)};
      if (!log_prefix.empty()) {
        args.push_back("--log");
        args.push_back(log_prefix + std::to_string(i) + ".log");
      }
      if (tls) {
        const std::string certs = dir + "/certs/";
        args.insert(args.end(),
                    {"--tls-certificate", certs + "client.pem", "--tls-key",
                     certs + "client.key", "--tls-ca", certs + "ca.pem"});
      }
      workers.push_back(std::make_unique<Child>(args));
    }
    // Let them connect.
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
  }

  // Enqueues `n` tasks, drains, and returns tasks per second (enqueue
  // included, as the queue fills while the workers drain it).
  double Drain(const std::string& type, const std::string& payload, int n) {
    auto start = Clock::now();
    std::vector<spool::TaskSpec> batch;
    for (int i = 0; i < n; ++i) {
      spool::TaskSpec spec;
      spec.type = type;
      spec.payload = payload;
      batch.push_back(std::move(spec));
      if (batch.size() == 1000 || i + 1 == n) {
        static_cast<void>(
            runtime->EnqueueBatch(std::move(batch)).stored.Wait());
        batch.clear();
      }
    }
    spool::DrainOptions drain;
    drain.timeout = std::chrono::seconds(300);
    spool::Status s = runtime->Drain(drain).Wait().status();
    double seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    if (!s.ok()) std::cerr << "drain: " << s.ToString() << "\n";
    return n / seconds;
  }

  void Close() {
    if (runtime) static_cast<void>(runtime->Close().Wait());
    runtime.reset();
    workers.clear();
  }
};

size_t Lines(const std::string& path) {
  std::ifstream in(path);
  size_t n = 0;
  std::string line;
  while (std::getline(in, line)) ++n;
  return n;
}

std::string Rounds(const std::vector<double>& v) {
  std::string out;
  for (double x : v) {
    if (!out.empty()) out += ' ';
    out += std::to_string(static_cast<long long>(x + 0.5));
  }
  return out;
}

struct Args {
  std::string dir =
      std::filesystem::temp_directory_path().string() + "/spool-remote-bench";
  int rounds = 3;
  std::vector<std::string> scenarios;
  bool Wants(const std::string& name) const {
    return scenarios.empty() || std::find(scenarios.begin(), scenarios.end(),
                                          name) != scenarios.end();
  }
};

bool ParseArgs(int argc, char** argv, Args* args) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (i + 1 >= argc) return false;
    std::string value = argv[++i];
    if (arg == "--dir") {
      args->dir = value;
    } else if (arg == "--rounds") {
      args->rounds = std::atoi(value.c_str());
      if (args->rounds < 1 || args->rounds > 100) return false;
    } else if (arg == "--scenario" && (value == "sleep" || value == "noop" ||
                                       value == "lease" || value == "tls")) {
      args->scenarios.push_back(value);
    } else {
      return false;
    }
  }
  return true;
}

// Throughput with 1, 2 and 4 processes, the rounds interleaved so that a
// slow minute of the machine lands on every size alike; ratios of medians.
bool SleepScenario(Bench& bench, int rounds) {
  const std::vector<int> sizes = {1, 2, 4};
  std::vector<std::vector<double>> rates(sizes.size());
  for (int round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      int n = sizes[i];
      if (!bench.Open("sleep" + std::to_string(n), 0, std::chrono::seconds(10))
               .ok())
        return false;
      bench.Spawn(n, 16);
      int tasks = 4000 * n;
      rates[i].push_back(bench.Drain("sleep", "5", tasks));
      bench.Close();
      std::cout << "sleep_5ms_c16,round=" << round + 1 << "," << n << ","
                << tasks << "," << rates[i].back() << "\n";
    }
  }
  double one = Median(rates[0]);
  for (size_t i = 0; i < sizes.size(); ++i) {
    double median = Median(rates[i]);
    std::cout << "sleep_5ms_c16,median," << sizes[i] << "," << 4000 * sizes[i]
              << "," << median << ",ratio=" << median / one
              << ",rounds=" << Rounds(rates[i]) << "\n";
  }
  return true;
}

// No-op tasks through 2 remote processes beside 4 in-process workers, the
// rounds alternated.
bool NoopScenario(Bench& bench, int rounds) {
  constexpr int kTasks = 50000;
  std::vector<double> remote, local;
  for (int round = 0; round < rounds; ++round) {
    if (!bench.Open("noop_remote", 0, std::chrono::seconds(10)).ok())
      return false;
    bench.Spawn(2, 16);
    remote.push_back(bench.Drain("noop", "", kTasks));
    bench.Close();
    if (!bench.Open("noop_local", 4, std::chrono::seconds(10)).ok())
      return false;
    local.push_back(bench.Drain("noop", "", kTasks));
    bench.Close();
    std::cout << "noop_remote,round=" << round + 1 << ",2," << kTasks << ","
              << remote.back() << "\n"
              << "noop_in_process,round=" << round + 1 << ",4 local," << kTasks
              << "," << local.back() << "\n";
  }
  double median = Median(remote);
  std::cout << "noop_remote,median,2," << kTasks << "," << median
            << ",of_goal=" << median / 30000
            << ",of_in_process=" << median / Median(local)
            << ",rounds=" << Rounds(remote) << "\n"
            << "noop_in_process,median,4 local," << kTasks << ","
            << Median(local) << ",rounds=" << Rounds(local) << "\n";
  return true;
}

// No-op tasks through 2 remote processes over plain BASP and over TLS, the
// rounds alternated; the ratio of medians.
bool TlsScenario(Bench& bench, int rounds) {
  const std::string make_certs =
      std::string("bash ") + SPOOL_MAKE_TEST_CERTS + " " + bench.dir + "/certs";
  if (std::system(make_certs.c_str()) != 0) return false;
  constexpr int kTasks = 50000;
  std::vector<double> plain, tls;
  for (int round = 0; round < rounds; ++round) {
    for (bool use_tls : {false, true}) {
      bench.tls = use_tls;
      if (!bench.Open("noop_tls", 0, std::chrono::seconds(10)).ok())
        return false;
      bench.Spawn(2, 16);
      (use_tls ? tls : plain).push_back(bench.Drain("noop", "", kTasks));
      bench.Close();
      std::cout << (use_tls ? "noop_remote_tls" : "noop_remote_plain")
                << ",round=" << round + 1 << ",2," << kTasks << ","
                << (use_tls ? tls : plain).back() << "\n";
    }
  }
  bench.tls = false;
  std::cout << "noop_remote_plain,median,2," << kTasks << "," << Median(plain)
            << ",rounds=" << Rounds(plain) << "\n"
            << "noop_remote_tls,median,2," << kTasks << "," << Median(tls)
            << ",of_plain=" << Median(tls) / Median(plain)
            << ",rounds=" << Rounds(tls) << "\n";
  return true;
}

// Lease expiry to re-dispatch: a worker stalls (SIGSTOP) right after its
// handler starts; the milliseconds until another worker starts the task
// again, or a negative number when the bench could not run.
double LeaseRound(Bench& bench, std::chrono::milliseconds lease) {
  if (!bench.Open("lease", 0, lease).ok()) return -1;
  std::string prefix = bench.dir + "/lease-";
  for (int i = 0; i < 2; ++i)
    std::filesystem::remove(prefix + std::to_string(i) + ".log");
  bench.Spawn(1, 1, prefix);
  spool::TaskSpec spec;
  spec.type = "sleep";
  spec.payload = "3000";
  // The retry delay is the task's policy, not the lease's: zero here, so
  // that the figure is the lease's own latency.
  spool::RetryPolicy retry;
  retry.initial_delay = std::chrono::milliseconds(0);
  spec.options.retry = retry;
  static_cast<void>(bench.runtime->Enqueue(spec).stored.Wait());
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Lines(prefix + "0.log") == 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  bench.workers[0]->Signal(SIGSTOP);
  auto stalled = Clock::now();
  std::vector<std::string> args = {SPOOL_WORKER_BINARY,
                                   "--connect",
                                   "127.0.0.1:" + std::to_string(bench.port),
                                   "--secret-file",
                                   bench.dir + "/secret",
                                   "--types",
                                   "sleep",
                                   "--concurrency",
                                   "1",
                                   "--node",
                                   "second",
                                   "--log",
                                   prefix + "1.log"};
  bench.workers.push_back(std::make_unique<Child>(args));
  deadline = Clock::now() + std::chrono::seconds(20);
  while (Lines(prefix + "1.log") == 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  double ms =
      std::chrono::duration<double, std::milli>(Clock::now() - stalled).count();
  bench.workers[0]->Signal(SIGCONT);
  bench.Close();
  return ms;
}

bool LeaseScenario(Bench& bench, int rounds) {
  const auto lease = std::chrono::milliseconds(1000);
  std::vector<double> ms;
  for (int round = 0; round < rounds; ++round) {
    ms.push_back(LeaseRound(bench, lease));
    if (ms.back() < 0) return false;
    std::cout << "lease_expiry_to_redispatch_ms,round=" << round + 1
              << ",lease=" << lease.count() << "," << ms.back() << "\n";
  }
  double median = Median(ms);
  std::cout << "lease_expiry_to_redispatch_ms,median,lease=" << lease.count()
            << "," << median << ",over_lease_ms=" << median - lease.count()
            << ",max=" << *std::max_element(ms.begin(), ms.end()) << "\n";
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!ParseArgs(argc, argv, &args)) {
    std::cerr << "usage: " << argv[0]
              << " [--dir DIR] [--rounds N] [--scenario "
                 "sleep|noop|lease|tls]...\n";
    return 2;
  }
  Bench bench;
  bench.dir = args.dir;
  std::filesystem::create_directories(bench.dir);
  std::cout << "scenario,round,workers,tasks,per_second\n";
  bool ok = true;
  if (ok && args.Wants("sleep")) ok = SleepScenario(bench, args.rounds);
  if (ok && args.Wants("noop")) ok = NoopScenario(bench, args.rounds);
  if (ok && args.Wants("lease")) ok = LeaseScenario(bench, args.rounds);
  if (ok && args.Wants("tls")) ok = TlsScenario(bench, args.rounds);
  return ok ? 0 : 1;
}
