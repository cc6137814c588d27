// Replication between two runtimes in one process, on RocksDB on disk
// (spool/replication.h): a standby that follows a primary's log holds every
// task the primary acknowledged under Durability::kReplicated; the primary
// refuses enqueues while too few standbys are connected and fails commits
// they do not acknowledge in time; a standby copies a new base when it
// cannot follow; and a standby refuses writes. spoold's HTTP transport is
// tested with real processes in tests/spoold_test.py (ReplicationTest).

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <spool/replication.h>
#include <spool/runtime.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/test_hooks.h"
#include "storage/fault_env.h"
#include "storage/task_store.h"
#include "tests/runtime_testing.h"

namespace spool {
namespace {

using namespace std::chrono_literals;
using spool::testing::Await;
using spool::testing::OpenOrDie;
using spool::testing::TempDir;
using ::testing::HasSubstr;

// What spoold's standby loop does, over a function call instead of HTTP:
// follow, apply, and copy a base (a backup made by the primary) when told
// the log is gone.
class Follower {
 public:
  Follower(Runtime* primary, Runtime* standby, std::string base_dir)
      : primary_(primary), standby_(standby), base_dir_(std::move(base_dir)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Follower() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  uint64_t rebases() const { return rebases_; }
  std::string error() {
    std::lock_guard<std::mutex> lock(mutex_);
    return error_;
  }

 private:
  void Run() {
    while (!stop_) {
      FollowRequest request;
      request.standby = "s1";
      request.log_id = log_id_;
      request.applied = applied_;
      request.epoch = standby_->GetReplicationStatus().epoch;
      request.wait = 100ms;
      Promise<FollowChunk> answered;
      primary_->FollowLog(request, [answered](Result<FollowChunk> r) {
        answered.Set(std::move(r));
      });
      Result<FollowChunk> chunk = answered.GetFuture().Wait();
      if (!chunk.ok()) return Fail(chunk.status());
      if (chunk->stale_primary) return Fail(Status::Aborted(chunk->why));
      if (chunk->gone) {
        Result<BackupInfo> base = primary_->BackupTo(base_dir_).Wait();
        if (!base.ok()) return Fail(base.status());
        Result<uint64_t> at = standby_->Rebase(base_dir_, chunk->log_id).Wait();
        if (!at.ok()) return Fail(at.status());
        log_id_ = chunk->log_id;
        applied_ = *at;
        ++rebases_;
        continue;
      }
      if (chunk->commits.empty()) continue;
      Result<uint64_t> at =
          standby_->ApplyReplicated(chunk->log_id, std::move(chunk->commits))
              .Wait();
      if (!at.ok()) return Fail(at.status());
      applied_ = *at;
    }
  }
  void Fail(const Status& s) {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = s.ToString();
  }

  Runtime* primary_;
  Runtime* standby_;
  std::string base_dir_;
  uint64_t log_id_ = 0;
  uint64_t applied_ = 0;
  std::atomic<uint64_t> rebases_{0};
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::string error_;  // GUARDED_BY(mutex_)
  std::thread thread_;
};

// One follow request of `primary`'s log, answered.
Result<FollowChunk> Follow(Runtime* primary, const FollowRequest& request) {
  Promise<FollowChunk> answered;
  primary->FollowLog(request, [answered](Result<FollowChunk> r) {
    answered.Set(std::move(r));
  });
  return Await(answered.GetFuture());
}

class ReplicationTest : public ::testing::Test {
 protected:
  // A primary with a handler for "work", not started: the tasks stay
  // pending, so the standby's copy can be compared with what was stored.
  std::unique_ptr<Runtime> OpenPrimary(const Options& options) {
    std::unique_ptr<Runtime> runtime = OpenOrDie(options);
    if (runtime) {
      EXPECT_TRUE(runtime->RegisterHandler("work", spool::testing::Ok).ok());
    }
    return runtime;
  }
  Options PrimaryOptions() {
    Options options;
    options.path = dir_.Sub("primary");
    options.durability = Durability::kReplicated;
    options.replication_min_acks = 1;
    options.replication_ack_timeout = 5000ms;
    options.close_timeout = 10s;
    return options;
  }
  // A primary whose standbys copy asynchronously: enqueues wait for none.
  Options AsyncPrimaryOptions() {
    Options options = PrimaryOptions();
    options.durability = Durability::kSync;
    options.serve_standbys = true;
    return options;
  }
  // Enqueues are refused until the standby has said hello: one "warm-up"
  // enqueue, retried until it is acknowledged.
  ::testing::AssertionResult WarmUp(Runtime* primary, Follower& follower) {
    if (spool::testing::WaitUntil(
            [&] {
              return primary->Enqueue("work", "warm-up").stored.Wait().ok();
            },
            30s)) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << "no standby acknowledged a warm-up: " << follower.error();
  }
  Options StandbyOptions() {
    Options options;
    options.path = dir_.Sub("standby");
    options.replication_role = ReplicationRole::kStandby;
    return options;
  }
  TempDir dir_;
};

// The guarantee: every enqueue the primary acknowledged is on the standby's
// disk. Four callers enqueue while the standby follows; then the primary
// goes away and the standby's copy is read.
TEST_F(ReplicationTest, StandbyHoldsEveryAcknowledgedTask) {
  std::unique_ptr<Runtime> primary = OpenPrimary(PrimaryOptions());
  std::unique_ptr<Runtime> standby = OpenOrDie(StandbyOptions());
  ASSERT_NE(primary, nullptr);
  ASSERT_NE(standby, nullptr);
  Follower follower(primary.get(), standby.get(), dir_.Sub("base"));
  ASSERT_TRUE(WarmUp(primary.get(), follower));

  std::mutex mutex;
  std::vector<TaskId> acknowledged;  // GUARDED_BY(mutex)
  std::atomic<int> failures{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        Result<TaskId> id =
            primary->Enqueue("work", "p" + std::to_string(t * 1000 + i))
                .stored.Wait();
        if (!id.ok()) {
          failures.fetch_add(1);
          continue;
        }
        std::lock_guard<std::mutex> lock(mutex);
        acknowledged.push_back(*id);
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(failures.load(), 0);
  follower.Stop();
  EXPECT_EQ(follower.error(), "");
  ReplicationStatus status = primary->GetReplicationStatus();
  EXPECT_EQ(status.role, "primary");
  ASSERT_EQ(status.standbys.size(), 1u);
  EXPECT_EQ(status.standbys[0].name, "s1");
  ASSERT_TRUE(Await(primary->Close()).ok());
  primary.reset();

  ASSERT_EQ(acknowledged.size(), 1200u);
  for (TaskId id : acknowledged) {
    Result<TaskInfo> task = Await(standby->GetTask(id));
    ASSERT_TRUE(task.ok()) << "task " << id << ": " << task.status().ToString();
  }
  Result<StatusCounts> counts = Await(standby->CountByStatus());
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->total(), 1201u);  // with the warm-up
  EXPECT_EQ(standby->GetReplicationStatus().role, "standby");
}

// With no standby connected, an enqueue is refused at once and nothing is
// stored; a standby that stops answering makes the commit time out, and the
// error says the task is on the primary's disk only.
TEST_F(ReplicationTest, TooFewStandbysRefusesThenTimesOut) {
  Options options = PrimaryOptions();
  options.replication_ack_timeout = 300ms;
  std::unique_ptr<Runtime> primary = OpenPrimary(options);
  ASSERT_NE(primary, nullptr);
  Result<TaskId> refused = primary->Enqueue("work", "x").stored.Wait();
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().IsBusy()) << refused.status().ToString();
  EXPECT_THAT(refused.status().message(), HasSubstr("0 of the 1 standby(s)"));
  Result<StatusCounts> counts = Await(primary->CountByStatus());
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->total(), 0u);

