// The application key space (spool/app_batch.h): the application's writes
// and its tasks committed together by the writer, or not at all, and read
// back through the reader pool, across reopens, encrypted or not.

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <spool/app_batch.h>
#include <spool/encryption.h>
#include <spool/runtime.h>

#include <gtest/gtest.h>

#include "tests/runtime_testing.h"

namespace spool {
namespace {

using namespace std::chrono_literals;
using testing::Await;
using testing::TempDir;

class AppDataTest : public ::testing::Test {
 protected:
  Options QueueOptions() const {
    Options options;
    options.path = dir_.Sub("q");
    options.workers = 2;
    return options;
  }

  // Opens the runtime with an "email" handler, not started: tasks stay
  // pending, so tests see them as committed.
  void Open(const Options& options) {
    runtime_ = testing::OpenOrDie(options);
    ASSERT_NE(runtime_, nullptr);
    ASSERT_TRUE(runtime_->RegisterHandler("email", testing::Ok).ok());
  }

  void Close() {
    ASSERT_TRUE(Await(runtime_->Close()).ok());
    runtime_.reset();
  }

  std::optional<std::string> Value(const std::string& key) {
    Result<std::optional<std::string>> got = Await(runtime_->GetAppValue(key));
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    return got.ok() ? *got : std::nullopt;
  }

  TempDir dir_;
  std::unique_ptr<Runtime> runtime_;
};

TEST_F(AppDataTest, PutsAndEnqueuesCommitTogether) {
  Open(QueueOptions());
  AppBatch batch;
  ASSERT_TRUE(batch.Put("order/1", "first").ok());
  ASSERT_TRUE(batch.Put("order/2", "second").ok());
  ASSERT_TRUE(batch.Delete("order/none").ok());
  batch.Enqueue({"email", "order=1", {}});
  batch.Enqueue({"email", "order=2", {}});
  BatchTicket ticket = runtime_->CommitAppBatch(std::move(batch));
  ASSERT_EQ(ticket.ids.size(), 2u);
  Result<std::vector<TaskId>> stored = Await(ticket.stored);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(*stored, ticket.ids);

  EXPECT_EQ(Value("order/1"), "first");
  EXPECT_EQ(Value("order/2"), "second");
  EXPECT_EQ(Value("order/none"), std::nullopt);
  for (TaskId id : ticket.ids) {
    Result<TaskInfo> task = Await(runtime_->GetTask(id));
    ASSERT_TRUE(task.ok()) << task.status().ToString();
    EXPECT_EQ(task->type, "email");
    EXPECT_EQ(task->status, TaskStatus::kPending);
  }
}

TEST_F(AppDataTest, AnInvalidTaskStoresNoneOfTheWrites) {
  Open(QueueOptions());
  AppBatch first;
  ASSERT_TRUE(first.Put("k", "old").ok());
  ASSERT_TRUE(Await(runtime_->CommitAppBatch(std::move(first)).stored).ok());

  // Refused on the caller's thread: an empty type.
  AppBatch invalid;
  ASSERT_TRUE(invalid.Put("k", "new").ok());
  ASSERT_TRUE(invalid.Put("other", "x").ok());
  invalid.Enqueue({"email", "fine", {}});
  invalid.Enqueue({"", "no type", {}});
  Result<std::vector<TaskId>> refused =
      Await(runtime_->CommitAppBatch(std::move(invalid)).stored);
  EXPECT_TRUE(refused.status().IsInvalidArgument())
      << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("task 1"), std::string::npos)
      << refused.status().ToString();

  // Refused by the writer: a dependency that does not exist.
  AppBatch missing_dependency;
  ASSERT_TRUE(missing_dependency.Put("k", "newer").ok());
  EnqueueOptions waits;
  waits.depends_on = {999999};
  missing_dependency.Enqueue({"email", "waits", waits});
  refused =
      Await(runtime_->CommitAppBatch(std::move(missing_dependency)).stored);
  EXPECT_TRUE(refused.status().IsNotFound()) << refused.status().ToString();

