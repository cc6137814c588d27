// RemoteTest: a runtime whose gateway real spool-worker processes connect
// to (docs/scale-out.md), shared by the remote suites (remote_test.cc on
// loopback, remote_netns_test.cc across network namespaces). Every wait is
// bounded.

#ifndef SPOOL_TESTS_REMOTE_TESTING_H_
#define SPOOL_TESTS_REMOTE_TESTING_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <spool/runtime.h>

#include <gtest/gtest.h>

#include "tests/child_process.h"
#include "tests/testing.h"

namespace spool::testing {

inline constexpr char kRemoteSecret[] = "0123456789abcdef0123456789abcdef";

// A TCP port nothing listens on right now on the IPv4 address `host`.
int FreePort(const std::string& host = "127.0.0.1");

// Writes `secret` to the owner-only file `name` in `dir`; returns its path.
std::string WriteSecret(const TempDir& dir, const std::string& name,
                        const std::string& secret);

// "TASK ATTEMPT" lines a spool-worker --log wrote.
std::vector<std::pair<TaskId, uint32_t>> StartsIn(const std::string& path);

class RemoteTest : public ::testing::Test {
 protected:
  // Opens the queue node, with no local worker, its gateway on `host` and
  // a free port there. `before_start` may add what must come before Start
  // (rate limits).
  void Open(std::chrono::milliseconds lease = std::chrono::seconds(2),
            const std::function<void(Runtime&)>& before_start = nullptr,
            const std::string& host = "127.0.0.1");

  // A spool-worker connected to the gateway, logging its starts to
  // dir_/NAME.log. `launcher` comes before the binary on its command line
  // (e.g. `ip netns exec NS`) and must exec it in place, so that the child
  // killed at the end is the worker itself.
  std::unique_ptr<ChildProcess> Worker(
      const std::string& name, const std::string& types, int concurrency,
      const std::string& secret_file = "", std::vector<std::string> more = {},
      const std::vector<std::string>& launcher = {});

  static void ExpectConnected(ChildProcess& worker);

  // `n` tasks with 5 attempts and 10 ms between them, in batches.
  std::vector<TaskId> EnqueueMany(const std::string& type,
                                  const std::string& payload, int n);

  Status Drain(std::chrono::seconds timeout);

  // Whether a line the runtime logged holds `text`; how many do.
  bool Logged(const std::string& text) { return CountLogged(text) > 0; }
  size_t CountLogged(const std::string& text);

  TaskInfo Info(TaskId id);

  TempDir dir_;
  std::string host_ = "127.0.0.1";
  int port_ = 0;
  // The log outlives the runtime: members die in reverse order, and the
  // runtime's close still logs (the gateway's goodbyes) through log_sink.
  std::mutex log_mutex_;
  std::vector<std::string> log_;
  std::unique_ptr<Runtime> runtime_;
};

}  // namespace spool::testing

#endif  // SPOOL_TESTS_REMOTE_TESTING_H_