  // A standby says where it is once, then goes quiet.
  FollowRequest hello;
  hello.standby = "quiet";
  hello.log_id = primary->GetReplicationStatus().log_id;
  hello.applied = primary->GetReplicationStatus().position;
  Promise<FollowChunk> answered;
  primary->FollowLog(
      hello, [answered](Result<FollowChunk> r) { answered.Set(std::move(r)); });
  ASSERT_TRUE(Await(answered.GetFuture()).ok());
  auto started = std::chrono::steady_clock::now();
  Result<TaskId> late = Await(primary->Enqueue("work", "y").stored);
  ASSERT_FALSE(late.ok());
  EXPECT_TRUE(late.status().IsTimedOut()) << late.status().ToString();
  EXPECT_THAT(late.status().message(),
              HasSubstr("stored on the primary's disk"));
  EXPECT_GE(std::chrono::steady_clock::now() - started, 250ms);
}

// A standby refuses every write, and a primary every standby call.
TEST_F(ReplicationTest, RolesRefuseWhatIsNotTheirs) {
  std::unique_ptr<Runtime> standby = OpenOrDie(StandbyOptions());
  ASSERT_NE(standby, nullptr);
  Result<TaskId> enqueued = standby->Enqueue("work", "x").stored.Wait();
  ASSERT_FALSE(enqueued.ok());
  EXPECT_TRUE(enqueued.status().IsFailedPrecondition());
  EXPECT_FALSE(standby->Start().ok());

  Options plain;
  plain.path = dir_.Sub("plain");
  std::unique_ptr<Runtime> primary = OpenOrDie(plain);
  ASSERT_NE(primary, nullptr);
  Result<uint64_t> applied = Await(primary->ApplyReplicated(1, {}));
  EXPECT_TRUE(applied.status().IsFailedPrecondition());
  Promise<FollowChunk> answered;
  FollowRequest request;
  request.standby = "s1";
  primary->FollowLog(request, [answered](Result<FollowChunk> r) {
    answered.Set(std::move(r));
  });
  Result<FollowChunk> chunk = Await(answered.GetFuture());
  ASSERT_FALSE(chunk.ok());
  EXPECT_THAT(chunk.status().message(), HasSubstr("serves no standbys"));
}

// Bad requests and commits that do not follow are refused, naming why.
TEST_F(ReplicationTest, RefusesBadRequestsAndCommits) {
  Options options = AsyncPrimaryOptions();
  std::unique_ptr<Runtime> primary = OpenPrimary(options);
  ASSERT_NE(primary, nullptr);
  FollowRequest bad;
  bad.standby = "no spaces";
  EXPECT_THAT(Follow(primary.get(), bad).status().message(),
              HasSubstr("standby name"));
  bad.standby = "s1";
  bad.max_bytes = 10;
  EXPECT_THAT(Follow(primary.get(), bad).status().message(),
              HasSubstr("max_bytes"));
  bad.max_bytes = 1 << 20;
  bad.wait = 61s;
  EXPECT_THAT(Follow(primary.get(), bad).status().message(), HasSubstr("wait"));

  // A standby of another log, or ahead of the primary, is told to re-base.
  FollowRequest stranger;
  stranger.standby = "s1";
  stranger.log_id = 12345;
  Result<FollowChunk> chunk = Follow(primary.get(), stranger);
  ASSERT_TRUE(chunk.ok());
  EXPECT_TRUE(chunk->gone);
  EXPECT_THAT(chunk->why, HasSubstr("follows log 12345"));
  stranger.log_id = chunk->log_id;
  stranger.applied = 1'000'000;
  chunk = Follow(primary.get(), stranger);
  ASSERT_TRUE(chunk.ok());
  EXPECT_TRUE(chunk->gone);
  EXPECT_THAT(chunk->why, HasSubstr("beyond this primary's"));

  // Asynchronous standbys: enqueues do not wait for them.
  ASSERT_TRUE(Await(primary->Enqueue("work", "a").stored).ok());
  ASSERT_TRUE(Await(primary->Enqueue("work", "b").stored).ok());
  FollowRequest from_start;
  from_start.standby = "s1";
  from_start.log_id = chunk->log_id;
  from_start.applied = primary->GetReplicationStatus().position - 1;
  chunk = Follow(primary.get(), from_start);
  ASSERT_TRUE(chunk.ok());
  ASSERT_FALSE(chunk->gone) << chunk->why;
  ASSERT_EQ(chunk->commits.size(), 1u);

  std::unique_ptr<Runtime> standby = OpenOrDie(StandbyOptions());
  ASSERT_NE(standby, nullptr);
  // The standby's store is new (position 0): a commit at position N > 1
  // does not follow it.
  Result<uint64_t> applied =
      Await(standby->ApplyReplicated(chunk->log_id, chunk->commits));
  ASSERT_FALSE(applied.ok());
  EXPECT_TRUE(applied.status().IsInvalidArgument());
  EXPECT_THAT(applied.status().message(), HasSubstr("does not follow"));
}

// A standby further behind than the log keeps is told so, copies a base,
// and follows from there: it ends with every task.
TEST_F(ReplicationTest, StandbyTooFarBehindCopiesANewBase) {
  Options options = AsyncPrimaryOptions();
  options.replication_log_bytes = 1 << 20;
  std::unique_ptr<Runtime> primary = OpenPrimary(options);
  ASSERT_NE(primary, nullptr);
  std::string big(64 << 10, 'x');
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(Await(primary->Enqueue("work", big).stored).ok());
  }
  ReplicationStatus status = primary->GetReplicationStatus();
  EXPECT_GT(status.oldest_kept, 2u);
  EXPECT_LE(status.log_bytes, (1u << 20) + (128u << 10));

