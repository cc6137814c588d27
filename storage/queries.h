// Queries over the index families: paginated listings, their cursors and
// JSON form, the oldest task of a status and the next one due.
//
// Everything here reads one TaskStore::ReadView, so a result is one
// snapshot. Work is bounded per call: a page reads at most `limit` records
// (+1 to learn whether more follow) and at most kMaxPageScan index entries
// beyond them; nothing here walks a whole family.
//
// Which index serves a listing (entries of the `index` family):
//   no filter        the `tasks` family itself, from the cursor's id
//   status           status entries (status, type, id): the ranges of the
//                    types present in that status (one seek each to find
//                    them) merged by id
//   type + status    status entries, the one range (status, type)
//   type             status entries, the 8 status ranges merged by id
//   group [+status]  group entries (group, id) -> status, status checked on
//                    the entry's value
//   group + type     group entries, type checked on the task's state
// A created-time range is checked on each task's record. In every case
// tasks come in ascending id order, or descending for a newest-first
// listing (the same entries read backwards), and the cursor is the last id
// a page covered, so pages never overlap (see spool/query.h).

#ifndef SPOOL_STORAGE_QUERIES_H_
#define SPOOL_STORAGE_QUERIES_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <spool/query.h>
#include <spool/status.h>
#include <spool/task.h>

#include "storage/json_writer.h"
#include "storage/record_json.h"
#include "storage/task_store.h"

namespace spool::storage {

// A listing, validated: what one page reads.
struct ListSpec {
  std::optional<TaskStatus> status;
  std::string type;
  std::string group;
  // Bounds on created_at, in microseconds since the epoch: [from, before).
  std::optional<int64_t> created_from_us;
  std::optional<int64_t> created_before_us;
  ListOrder order = ListOrder::kOldestFirst;
  bool include_payload = true;
  size_t limit = 100;
  // Where the page starts: it holds ids beyond this one in the listing's
  // order. Oldest first: ids above it (0: from the oldest). Newest first:
  // ids below it, with 0 (never a task id) meaning from the newest.
  TaskId after = 0;

  bool newest_first() const { return order == ListOrder::kNewestFirst; }
  bool has_created_range() const {
    return created_from_us.has_value() || created_before_us.has_value();
  }
};

// Checks `query` and turns it into a spec: InvalidArgument for a limit
// outside 1..kMaxPageSize, a type or group too long for a key, a malformed
// cursor, or a cursor of a query with other filters.
Status ParseTaskQuery(const TaskQuery& query, ListSpec* spec);

// The cursor that continues `spec` after task `last`.
std::string EncodeCursor(const ListSpec& spec, TaskId last);

// What a page found besides its records.
struct PageInfo {
  // Empty when the listing is complete.
  std::string next_cursor;
  // Listed by the index, but the task is missing or fails verification.
  std::vector<TaskId> unreadable;
  // Index entries (or tasks, without filters) examined.
  size_t examined = 0;
};

// Called for each task of a page, in the listing's order. `task` holds its
// values, verified; `task.view()` reads them in place. Valid only during
// the call.
using PageVisitor = std::function<void(const TaskBytes& task)>;

// Reads one page of `spec` on `view`, calling `visit` for each task, and
// fills *info. Returns the first storage error (the page is then partial
// and must be discarded).
Status ListPage(const TaskStore::ReadView& view, const ListSpec& spec,
                const PageVisitor& visit, PageInfo* info);

// The task types whose payloads are declared JSON. A sorted vector: lookups
// allocate nothing.
class JsonPayloadTypes {
 public:
  JsonPayloadTypes() = default;
  // Returns a copy with `type` added.
  JsonPayloadTypes With(std::string_view type) const;
  bool Contains(std::string_view type) const;
  PayloadFormat FormatOf(std::string_view type) const {
    return Contains(type) ? PayloadFormat::kJson : PayloadFormat::kBinary;
  }
  size_t size() const { return types_.size(); }

 private:
  std::vector<std::string> types_;
};

// The payload format of one task under `json_types` (null: none declared).
PayloadFormat FormatOf(const TaskView& task,
                       const JsonPayloadTypes* json_types);

// FormatOf for a task of a listing: kOmitted when `spec` leaves payloads
// out.
PayloadFormat FormatOf(const TaskView& task, const ListSpec& spec,
                       const JsonPayloadTypes* json_types);

// Writes a page as one JSON object into a string:
//   {"tasks":[<task>,...],"next_cursor":"..."|null,"unreadable":[id,...]}
// Add each task, then Finish once.
class PageJsonWriter {
 public:
  // Appends to *out, which must outlive the writer.
  explicit PageJsonWriter(std::string* out);
  void Add(const TaskView& task, PayloadFormat format);
  void Finish(const PageInfo& info);

 private:
  JsonWriter writer_;
};

// ListPage straight into JSON (see PageJsonWriter), with no object per task.
Status ListPageJson(const TaskStore::ReadView& view, const ListSpec& spec,
                    const JsonPayloadTypes* json_types, std::string* out);

// The lowest id with `status` (the oldest such task), or nullopt.
Status OldestWithStatus(const TaskStore::ReadView& view, TaskStatus status,
                        std::optional<TaskId>* id);

// The task that becomes due first among those waiting for a time (the first
// due entry of the index), or nullopt.
Status NextDue(const TaskStore::ReadView& view, std::optional<TaskId>* id);

// Reads and verifies the values of task `id` into *task: NotFound when
// there is none, Corruption when they cannot be opened or fail
// verification.
Status ReadTask(const TaskStore::ReadView& view, TaskId id, TaskBytes* task);

// Reads task `id`'s failed attempts; NotFound if there is no such task.
Status ReadFailureHistory(const TaskStore::ReadView& view, TaskId id,
                          FailureHistory* history);

// Turns off RocksDB's per-thread perf counters (perf_context) on the calling
// thread. Nothing in spool reads them, and a shared librocksdb reaches them
// through __tls_get_addr at every step of a read; reader threads call this.
void DisablePerfCountersOnThisThread();

}  // namespace spool::storage

#endif  // SPOOL_STORAGE_QUERIES_H_
