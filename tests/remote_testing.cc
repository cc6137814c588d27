#include "tests/remote_testing.h"

#include <arpa/inet.h>
#include <fstream>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>

#include "tests/runtime_testing.h"

namespace spool::testing {

int FreePort(const std::string& host) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  EXPECT_EQ(::inet_pton(AF_INET, host.c_str(), &addr.sin_addr), 1) << host;
  addr.sin_port = 0;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0)
      << host;
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string WriteSecret(const TempDir& dir, const std::string& name,
                        const std::string& secret) {
  std::string path = dir.Sub(name);
  std::ofstream(path) << secret << "\n";
  ::chmod(path.c_str(), 0600);
  return path;
}

std::vector<std::pair<TaskId, uint32_t>> StartsIn(const std::string& path) {
  std::vector<std::pair<TaskId, uint32_t>> starts;
  std::ifstream in(path);
  TaskId id = 0;
  uint32_t attempt = 0;
  while (in >> id >> attempt) starts.emplace_back(id, attempt);
  return starts;
}

void RemoteTest::Open(std::chrono::milliseconds lease,
                      const std::function<void(Runtime&)>& before_start,
                      const std::string& host) {
  host_ = host;
  port_ = FreePort(host_);
  Options options;
  options.path = dir_.Sub("queue");
  options.durability = Durability::kRelaxed;
  options.workers = 0;  // every task runs remotely
  options.remote_listen = host_ + ":" + std::to_string(port_);
  options.remote_secret_file = WriteSecret(dir_, "secret", kRemoteSecret);
  // The network-namespace tests listen on a private address of their own
  // veth pair, which only this machine's namespaces reach.
  options.remote_allow_insecure = host_ != "127.0.0.1";
  options.remote_lease = lease;
  options.remote_heartbeat = lease / 5;
  options.remote_claim_ahead = 4;
  options.log_level = LogLevel::kInfo;
  options.log_sink = [this](LogLevel, std::string_view line) {
    std::lock_guard<std::mutex> lock(log_mutex_);
    log_.emplace_back(line);
  };
  runtime_ = OpenOrDie(options);
  ASSERT_NE(runtime_, nullptr);
  // The queue node declares the types (Enqueue takes only registered
  // ones) but, with no local worker, never runs these handlers.
  for (const char* type : {"noop", "sleep", "http.post"}) {
    ASSERT_TRUE(runtime_
                    ->RegisterHandler(type,
                                      [](TaskContext&) {
                                        return Status::Aborted(
                                            "ran on the queue node");
                                      })
                    .ok());
  }
  if (before_start) before_start(*runtime_);
  ASSERT_TRUE(runtime_->Start().ok());
}

std::unique_ptr<ChildProcess> RemoteTest::Worker(
    const std::string& name, const std::string& types, int concurrency,
    const std::string& secret_file, std::vector<std::string> more,
    const std::vector<std::string>& launcher) {
  std::vector<std::string> argv = launcher;
  std::vector<std::string> own = {
      SPOOL_WORKER_BINARY,
      "--connect",
      host_ + ":" + std::to_string(port_),
      "--secret-file",
      secret_file.empty() ? dir_.Sub("secret") : secret_file,
      "--types",
      types,
      "--concurrency",
      std::to_string(concurrency),
      "--node",
      name,
      "--log",
      dir_.Sub(name + ".log")};
  argv.insert(argv.end(), own.begin(), own.end());
  argv.insert(argv.end(), more.begin(), more.end());
  return std::make_unique<ChildProcess>(argv);
}

void RemoteTest::ExpectConnected(ChildProcess& worker) {
  auto line = worker.ReadLine(std::chrono::seconds(15));
  ASSERT_TRUE(line.has_value());
  EXPECT_THAT(*line, ::testing::HasSubstr("connected"));
}

std::vector<TaskId> RemoteTest::EnqueueMany(const std::string& type,
                                            const std::string& payload, int n) {
  std::vector<TaskId> ids;
  std::vector<TaskSpec> batch;
  for (int i = 0; i < n; ++i) {
    TaskSpec spec;
    spec.type = type;
    spec.payload = payload;
    RetryPolicy retry;
    retry.max_attempts = 5;
    retry.initial_delay = std::chrono::milliseconds(10);
    spec.options.retry = retry;
    batch.push_back(std::move(spec));
    if (batch.size() == 500 || i + 1 == n) {
      auto stored = Await(runtime_->EnqueueBatch(std::move(batch)).stored,
                          std::chrono::seconds(30));
      EXPECT_TRUE(stored.ok()) << stored.status().ToString();
      if (stored.ok()) ids.insert(ids.end(), stored->begin(), stored->end());
      batch.clear();
    }
  }
  return ids;
}

Status RemoteTest::Drain(std::chrono::seconds timeout) {
  DrainOptions options;
  options.timeout = timeout;
  options.wait_for_scheduled = true;
  return Await(runtime_->Drain(options), timeout + std::chrono::seconds(5))
      .status();
}

size_t RemoteTest::CountLogged(const std::string& text) {
  std::lock_guard<std::mutex> lock(log_mutex_);
  size_t n = 0;
  for (const std::string& line : log_) {
    if (line.find(text) != std::string::npos) ++n;
  }
  return n;
}

TaskInfo RemoteTest::Info(TaskId id) {
  auto info = Await(runtime_->GetTask(id));
  EXPECT_TRUE(info.ok());
  return info.ok() ? *info : TaskInfo{};
}

}  // namespace spool::testing
