// spool-remote-bench: remote workers' figures (docs/benchmarks.md, "Remote
// workers"): drain throughput with 1, 2 and 4 spool-worker processes
// running `sleep 5 ms` at concurrency 16; no-op tasks through 2 remote
// workers beside the in-process drain; lease expiry to re-dispatch.
//
//   spool-remote-bench [--dir DIR]
//
// Real processes on loopback, a real store (durability relaxed, as the
// drain figures of spool-bench use). One run; the figures go to stdout.

#include <chrono>
#include <cstdio>
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

extern char** environ;

namespace {

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

}  // namespace

int main(int argc, char** argv) {
  Bench bench;
  bench.dir = argc > 2 && std::string(argv[1]) == "--dir"
                  ? argv[2]
                  : std::filesystem::temp_directory_path().string() +
                        "/spool-remote-bench";
  std::filesystem::create_directories(bench.dir);
  std::cout << "scenario,workers,tasks,per_second\n";
  double one = 0;
  for (int n : {1, 2, 4}) {
    if (!bench.Open("sleep" + std::to_string(n), 0, std::chrono::seconds(10))
             .ok())
      return 1;
    bench.Spawn(n, 16);
    int tasks = 4000 * n;
    double rate = bench.Drain("sleep", "5", tasks);
    if (n == 1) one = rate;
    std::cout << "sleep_5ms_c16," << n << "," << tasks << "," << rate
              << (n > 1 ? ",ratio=" + std::to_string(rate / one) : "") << "\n";
    bench.Close();
  }
  if (!bench.Open("noop_remote", 0, std::chrono::seconds(10)).ok()) return 1;
  bench.Spawn(2, 16);
  std::cout << "noop_remote,2," << 50000 << ","
            << bench.Drain("noop", "", 50000) << "\n";
  bench.Close();
  if (!bench.Open("noop_local", 4, std::chrono::seconds(10)).ok()) return 1;
  std::cout << "noop_in_process,4 local," << 50000 << ","
            << bench.Drain("noop", "", 50000) << "\n";
  bench.Close();

  // Lease expiry to re-dispatch: a worker stalls (SIGSTOP) right after its
  // handler starts; the time until another worker starts the task again.
  const auto lease = std::chrono::milliseconds(1000);
  if (!bench.Open("lease", 0, lease).ok()) return 1;
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
  std::cout << "lease_expiry_to_redispatch_ms,lease=" << lease.count() << ",1,"
            << ms << ",over_lease_ms=" << ms - lease.count() << "\n";
  bench.workers[0]->Signal(SIGCONT);
  bench.Close();
  return 0;
}