  EXPECT_EQ(Value("k"), "old");
  EXPECT_EQ(Value("other"), std::nullopt);
  Result<StatusCounts> counts = Await(runtime_->CountByStatus());
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->total(), 0u);
}

TEST_F(AppDataTest, DeletesAndLaterWritesWin) {
  Open(QueueOptions());
  AppBatch batch;
  ASSERT_TRUE(batch.Put("a", "1").ok());
  ASSERT_TRUE(batch.Put("a", "2").ok());
  ASSERT_TRUE(batch.Put("b", "").ok());
  ASSERT_TRUE(batch.Put("c", "gone").ok());
  ASSERT_TRUE(batch.Delete("c").ok());
  ASSERT_TRUE(Await(runtime_->CommitAppBatch(std::move(batch)).stored).ok());
  EXPECT_EQ(Value("a"), "2");
  EXPECT_EQ(Value("b"), "");  // an empty value is a value
  EXPECT_EQ(Value("c"), std::nullopt);

  AppBatch removal;
  ASSERT_TRUE(removal.Delete("a").ok());
  ASSERT_TRUE(Await(runtime_->CommitAppBatch(std::move(removal)).stored).ok());
  EXPECT_EQ(Value("a"), std::nullopt);
  EXPECT_EQ(Value("b"), "");
}

TEST_F(AppDataTest, ScansPageThroughAPrefixInKeyOrder) {
  Open(QueueOptions());
  AppBatch batch;
  for (const char* key : {"user/3", "order/2", "order/1", "order/10", "p"}) {
    ASSERT_TRUE(batch.Put(key, std::string("v:") + key).ok());
  }
  ASSERT_TRUE(Await(runtime_->CommitAppBatch(std::move(batch)).stored).ok());

  std::vector<std::string> keys;
  AppScan scan;
  scan.prefix = "order/";
  scan.limit = 2;
  int pages = 0;
  for (;;) {
    Result<AppPage> page = Await(runtime_->ScanAppValues(scan));
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    ++pages;
    for (const AppEntry& e : page->entries) {
      EXPECT_EQ(e.value, "v:" + e.key);
      keys.push_back(e.key);
    }
    if (!page->more) break;
    ASSERT_FALSE(page->entries.empty());
    scan.start_after = page->entries.back().key;
    ASSERT_LT(pages, 10);
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"order/1", "order/10", "order/2"}));
  EXPECT_EQ(pages, 2);

  Result<AppPage> all = Await(runtime_->ScanAppValues(AppScan{}));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->entries.size(), 5u);
  EXPECT_FALSE(all->more);
}

TEST_F(AppDataTest, WritesAndTasksSurviveReopen) {
  Options options = QueueOptions();
  Open(options);
  AppBatch batch;
  ASSERT_TRUE(batch.Put("order/7", "paid").ok());
  batch.Enqueue({"email", "order=7", {}});
  BatchTicket ticket = runtime_->CommitAppBatch(std::move(batch));
  ASSERT_TRUE(Await(ticket.stored).ok());
  Close();

  Open(options);
  EXPECT_EQ(Value("order/7"), "paid");
  Result<TaskInfo> task = Await(runtime_->GetTask(ticket.ids.at(0)));
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  EXPECT_EQ(task->payload, "order=7");
}