  std::unique_ptr<Runtime> standby = OpenOrDie(StandbyOptions());
  ASSERT_NE(standby, nullptr);
  Follower follower(primary.get(), standby.get(), dir_.Sub("base"));
  ASSERT_TRUE(
      spool::testing::WaitUntil([&] { return follower.rebases() >= 1; }, 30s))
      << follower.error();
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(Await(primary->Enqueue("work", "after").stored).ok());
  }
  uint64_t target = primary->GetReplicationStatus().position;
  ASSERT_TRUE(spool::testing::WaitUntil(
      [&] { return standby->GetReplicationStatus().position == target; }, 30s))
      << follower.error();
  follower.Stop();
  Result<StatusCounts> counts = Await(standby->CountByStatus());
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->total(), 50u);
  EXPECT_EQ(follower.error(), "");
}

// Commits reach the standbys before the primary's own write and sync
// (docs/replication.md, "Shipping before the sync"). One whose write then
// fails here is retracted: the caller hears the error, the standby copies a
// new base, and the commit that takes the same position next is answered
// only once the standby holds it, not on the old log's acknowledgement.
TEST_F(ReplicationTest, ACommitWhoseWriteFailsAfterItShippedIsRetracted) {
  storage::FaultInjectionEnv faults;
  TestHooks hooks;
  hooks.env = faults.env();
  std::unique_ptr<Runtime> primary;
  ASSERT_TRUE(OpenWithHooks(PrimaryOptions(), hooks, &primary).ok());
  ASSERT_TRUE(primary->RegisterHandler("work", spool::testing::Ok).ok());
  std::unique_ptr<Runtime> standby = OpenOrDie(StandbyOptions());
  ASSERT_NE(standby, nullptr);
  Follower follower(primary.get(), standby.get(), dir_.Sub("base"));
  ASSERT_TRUE(WarmUp(primary.get(), follower));
  const uint64_t first_log = primary->GetReplicationStatus().log_id;
  const uint64_t rebases = follower.rebases();

  faults.SetFault(storage::FaultOp::kWrite,
                  storage::FaultSpec::NextN(1, storage::kWalFiles));
  Result<TaskId> failed = Await(primary->Enqueue("work", "lost").stored);
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(failed.status().IsIOError()) << failed.status().ToString();
  EXPECT_NE(primary->GetReplicationStatus().log_id, first_log);

  std::vector<TaskId> after;
  for (int i = 0; i < 5; ++i) {
    Result<TaskId> id = Await(primary->Enqueue("work", "after").stored, 30s);
    ASSERT_TRUE(id.ok()) << id.status().ToString() << " " << follower.error();
    // Acknowledged under kReplicated: the standby holds it already.
    ASSERT_TRUE(Await(standby->GetTask(*id)).ok()) << "task " << *id;
    after.push_back(*id);
  }
  EXPECT_GT(follower.rebases(), rebases);
  follower.Stop();
  EXPECT_EQ(follower.error(), "");
  // The two stores agree: the failed enqueue is on neither.
  Result<StatusCounts> here = Await(primary->CountByStatus());
  Result<StatusCounts> there = Await(standby->CountByStatus());
  ASSERT_TRUE(here.ok() && there.ok());
  EXPECT_EQ(here->total(), 6u);
  EXPECT_EQ(there->total(), 6u);
}

