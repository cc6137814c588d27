// Settings per type and per group from the config file (issue 15): each
// takes effect in a real runtime, code wins over the file, and the file
// over the defaults.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <spool/config.h>
#include <spool/runtime.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/harness.h"

namespace spool {
namespace {

using namespace std::chrono_literals;
using testing::Harness;
using ::testing::HasSubstr;
using testing::WaitUntil;

// Opens h's runtime again with `toml` applied to its options as a config
// file would apply it (ParseOptions, then Validate).
void Configure(Harness* h, const std::string& toml) {
  Status s = ParseOptions(toml, "test.toml", {}, &h->options());
  ASSERT_TRUE(s.ok()) << s.ToString();
  h->Reopen();
}

// Handlers that hold their tasks until released, counting how many run at
// once by type and by group.
class Holder {
 public:
  Handler handler() {
    return [this](TaskContext& task) {
      std::string type(task.type());
      std::string group(task.group());
      std::unique_lock<std::mutex> lock(mutex_);
      ++running_[type];
      ++running_["group:" + group];
      changed_.notify_all();
      changed_.wait_for(lock, testing::kWait, [this] { return released_; });
      --running_[type];
      --running_["group:" + group];
      return Status::OK();
    };
  }
  // How many of `key` (a type, or "group:NAME") run now.
  int Running(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    return running_[key];
  }
  // Waits until `key` has `n` running; false if the bounded wait ran out.
  bool WaitForRunning(const std::string& key, int n) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, testing::kWait,
                             [&] { return running_[key] == n; });
  }
  void Release(bool released) {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = released;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, int> running_;
  bool released_ = false;
};

// Gives the scheduler the time to (wrongly) start more than a limit
// allows; what is asserted after it must hold however long it waits.
void LetTheSchedulerRun() { std::this_thread::sleep_for(50ms); }

TEST(TypeConfigTest, ConcurrencyFromTheFileLimitsATypeAndCodeWinsOverIt) {
  Harness h(4, Durability::kSync);
  Configure(&h,
            "[types.limited]\nconcurrency = 1\n"
            "[types.coded]\nconcurrency = 1\n");
  Holder holder;
  ASSERT_TRUE(h.runtime().RegisterHandler("limited", holder.handler()).ok());
  HandlerOptions three;
  three.max_concurrent = 3;
  ASSERT_TRUE(
      h.runtime().RegisterHandler("coded", holder.handler(), three).ok());
  for (int i = 0; i < 3; ++i) {
    h.Put("limited", "");
    h.Put("coded", "");
  }
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(holder.WaitForRunning("coded", 3));
  ASSERT_TRUE(holder.WaitForRunning("limited", 1));
  LetTheSchedulerRun();
  EXPECT_EQ(holder.Running("limited"), 1) << "the file's limit";
  EXPECT_EQ(holder.Running("coded"), 3) << "code's limit, not the file's 1";
  holder.Release(true);
  h.Drain();
}

TEST(TypeConfigTest, TimeoutFromTheFileEndsAnAttemptAndCodeWinsOverIt) {
  Harness h(2, Durability::kSync);
  Configure(&h,
            "[types.slow]\ntimeout_ms = 5000\nretry = { policy = \"none\" }\n"
            "[types.coded]\ntimeout_ms = 5000\n");
  std::atomic<int> started{0};
  Handler wait_for_cancel = [&](TaskContext& task) {
    ++started;
    task.WaitForCancel(30s);
    return Status::Aborted("stopped");
  };
  ASSERT_TRUE(h.runtime().RegisterHandler("slow", wait_for_cancel).ok());
  HandlerOptions hour;
  hour.timeout = 1h;
  hour.retry = RetryPolicy::None();
  ASSERT_TRUE(h.runtime().RegisterHandler("coded", wait_for_cancel, hour).ok());
  h.RegisterRecorder("plain");
  TaskId slow = h.Put("slow", "");
  TaskId coded = h.Put("coded", "");
  TaskId plain = h.Put("plain", "");
  EXPECT_EQ(h.Info(slow).timeout, 5s);
  EXPECT_EQ(h.Info(coded).timeout, 1h);
  EXPECT_EQ(h.Info(plain).timeout, Duration(0)) << "the default: none";

  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return started.load() == 2; }));
  h.clock().Advance(5s);
  ASSERT_TRUE(h.WaitForStatus(slow, TaskStatus::kFailed));
  EXPECT_THAT(h.Info(slow).last_error, HasSubstr("timeout"));
  EXPECT_EQ(h.StatusOf(coded), TaskStatus::kRunning);
  ASSERT_TRUE(testing::Await(h.runtime().Cancel(coded)).ok());
  ASSERT_TRUE(h.WaitForStatus(coded, TaskStatus::kCancelled));
}