TEST_F(AppDataTest, OutOfLimitArgumentsAreRefusedNamingThem) {
  AppBatch batch;
  Status s = batch.Put("", "v");
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("key"), std::string::npos) << s.ToString();
  s = batch.Put(std::string(AppBatch::kMaxKeyBytes + 1, 'k'), "v");
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("1024"), std::string::npos) << s.ToString();
  s = batch.Put("k", std::string(AppBatch::kMaxValueBytes + 1, 'v'));
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("value"), std::string::npos) << s.ToString();
  EXPECT_TRUE(batch.Delete("").IsInvalidArgument());
  EXPECT_TRUE(batch.empty());  // nothing refused was staged
  EXPECT_TRUE(batch
                  .Put(std::string(AppBatch::kMaxKeyBytes, 'k'),
                       std::string(AppBatch::kMaxValueBytes, 'v'))
                  .ok());

  Open(QueueOptions());
  EXPECT_TRUE(Await(runtime_->GetAppValue("")).status().IsInvalidArgument());
  AppScan scan;
  scan.limit = 0;
  Status bad = Await(runtime_->ScanAppValues(scan)).status();
  EXPECT_TRUE(bad.IsInvalidArgument());
  EXPECT_NE(bad.message().find("limit"), std::string::npos) << bad.ToString();
  scan.limit = AppScan::kMaxLimit + 1;
  EXPECT_TRUE(
      Await(runtime_->ScanAppValues(scan)).status().IsInvalidArgument());

  // An empty batch resolves at once; after Close every call is Closed.
  EXPECT_TRUE(Await(runtime_->CommitAppBatch(AppBatch{}).stored).ok());
  ASSERT_TRUE(Await(runtime_->Close()).ok());
  AppBatch late;
  ASSERT_TRUE(late.Put("k", "v").ok());
  EXPECT_TRUE(Await(runtime_->CommitAppBatch(std::move(late)).stored)
                  .status()
                  .IsClosed());
  EXPECT_TRUE(Await(runtime_->GetAppValue("k")).status().IsClosed());
}

TEST_F(AppDataTest, AReadOnlyOpenReadsTheKeySpaceAndRefusesWrites) {
  Options options = QueueOptions();
  Open(options);
  AppBatch batch;
  ASSERT_TRUE(batch.Put("cfg/mode", "live").ok());
  ASSERT_TRUE(Await(runtime_->CommitAppBatch(std::move(batch)).stored).ok());

  std::unique_ptr<Runtime> reader;
  Status s = Runtime::OpenReadOnly(options, &reader);
  ASSERT_TRUE(s.ok()) << s.ToString();
  Result<std::optional<std::string>> got =
      Await(reader->GetAppValue("cfg/mode"));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "live");
  AppBatch write;
  ASSERT_TRUE(write.Put("cfg/mode", "test").ok());
  Status refused =
      Await(reader->CommitAppBatch(std::move(write)).stored).status();
  EXPECT_TRUE(refused.IsFailedPrecondition()) << refused.ToString();
  EXPECT_TRUE(Await(reader->Close()).ok());
}

// Reads every file under `dir` and says whether any holds `needle`.
bool AnyFileHolds(const std::string& dir, const std::string& needle) {
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)),
                      std::istreambuf_iterator<char>());
    if (bytes.find(needle) != std::string::npos) return true;
  }
  return false;
}

TEST_F(AppDataTest, ValuesAreSealedInAnEncryptedStore) {
  const std::string secret = "card=4111-1111-1111-1111";
  {
    // Without a key the value is on disk as given: the search below can
    // find it.
    Options plain = QueueOptions();
    plain.path = dir_.Sub("plain");
    Open(plain);
    AppBatch batch;
    ASSERT_TRUE(batch.Put("customer/9", secret).ok());
    ASSERT_TRUE(Await(runtime_->CommitAppBatch(std::move(batch)).stored).ok());
    // In the write-ahead log while the runtime is open (tables compress).
    EXPECT_TRUE(AnyFileHolds(plain.path, secret));
    Close();
  }
  Options options = QueueOptions();
  options.encryption_key = GenerateEncryptionKey();
  Open(options);
  AppBatch batch;
  ASSERT_TRUE(batch.Put("customer/9", secret).ok());
  ASSERT_TRUE(Await(runtime_->CommitAppBatch(std::move(batch)).stored).ok());
  EXPECT_EQ(Value("customer/9"), secret);
  // Neither the write-ahead log nor, after Close flushed it, a table holds
  // the plaintext.
  EXPECT_FALSE(AnyFileHolds(options.path, secret));
  Close();
  EXPECT_FALSE(AnyFileHolds(options.path, secret));

  Open(options);
  EXPECT_EQ(Value("customer/9"), secret);
}

}  // namespace
}  // namespace spool