// A primary records that its commits ship before their sync; only a clean
// close clears the mark, so only then does the next primary on the store
// continue the log its standbys follow.
TEST_F(ReplicationTest, OnlyACleanCloseKeepsTheLogForTheNextPrimary) {
  Options options = AsyncPrimaryOptions();
  std::unique_ptr<Runtime> primary = OpenPrimary(options);
  ASSERT_NE(primary, nullptr);
  ASSERT_TRUE(Await(primary->Enqueue("work", "x").stored).ok());
  const uint64_t log_id = primary->GetReplicationStatus().log_id;
  ASSERT_TRUE(Await(primary->Close()).ok());
  primary = OpenPrimary(options);
  ASSERT_NE(primary, nullptr);
  EXPECT_EQ(primary->GetReplicationStatus().log_id, log_id);
  ASSERT_TRUE(Await(primary->Close()).ok());
  primary.reset();

  // What a primary that died leaves: the mark, still there.
  {
    storage::StoreOptions store_options;
    store_options.path = options.path;
    std::unique_ptr<storage::TaskStore> store;
    ASSERT_TRUE(storage::TaskStore::Open(store_options, &store).ok());
    ASSERT_TRUE(store->BeginShipping().ok());
  }
  primary = OpenPrimary(options);
  ASSERT_NE(primary, nullptr);
  EXPECT_NE(primary->GetReplicationStatus().log_id, log_id);
}

