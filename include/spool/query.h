// Queries and live queries: what callers ask about tasks, and how they
// follow a query as the tasks change.
//
// Every query runs on one of the runtime's reader threads, on a consistent
// snapshot of storage, and never waits for the writer. A result reflects at
// least every write whose future had resolved before the query was made.
//
// Listing is paginated by task id, oldest first (ascending, i.e. in enqueue
// order) unless TaskQuery::order asks for newest first:
//
//   spool::TaskQuery query;
//   query.status = spool::TaskStatus::kFailed;
//   query.limit = 100;
//   do {
//     const auto& page = runtime->ListTasks(query).Wait();
//     if (!page.ok()) break;
//     Show(page->tasks);
//     query.cursor = page->next_cursor;
//   } while (!query.cursor.empty());
//
// Pagination guarantee. Each page comes from its own snapshot and returns
// tasks with ids beyond the cursor in the listing's order (above it,
// ascending; or below it, descending). So, while writes go on:
//   - no task appears twice in one pagination, and the ids only move in the
//     listing's direction (a newest-first pagination does not see tasks
//     enqueued after its first page: start again for those);
//   - a task that matches the query from the first page's snapshot to the
//     last page's is returned exactly once;
//   - a task that starts or stops matching meanwhile (e.g. changes status)
//     is returned at most once, with its state as of the page that has it.
// A page does bounded work: it reads at most `limit` records, and at most
// kMaxPageScan index entries beyond them; it holds at most kMaxPageBytes of
// stored task bytes (payloads and results counted only when included), and
// always at least one task. When a budget runs out the page is short
// (possibly empty) and next_cursor is set, so the caller simply asks for the
// next page.
//
// Task JSON. The JSON queries write each task as one object with these
// members, in this order: "id", "type", "status" (TaskStatusName),
// "priority", "group", "dedup_key", "idempotency_key" (each null when not
// set), "attempts", "max_attempts", "snoozes", "created_at", "updated_at",
// "next_attempt_at" (RFC 3339 UTC with microseconds, or null), "sequence",
// "last_error" (or null), "failures" ([{"attempt","at","error"}], oldest
// first), "result" (null without one; else shown by the payload's rule
// below, as "result" or "result_base64"), then "payload" when the task's
// type was declared with Runtime::DeclareJsonPayload and the payload is
// valid JSON (embedded as is), else "payload_base64" (RFC 4648). A listing
// that leaves payloads out (TaskQuery::include_payload) writes neither the
// result nor the payload members. Strings are escaped exactly: '"',
// '\\' and U+0000..U+001F are escaped, U+2028/U+2029 too, and invalid UTF-8
// becomes U+FFFD, so the output is always valid UTF-8 JSON.
//
// A live query (Watch*) delivers the query's result at once and then again
// each time it changes; see class Watch for the guarantees.
//
// Thread safety: the types here are values. A Watch may be used from any
// thread; one Watch object needs external synchronization.

#ifndef SPOOL_INCLUDE_QUERY_H_
#define SPOOL_INCLUDE_QUERY_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <spool/status.h>
#include <spool/task.h>

namespace spool {

// The largest TaskQuery::limit.
inline constexpr size_t kMaxPageSize = 10000;

// The deepest nesting of arrays and objects spool reads or writes as JSON:
// a payload or result of a type declared JSON (DeclareJsonPayload) is shown
// as JSON only within it, and spoold refuses a request body nested deeper
// (400). Every reader checks it while it parses, before anything recursive
// sees the value: a client cannot exhaust a stack with `[[[[...`. 64 is far
// beyond what real documents use and well inside every JSON library's
// (and browser's) own limits.
inline constexpr size_t kMaxJsonDepth = 64;

// The most index entries one page examines beyond the tasks it returns,
// when filters leave most of them out (e.g. a group and a status).
inline constexpr size_t kMaxPageScan = 10000;

// The most stored bytes of the tasks in one page (see the pagination
// guarantee): a listing of large payloads stops there, so that one request
// cannot make a reader copy limit × max_payload_bytes into one answer. A
// task larger than this alone still makes a page of one.
inline constexpr size_t kMaxPageBytes = size_t{16} << 20;

// The order of a listing, by task id (which follows enqueue order).
enum class ListOrder : uint8_t {
  kOldestFirst = 0,
  kNewestFirst = 1,
};

// Which tasks ListTasks returns, and which page of them. Filters combine
// with "and"; every combination is served by an index (status, type,
// type + status, group, group + status); a type together with a group reads
// the group's entries and checks the type on the record.
struct TaskQuery {
  // Only tasks in this status. Default: any status.
  std::optional<TaskStatus> status;

  // Only tasks of this type. Default (empty): any type.
  std::string type;

  // Only tasks in this group. Default (empty): any task, grouped or not.
  std::string group;

  // Only tasks created at or after this time. Default: no bound.
  std::optional<Timestamp> created_from;

  // Only tasks created before this time. Default: no bound.
  // created_from and created_before are checked on each task's record, not
  // served by an index: a range that leaves most of the listed tasks out
  // spends the page's scan budget (kMaxPageScan) and returns short pages
  // with a cursor. Must be after created_from when both are set.
  std::optional<Timestamp> created_before;

  // Oldest first (ascending ids, the default) or newest first.
  ListOrder order = ListOrder::kOldestFirst;

  // Whether the listed tasks carry the application's bytes: their payloads
  // and results. false leaves TaskInfo::payload empty and TaskInfo::result
  // unset, and the JSON forms without "payload", "payload_base64", "result"
  // and "result_base64": a dashboard's listing copies none of them into its
  // answer. Default: true.
  bool include_payload = true;

