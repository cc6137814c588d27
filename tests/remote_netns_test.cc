// A remote worker cut off by a dropped link, not killed (issue 12): each
// spool-worker runs in a network namespace of its own, joined to the root
// namespace (where the queue node is) by a veth pair on a private /30 the
// test makes, so all the traffic stays on links the test made. Taking the
// cut worker's end of its link down sends no FIN and no RST: only the
// lease deadline can catch it. Needs root and iproute2's `ip`, else skips.
// What it makes it deletes, whatever the outcome; every wait is bounded.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include <spool/runtime.h>

#include <gtest/gtest.h>

#include "tests/remote_testing.h"
#include "tests/testing.h"

namespace spool {
namespace {

using testing::RemoteTest;
using testing::StartsIn;
using testing::WaitUntil;

// What a command run through /bin/sh printed (stderr with stdout), and
// whether it exited 0.
struct Ran {
  bool ok = false;
  std::string output;
};

Ran Shell(const std::string& command) {
  Ran ran;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    ran.output = "popen failed: " + command;
    return ran;
  }
  char chunk[512];
  size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof chunk, pipe)) > 0)
    ran.output.append(chunk, n);
  int status = ::pclose(pipe);
  ran.ok = status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return ran;
}

// iproute2's ip, or empty.
std::string IpBinary() {
  for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip"}) {
    if (::access(path, X_OK) == 0) return path;
  }
  return "";
}

// Host `n` of 10.213.0.0/16, dotted.
std::string Address(uint32_t n) {
  return "10.213." + std::to_string((n >> 8) & 255) + "." +
         std::to_string(n & 255);
}

// A network namespace joined to the root one by a veth pair on the /30 at
// `subnet`: host 1 on the root side, host 2 inside. Deletes what it made.
class Link {
 public:
  Link(std::string ip, std::string ns, std::string veth, uint32_t subnet)
      : ip_(std::move(ip)),
        ns_(std::move(ns)),
        outer_(veth + "r"),
        inner_(veth + "n"),
        subnet_(subnet) {}

  ~Link() {
    // The namespace's end goes with its peer, and the namespace with its
    // last process (the workers are killed before this runs).
    if (made_link_) static_cast<void>(Shell(ip_ + " link del " + outer_));
    if (made_ns_) static_cast<void>(Shell(ip_ + " netns del " + ns_));
  }
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  // Makes the namespace, or says why it cannot ("" when it did).
  std::string MakeNamespace() {
    std::string failed = Ip("netns add " + ns_);
    made_ns_ = failed.empty();
    return failed;
  }

  // Makes the pair, its addresses, and inside a default route to the root
  // side when `route`; "" when done, else what failed.
  std::string MakeLink(bool route) {
    std::string failed = Ip("link add " + outer_ + " type veth peer name " +
                            inner_ + " netns " + ns_);
    if (!failed.empty()) return failed;
    made_link_ = true;
    for (const std::string& step :
         {"addr add " + outer() + "/30 dev " + outer_,
          "link set dev " + outer_ + " up",
          "-n " + ns_ + " addr add " + Address(subnet_ + 2) + "/30 dev " +
              inner_,
          "-n " + ns_ + " link set dev " + inner_ + " up",
          route ? "-n " + ns_ + " route add default via " + outer()
                : std::string()}) {
      if (step.empty()) continue;
      failed = Ip(step);
      if (!failed.empty()) return failed;
    }
    return "";
  }

  // Takes the namespace's end down (nothing crosses, nothing is reset) or
  // up again.
  std::string SetInnerEnd(bool up) {
    return Ip("-n " + ns_ + " link set dev " + inner_ + (up ? " up" : " down"));
  }

  // The root side's address.
  std::string outer() const { return Address(subnet_ + 1); }

  // Runs a program inside (ip netns exec execs it in place).
  std::vector<std::string> Launcher() const {
    return {ip_, "netns", "exec", ns_};
  }

 private:
  std::string Ip(const std::string& args) {
    Ran ran = Shell(ip_ + " " + args);
    return ran.ok ? "" : "ip " + args + ": " + ran.output;
  }

  std::string ip_, ns_, outer_, inner_;
  uint32_t subnet_;
  bool made_ns_ = false;
  bool made_link_ = false;
};

class RemoteNetnsTest : public RemoteTest {
 protected:
  void SetUp() override {
    if (::geteuid() != 0)
      GTEST_SKIP() << "making network namespaces needs root";
    std::string ip = IpBinary();
    if (ip.empty()) GTEST_SKIP() << "no iproute2 `ip` to make namespaces with";
    // Names and a /29 (two /30s) of 10.213.0.0/16 of this run's own: from
    // the pid, skipping blocks some interface already uses.
    const std::string pid = std::to_string(::getpid());
    uint32_t subnet = UINT32_MAX;
    for (uint32_t i = 0; i < 64 && subnet == UINT32_MAX; ++i) {
      uint32_t block = ((static_cast<uint32_t>(::getpid()) + i) % 8192) * 8;
      Ran used = Shell(ip + " -o addr show to " + Address(block) + "/29");
      if (used.ok && used.output.empty()) subnet = block;
    }
    ASSERT_NE(subnet, UINT32_MAX) << "no free /29 in 10.213.0.0/16";
    cut_ = std::make_unique<Link>(ip, "spool-cut-" + pid, "spc" + pid, subnet);
    healthy_ =
        std::make_unique<Link>(ip, "spool-ok-" + pid, "spo" + pid, subnet + 4);
    std::string failed = cut_->MakeNamespace();
    if (!failed.empty()) GTEST_SKIP() << "cannot make a namespace: " << failed;
    ASSERT_EQ(healthy_->MakeNamespace(), "");
    ASSERT_EQ(cut_->MakeLink(/*route=*/false), "");
    // The healthy worker reaches the gateway's address (on the other link)
    // through its own link.
    ASSERT_EQ(healthy_->MakeLink(/*route=*/true), "");
  }