// Failover's epochs (docs/replication.md, "Failover"): a primary's epoch
// starts with a commit its standbys apply; a standby of a later epoch is
// told its primary was deposed; an old primary whose unacknowledged tail
// lies past the new epoch's start is told to copy a base; and a primary
// past its lease acknowledges nothing.
TEST_F(ReplicationTest, EpochsFenceADeposedPrimaryAndADivergedStandby) {
  Options options = AsyncPrimaryOptions();
  std::unique_ptr<Runtime> a = OpenPrimary(options);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(Await(a->BeginEpoch(0)).status().IsInvalidArgument());
  ASSERT_TRUE(Await(a->BeginEpoch(5)).ok());
  EXPECT_TRUE(Await(a->BeginEpoch(5)).ok());  // already of it
  Result<void> older = Await(a->BeginEpoch(4));
  EXPECT_TRUE(older.status().IsFailedPrecondition());
  EXPECT_THAT(older.status().message(), HasSubstr("newer than the leader's"));
  EXPECT_EQ(a->GetReplicationStatus().epoch, 5u);
  ASSERT_TRUE(Await(a->Enqueue("work", "one").stored).ok());

  // The standby applies the epoch with the commits.
  std::unique_ptr<Runtime> b = OpenOrDie(StandbyOptions());
  ASSERT_NE(b, nullptr);
  {
    Follower follower(a.get(), b.get(), dir_.Sub("base"));
    uint64_t target = a->GetReplicationStatus().position;
    ASSERT_TRUE(spool::testing::WaitUntil(
        [&] { return b->GetReplicationStatus().position == target; }, 30s))
        << follower.error();
  }
  EXPECT_EQ(b->GetReplicationStatus().epoch, 5u);
  uint64_t b_position = b->GetReplicationStatus().position;
  uint64_t log_id = a->GetReplicationStatus().log_id;

  FollowRequest newer;
  newer.standby = "s2";
  newer.log_id = log_id;
  newer.epoch = 6;
  Result<FollowChunk> chunk = Follow(a.get(), newer);
  ASSERT_TRUE(chunk.ok());
  EXPECT_TRUE(chunk->stale_primary);
  EXPECT_THAT(chunk->why, HasSubstr("deposed"));

  // A writes a tail B never sees, then loses its lease: nothing more is
  // acknowledged, and enqueues are refused at once.
  ASSERT_TRUE(Await(a->Enqueue("work", "tail").stored).ok());
  a->FenceAcknowledgements(std::chrono::steady_clock::now() - 1ms);
  Result<TaskId> fenced = Await(a->Enqueue("work", "late").stored);
  EXPECT_TRUE(fenced.status().IsBusy());
  EXPECT_THAT(fenced.status().message(), HasSubstr("lease lapsed"));
  uint64_t a_position = a->GetReplicationStatus().position;
  ASSERT_GT(a_position, b_position);
  ASSERT_TRUE(Await(a->Close()).ok());
  a.reset();

  // B is promoted with epoch 9: same log, a new epoch from b_position + 1.
  ASSERT_TRUE(Await(b->Close()).ok());
  b.reset();
  Options promoted = AsyncPrimaryOptions();
  promoted.path = dir_.Sub("standby");
  b = OpenPrimary(promoted);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(Await(b->BeginEpoch(9)).ok());
  ASSERT_TRUE(Await(b->Enqueue("work", "new").stored).ok());
  ASSERT_EQ(b->GetReplicationStatus().log_id, log_id);

  // A, back as a standby of epoch 5 holding its tail, must copy a base;
  // a standby of epoch 5 that stopped where B began follows on.
  FollowRequest old_primary;
  old_primary.standby = "a";
  old_primary.log_id = log_id;
  old_primary.epoch = 5;
  old_primary.applied = a_position;
  chunk = Follow(b.get(), old_primary);
  ASSERT_TRUE(chunk.ok());
  EXPECT_TRUE(chunk->gone);
  EXPECT_THAT(chunk->why, HasSubstr("never acknowledged"));
  EXPECT_EQ(chunk->epoch, 9u);
  FollowRequest caught_up = old_primary;
  caught_up.standby = "c";
  caught_up.applied = b_position;
  chunk = Follow(b.get(), caught_up);
  ASSERT_TRUE(chunk.ok());
  EXPECT_FALSE(chunk->gone) << chunk->why;
  ASSERT_FALSE(chunk->commits.empty());
  EXPECT_EQ(chunk->commits.front().position, b_position + 1);
}

