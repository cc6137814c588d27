// AppBatch: the application's own data, committed together with tasks (the
// transactional outbox).
//
// spool keeps an application key space beside its tasks, in the same store:
// keys and values are bytes, ordered bytewise. An AppBatch gathers puts and
// deletes of that key space and tasks to enqueue; Runtime::CommitAppBatch
// hands it to the writer, which commits it in one write batch of its group
// commit: the application's writes and the tasks are stored together, or
// none of them is. So "record the order, then send the e-mail" cannot leave
// an order without its e-mail task, or an e-mail task without its order,
// whatever crashes in between.
//
//   spool::AppBatch batch;
//   spool::Status s = batch.Put("order/42", order_bytes);
//   batch.Enqueue({"email", "order=42"});
//   spool::BatchTicket ticket = runtime->CommitAppBatch(std::move(batch));
//   // ticket.stored resolves once both are durable, or with why neither is.
//
// Reads (Runtime::GetAppValue, Runtime::ScanAppValues) run on the reader
// pool, on a snapshot, like every query. In an encrypted store values are
// sealed like task records (keys are stored in plaintext, as task types are);
// ReencryptAll does not reseal them.
//
// Thread safety: an AppBatch is a plain value; use one from one thread at a
// time.

#ifndef SPOOL_INCLUDE_APP_BATCH_H_
#define SPOOL_INCLUDE_APP_BATCH_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <spool/status.h>
#include <spool/task.h>

namespace spool {

class AppBatch {
 public:
  // The longest key and value Put and Delete accept. Keys are at least one
  // byte long.
  static constexpr size_t kMaxKeyBytes = 1024;
  static constexpr size_t kMaxValueBytes = size_t{1} << 20;
  // The most puts and deletes one batch holds.
  static constexpr size_t kMaxWrites = 100000;

  // One write of the key space: a put (value set) or a delete (no value).
  struct Write {
    std::string key;
    std::optional<std::string> value;
  };

  // Stages `key` = `value` (an empty value is a value); a later write of
  // the same key in this batch wins. InvalidArgument naming the key or the
  // value when the key is empty or longer than kMaxKeyBytes, the value
  // longer than kMaxValueBytes, or the batch holds kMaxWrites writes
  // already; then nothing is staged.
  Status Put(std::string_view key, std::string_view value);

  // Stages the removal of `key` (absent keys are fine). InvalidArgument as
  // for Put.
  Status Delete(std::string_view key);

  // Stages a task to enqueue with the writes. It is checked when the batch
  // is committed, as EnqueueBatch checks its tasks: an invalid task fails
  // the whole batch, writes included.
  void Enqueue(TaskSpec task) { tasks_.push_back(std::move(task)); }

  const std::vector<Write>& writes() const { return writes_; }
  const std::vector<TaskSpec>& tasks() const { return tasks_; }
  bool empty() const { return writes_.empty() && tasks_.empty(); }

  // Moves the staged contents out, leaving the batch empty.
  std::vector<Write> TakeWrites() { return std::move(writes_); }
  std::vector<TaskSpec> TakeTasks() { return std::move(tasks_); }

 private:
  Status Check(std::string_view key, const std::string_view* value) const;

  std::vector<Write> writes_;
  std::vector<TaskSpec> tasks_;
};

// One entry of the application key space.
struct AppEntry {
  std::string key;
  std::string value;
};

// A scan of the application key space, in ascending key order.
struct AppScan {
  // Only keys that start with `prefix` (empty: every key).
  std::string prefix;
  // Only keys after `start_after` (empty: from the first key of the prefix).
  // Pass the previous page's last key to go on.
  std::string start_after;
  // The most entries returned: 1..kMaxLimit.
  size_t limit = 100;
  static constexpr size_t kMaxLimit = 10000;
};

// One page of a scan: the entries, and whether more keys match after the
// last one (then scan again with start_after = entries.back().key).
struct AppPage {
  std::vector<AppEntry> entries;
  bool more = false;
};

}  // namespace spool

#endif  // SPOOL_INCLUDE_APP_BATCH_H_