  // Deleted after the test body's workers (its locals) are killed.
  std::unique_ptr<Link> cut_, healthy_;
};

TEST_F(RemoteNetnsTest, ACutOffWorkerLosesItsLeasesAtTheDeadlineOnly) {
  constexpr std::chrono::milliseconds kLease(1000);
  Open(kLease, nullptr, cut_->outer());
  auto cut = Worker("cut", "sleep", 2, "", {}, cut_->Launcher());
  ExpectConnected(*cut);
  auto healthy = Worker("healthy", "sleep", 2, "", {}, healthy_->Launcher());
  ExpectConnected(*healthy);
  const std::string cut_log = dir_.Sub("cut.log");
  const std::string healthy_log = dir_.Sub("healthy.log");

  std::vector<TaskId> ids = EnqueueMany("sleep", "200", 16);
  ASSERT_EQ(ids.size(), 16u);
  ASSERT_TRUE(WaitUntil([&] { return StartsIn(cut_log).size() >= 2; },
                        std::chrono::seconds(10)));
  ASSERT_EQ(cut_->SetInnerEnd(/*up=*/false), "");
  auto cut_at = std::chrono::steady_clock::now();

  // What the cut worker holds: its leases on record, once what was on the
  // wire when the link went down has landed and been written (well before
  // the deadline, at least a lease less a heartbeat period away).
  std::this_thread::sleep_for(kLease / 4);
  std::set<TaskId> held;
  for (TaskId id : ids) {
    TaskInfo info = Info(id);
    if (info.status == TaskStatus::kRunning && info.remote_node == "cut")
      held.insert(id);
  }
  ASSERT_FALSE(held.empty()) << "the cut worker held no lease";

  // Re-dispatch: one of them starts on the healthy worker about a lease
  // after the cut (the deadline runs from the last heartbeat, at most a
  // period before it), not at once as after a reset: bounded loosely.
  auto rerun = [&] {
    for (auto [id, attempt] : StartsIn(healthy_log)) {
      if (held.count(id) > 0) return true;
    }
    return false;
  };
  ASSERT_TRUE(WaitUntil(rerun, kLease + std::chrono::seconds(10)));
  auto after = std::chrono::steady_clock::now() - cut_at;
  EXPECT_GE(after, kLease / 2);
  EXPECT_LT(after, kLease + std::chrono::seconds(2));
  EXPECT_TRUE(Logged("remote worker 'cut'"));
  EXPECT_TRUE(Logged("no heartbeat within 1000 ms"));
  EXPECT_FALSE(Logged("its connection went down"));

  Status drained = Drain(std::chrono::seconds(20));
  ASSERT_TRUE(drained.ok()) << drained.ToString();
  std::map<TaskId, std::vector<uint32_t>> starts;
  for (const std::string& log : {cut_log, healthy_log}) {
    for (auto [id, attempt] : StartsIn(log)) starts[id].push_back(attempt);
  }
  std::map<TaskId, TaskInfo> settled;
  for (TaskId id : ids) {
    TaskInfo info = Info(id);
    ASSERT_EQ(info.status, TaskStatus::kSucceeded) << "task " << id;
    // The succeeding attempt started once, and nothing after it.
    const std::vector<uint32_t>& ran = starts[id];
    EXPECT_EQ(std::count(ran.begin(), ran.end(), info.attempts), 1)
        << "task " << id;
    for (uint32_t attempt : ran) EXPECT_LE(attempt, info.attempts);
    if (held.count(id) > 0) {
      // Back through the crash path: the attempt counted, as interrupted.
      EXPECT_GE(info.attempts, 2u) << "task " << id;
      ASSERT_FALSE(info.failures.empty()) << "task " << id;
      EXPECT_EQ(info.failures.back().error, kInterruptedAttemptError);
    } else {
      EXPECT_EQ(info.attempts, 1u) << "task " << id;
    }
    settled[id] = info;
  }

  // The link comes back: the outcomes the cut worker sent meanwhile (its
  // handlers ran on) arrive, and are refused. Its heartbeat is answered
  // with a revoke and it says hello again, after those outcomes on the
  // same connection; the third hello in all (cut, healthy, cut).
  ASSERT_EQ(cut_->SetInnerEnd(/*up=*/true), "");
  EXPECT_TRUE(WaitUntil([&] { return Logged("refused the outcome of task"); },
                        std::chrono::seconds(20)));
  EXPECT_TRUE(WaitUntil([&] { return CountLogged(") connected: ") >= 3; },
                        std::chrono::seconds(20)));
  ASSERT_TRUE(Drain(std::chrono::seconds(10)).ok());
  for (TaskId id : ids) {
    TaskInfo info = Info(id);
    const TaskInfo& before = settled[id];
    EXPECT_EQ(info.status, TaskStatus::kSucceeded) << "task " << id;
    EXPECT_EQ(info.attempts, before.attempts) << "task " << id;
    EXPECT_EQ(info.updated_at, before.updated_at) << "task " << id;
    EXPECT_EQ(info.failures.size(), before.failures.size()) << "task " << id;
    EXPECT_EQ(info.remote_node, "") << "task " << id;
  }
}

}  // namespace
}  // namespace spool