TEST(TypeConfigTest, RetryFromTheFileAndTheRetryDefaultApplyAndCodeWins) {
  Harness h(4, Durability::kSync);
  Configure(&h,
            "[retry]\npolicy = \"fixed\"\nattempts = 2\nbase_ms = 0\n"
            "[types.thrice.retry]\nattempts = 3\n"
            "[types.coded.retry]\nattempts = 5\n");
  Handler fail = [](TaskContext&) { return Status::Aborted("no"); };
  ASSERT_TRUE(h.runtime().RegisterHandler("plain", fail).ok());
  ASSERT_TRUE(h.runtime().RegisterHandler("thrice", fail).ok());
  HandlerOptions once;
  once.retry = RetryPolicy::None();
  ASSERT_TRUE(h.runtime().RegisterHandler("coded", fail, once).ok());
  TaskId plain = h.Put("plain", "");
  TaskId thrice = h.Put("thrice", "");
  TaskId coded = h.Put("coded", "");
  ASSERT_TRUE(h.runtime().Start().ok());
  for (TaskId id : {plain, thrice, coded}) {
    ASSERT_TRUE(h.WaitForStatus(id, TaskStatus::kFailed)) << id;
  }
  EXPECT_EQ(h.Info(plain).attempts, 2u) << "[retry], over the built-in 3";
  EXPECT_EQ(h.Info(thrice).attempts, 3u) << "[types.thrice.retry]";
  EXPECT_EQ(h.Info(coded).attempts, 1u) << "code's policy, not the file's 5";
}

TEST(TypeConfigTest, RateLimitFromTheFileCapsAttemptsAndCodeWinsOverIt) {
  Harness h(4, Durability::kSync);
  Configure(&h,
            "[types.t.rate_limit]\ncount = 2\nperiod_ms = 60000\n"
            "[types.coded.rate_limit]\ncount = 1\nperiod_ms = 60000\n");
  h.RegisterRecorder("t");
  HandlerOptions unlimited;
  unlimited.rate_limit = RateLimit{};  // set in code: no limit
  h.RegisterRecorder("coded", unlimited);
  for (int i = 0; i < 4; ++i) {
    h.Put("t", "t");
    h.Put("coded", "coded");
  }
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(h.journal.WaitForSize(6));
  LetTheSchedulerRun();
  std::vector<std::string> labels = h.journal.Labels();
  EXPECT_EQ(std::count(labels.begin(), labels.end(), "t"), 2)
      << "the file's burst is 2 per minute";
  EXPECT_EQ(std::count(labels.begin(), labels.end(), "coded"), 4);
  // One interval (30 s) frees one more attempt.
  h.clock().Advance(30s);
  ASSERT_TRUE(h.journal.WaitForSize(7));
}

TEST(TypeConfigTest, GatesFromTheFileHoldATypeAndCodeWinsOverThem) {
  Harness h(2, Durability::kSync);
  Configure(&h,
            "[types.upload]\ngates = [\"network\"]\n"
            "[types.coded]\ngates = [\"network\"]\n");
  h.RegisterRecorder("upload");
  HandlerOptions no_gates;
  no_gates.requires_gates.emplace();
  h.RegisterRecorder("coded", no_gates);
  ASSERT_TRUE(h.runtime().SetGate("network", false).ok());
  TaskId upload = h.Put("upload", "upload");
  TaskId coded = h.Put("coded", "coded");
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(h.WaitForStatus(coded, TaskStatus::kSucceeded));
  LetTheSchedulerRun();
  EXPECT_EQ(h.StatusOf(upload), TaskStatus::kPending);
  ASSERT_TRUE(h.runtime().SetGate("network", true).ok());
  ASSERT_TRUE(h.WaitForStatus(upload, TaskStatus::kSucceeded));
}

// Puts `n` tasks of `type` in `group`.
void PutInGroup(Harness* h, const std::string& group, int n) {
  EnqueueOptions options;
  options.group = group;
  for (int i = 0; i < n; ++i) h->Put("t", group, options);
}

// Runs the tasks held so far to the end, and holds the next ones again.
void ReleaseAndDrain(Harness* h, Holder* holder) {
  holder->Release(true);
  h->Drain();
  holder->Release(false);
}