  // The most tasks in one page, 1..kMaxPageSize. Default: 100.
  size_t limit = 100;

  // Where the page starts: empty for the first page, else the next_cursor of
  // the previous page of a query with the same filters (the limit may
  // change). A cursor of another query is rejected with InvalidArgument.
  // Cursors are short printable ASCII, safe in URLs and JSON, and stay valid
  // across restarts.
  std::string cursor;
};

// One page of a listing.
struct TaskPage {
  // In the query's order: ascending ids, or descending for kNewestFirst.
  std::vector<TaskInfo> tasks;

  // Pass as TaskQuery::cursor to get the next page. Empty when the listing
  // is complete.
  std::string next_cursor;

  // Tasks the index lists but whose record failed verification (see
  // Status::kCorruption); they are left out of `tasks` so that one damaged
  // record does not hide the rest. Usually empty.
  std::vector<TaskId> unreadable;
};

// Task counts by type and then by status, from one snapshot. Types with no
// task are absent.
using TypeCounts = std::map<std::string, StatusCounts>;

// The failed attempts of one task.
struct FailureHistory {
  TaskId id = 0;
  TaskStatus status = TaskStatus::kPending;
  // Attempts started so far, and the most allowed.
  uint32_t attempts = 0;
  uint32_t max_attempts = 1;
  // The error of the most recent failed attempt; empty if none.
  std::string last_error;
  // The most recent failed attempts, oldest first (at most 16; older ones are
  // forgotten).
  std::vector<TaskInfo::Failure> failures;
};

// What Runtime::CheckConsistency found: every stored record verified, and
// the index compared with the entries the records imply.
struct ConsistencyReport {
  // Tasks examined in the tasks family.
  uint64_t tasks = 0;
  // Of those, the ones whose record cannot be opened or fails
  // verification; the first 100 ids are listed.
  uint64_t unreadable = 0;
  std::vector<TaskId> unreadable_ids;
  // Index entries that are missing, have the wrong value, or name no task.
  uint64_t index_mismatches = 0;
  // Tasks set aside earlier (see Runtime::ListSetAside): known, not damage
  // found now.
  uint64_t set_aside = 0;
  // A description of the first few problems (at most 20).
  std::vector<std::string> problems;

  // No unreadable record and no index mismatch.
  bool ok() const { return unreadable == 0 && index_mismatches == 0; }
};

// How the live queries are doing, for monitoring and tests.
struct WatchStats {
  // Watch objects subscribed now.
  uint64_t subscriptions = 0;
  // Distinct queries they watch (identical queries share one).
  uint64_t queries = 0;
  // Queries run since open: initial runs and re-runs after a change.
  uint64_t runs = 0;
  // Runs whose result was unchanged, so nothing was delivered.
  uint64_t unchanged = 0;
  // Changes that arrived while the query was running and were folded into
  // its one follow-up run.
  uint64_t coalesced = 0;
  // Results handed to subscribers (one per subscriber per changed result).
  uint64_t emissions = 0;
  // Queries running now.
  uint64_t in_flight = 0;
};

// Called with each result of a live query. See class Watch.
template <class T>
using WatchCallback = std::function<void(const Result<T>&)>;

namespace internal {
// A subscription's delivery state; shared by a Watch and the runtime.
class WatchControl;
}  // namespace internal

// A subscription to a live query, returned by Runtime::Watch*. Destroying
// it unsubscribes.
//
// Guarantees, for one Watch:
//   - The first delivery is the query's result at subscription, then one
//     per change of the result. An unchanged result is never delivered
//     (results are compared by a 64-bit hash computed on the reader).
//   - The result delivered and the hash it is compared by come from one
//     snapshot, and results are delivered in snapshot order: a subscriber
//     never sees an older result after a newer one.
//   - After a change, the subscriber eventually receives the current result
//     (at most one re-run is in flight per query; changes that arrive
//     meanwhile cause exactly one follow-up run).
//   - Latest value, no backlog: if the callback is slower than the changes,
//     intermediate results are skipped, never queued. Memory per
//     subscription is one pending result.
//   - Callbacks run on the runtime's callback executor
//     (Options::callback_executor), never two at once for one Watch.
//   - Once Unsubscribe returns, the callback is not running and never runs
//     again, even if a delivery was already queued on the executor. Called
//     from inside the callback, Unsubscribe returns at once and the callback
//     is not called again after the current call.
//   - When the runtime closes, each active Watch receives Status::kClosed
//     once, and nothing after.
// Errors of a run (e.g. NotFound for a watched id that does not exist yet,
// Corruption) are delivered like results; the query keeps being watched.
class [[nodiscard]] Watch {
 public:
  // An empty watch: active() is false.
  Watch() = default;
  Watch(Watch&& other) noexcept = default;
  // Unsubscribes this watch first, then takes `other`'s subscription.
  Watch& operator=(Watch&& other) noexcept;
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;
  // Unsubscribes (see Unsubscribe).
  ~Watch();

  // True until Unsubscribe, or until the runtime closed.
  bool active() const;

  // Stops deliveries; see the class comment. Idempotent. May block while a
  // callback of this Watch runs on another thread: do not call it while
  // holding a lock that the callback takes.
  void Unsubscribe();

  // Used by the runtime. REQUIRES: control is not null.
  explicit Watch(std::shared_ptr<internal::WatchControl> control);

 private:
  std::shared_ptr<internal::WatchControl> control_;
};

}  // namespace spool

#endif  // SPOOL_INCLUDE_QUERY_H_