// A standby promoted with the commits it applied last (what spoold's
// StandbyFollower kept) serves a standby one commit behind it, which
// would otherwise have to copy a whole base.
TEST_F(ReplicationTest,
       APromotedStandbySeededWithItsLastCommitsServesThoseBehind) {
  Options options = AsyncPrimaryOptions();
  std::unique_ptr<Runtime> a = OpenPrimary(options);
  ASSERT_NE(a, nullptr);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(Await(a->Enqueue("work", "t" + std::to_string(i)).stored).ok());
  }
  FollowRequest from_start;
  from_start.standby = "b";
  from_start.log_id = a->GetReplicationStatus().log_id;
  Result<FollowChunk> all = Follow(a.get(), from_start);
  ASSERT_TRUE(all.ok());
  ASSERT_FALSE(all->gone) << all->why;
  ASSERT_GE(all->commits.size(), 3u);
  const uint64_t log_id = all->log_id;
  const uint64_t last = all->commits.back().position;
  ASSERT_TRUE(Await(a->Close()).ok());
  a.reset();

  std::unique_ptr<Runtime> b = OpenOrDie(StandbyOptions());
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(Await(b->ApplyReplicated(log_id, all->commits)).ok());
  ASSERT_TRUE(Await(b->Close()).ok());
  Options promoted = options;
  promoted.path = dir_.Sub("standby");
  b = OpenPrimary(promoted);
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(b->GetReplicationStatus().log_id, log_id);

  FollowRequest behind = from_start;
  behind.standby = "c";
  behind.applied = last - 1;
  Result<FollowChunk> unseeded = Follow(b.get(), behind);
  ASSERT_TRUE(unseeded.ok());
  EXPECT_TRUE(unseeded->gone);  // the log holds nothing before its open

  std::vector<ReplicatedCommit> gap = {all->commits[0], all->commits[2]};
  EXPECT_TRUE(b->SeedReplicationLog(log_id, gap).IsInvalidArgument());
  EXPECT_TRUE(
      b->SeedReplicationLog(log_id + 1, all->commits).IsInvalidArgument());
  ASSERT_TRUE(b->SeedReplicationLog(log_id, all->commits).ok());
  ASSERT_TRUE(Await(b->BeginEpoch(3)).ok());
  Result<FollowChunk> seeded = Follow(b.get(), behind);
  ASSERT_TRUE(seeded.ok());
  ASSERT_FALSE(seeded->gone) << seeded->why;
  ASSERT_FALSE(seeded->commits.empty());
  EXPECT_EQ(seeded->commits.front().position, last);
  EXPECT_EQ(seeded->commits.front().data, all->commits.back().data);
}

}  // namespace
}  // namespace spool