// [groups.NAME] beats runtime.group_concurrency; SetGroupConcurrency beats
// [groups.NAME], also after a restart (it is stored), until it is set to 0.
TEST(TypeConfigTest, GroupTablesLimitGroupsAndSetGroupConcurrencyWinsOverThem) {
  Harness h(4, Durability::kSync);
  Configure(&h,
            "[runtime]\ngroup_concurrency = 3\n"
            "[groups.one]\nconcurrency = 1\n");
  Holder holder;
  ASSERT_TRUE(h.runtime().RegisterHandler("t", holder.handler()).ok());
  PutInGroup(&h, "one", 4);
  PutInGroup(&h, "other", 4);
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(holder.WaitForRunning("group:one", 1));
  ASSERT_TRUE(holder.WaitForRunning("group:other", 3));
  LetTheSchedulerRun();
  EXPECT_EQ(holder.Running("group:one"), 1) << "[groups.one]";
  EXPECT_EQ(holder.Running("group:other"), 3) << "runtime.group_concurrency";
  ReleaseAndDrain(&h, &holder);

  ASSERT_TRUE(h.runtime().SetGroupConcurrency("one", 2).ok());
  PutInGroup(&h, "one", 4);
  ASSERT_TRUE(holder.WaitForRunning("group:one", 2));
  LetTheSchedulerRun();
  EXPECT_EQ(holder.Running("group:one"), 2) << "code's limit, not the file's";
  ReleaseAndDrain(&h, &holder);

  h.Reopen();
  ASSERT_TRUE(h.runtime().RegisterHandler("t", holder.handler()).ok());
  PutInGroup(&h, "one", 4);
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(holder.WaitForRunning("group:one", 2));
  LetTheSchedulerRun();
  EXPECT_EQ(holder.Running("group:one"), 2) << "the stored limit wins";
  ReleaseAndDrain(&h, &holder);

  ASSERT_TRUE(h.runtime().SetGroupConcurrency("one", 0).ok());
  PutInGroup(&h, "one", 4);
  ASSERT_TRUE(holder.WaitForRunning("group:one", 1));
  LetTheSchedulerRun();
  EXPECT_EQ(holder.Running("group:one"), 1) << "the file's limit again";
  ReleaseAndDrain(&h, &holder);
}

// The scheduler knows groups by their stored form, a keyed hash when the
// store is encrypted: the file's limits are translated the same way.
TEST(TypeConfigTest, GroupTablesLimitGroupsOfAnEncryptedStore) {
  Harness h(4, Durability::kSync);
  h.options().encryption_key = std::string(32, 'k');
  Configure(&h, "[groups.one]\nconcurrency = 1\n");
  Holder holder;
  ASSERT_TRUE(h.runtime().RegisterHandler("t", holder.handler()).ok());
  PutInGroup(&h, "one", 3);
  PutInGroup(&h, "other", 3);
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(holder.WaitForRunning("group:other", 3));
  ASSERT_TRUE(holder.WaitForRunning("group:one", 1));
  LetTheSchedulerRun();
  EXPECT_EQ(holder.Running("group:one"), 1);
  ReleaseAndDrain(&h, &holder);
}

TEST(TypeConfigTest, ATableForATypeWithoutAHandlerIsWarnedOfAtStart) {
  // Declared before the harness, so they outlive the runtime's close,
  // which still logs through the sink.
  std::mutex mutex;
  std::vector<std::string> warnings;
  Harness h(1, Durability::kSync);
  h.options().log_sink = [&](LogLevel level, std::string_view message) {
    std::lock_guard<std::mutex> lock(mutex);
    if (level == LogLevel::kWarn &&
        message.find("names a task type with no handler") !=
            std::string_view::npos) {
      warnings.emplace_back(message);
    }
  };
  Configure(&h,
            "[types.email]\nconcurrency = 1\n"
            "[types.emial]\nconcurrency = 2\n");
  h.RegisterRecorder("email");
  ASSERT_TRUE(h.runtime().Start().ok());
  std::lock_guard<std::mutex> lock(mutex);
  ASSERT_EQ(warnings.size(), 1u) << ::testing::PrintToString(warnings);
  EXPECT_THAT(warnings[0], HasSubstr("[types.emial]"));
}

TEST(TypeConfigTest, RegisterHandlerRefusesBadOptionsNamingTheField) {
  Harness h(1);
  Handler ok = [](TaskContext&) { return Status::OK(); };
  HandlerOptions options;
  options.timeout = -1s;
  Status s = h.runtime().RegisterHandler("a", ok, options);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_THAT(s.ToString(), HasSubstr("HandlerOptions::timeout must be"));
  options = HandlerOptions{};
  options.rate_limit = RateLimit{5, Duration(0)};
  s = h.runtime().RegisterHandler("a", ok, options);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_THAT(s.ToString(),
              HasSubstr("HandlerOptions::rate_limit.period must be > 0"));
  options = HandlerOptions{};
  options.retry = RetryPolicy::Fixed(0, 1s);
  s = h.runtime().RegisterHandler("a", ok, options);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_THAT(s.ToString(), HasSubstr("HandlerOptions::retry"));
  EXPECT_TRUE(h.runtime().RegisterHandler("a", ok).ok());
}

}  // namespace
}  // namespace spool
