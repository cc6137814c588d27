#include "storage/queries.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include <rocksdb/perf_level.h>

#include "storage/keys.h"
#include "storage/record.h"
#include "storage/task_record_generated.h"

namespace spool::storage {
namespace {

// "c1", the id after which the next page starts (16 hex digits), and a
// fingerprint of the filters (8 hex digits), so that a cursor handed to
// another query is caught instead of silently skipping tasks.
constexpr std::string_view kCursorVersion = "c1";
constexpr size_t kCursorSize = 2 + 16 + 8;

// FNV-1a, 32 bits: stable across processes and versions, so cursors survive
// a restart. Not a security measure; a cursor is not a secret.
uint32_t Fnv1a(uint32_t hash, std::string_view bytes) {
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 16777619u;
  }
  return hash;
}

uint32_t FilterFingerprint(const ListSpec& spec) {
  uint32_t hash = 2166136261u;
  char status = spec.status ? static_cast<char>(*spec.status) : '\xff';
  hash = Fnv1a(hash, std::string_view(&status, 1));
  // Length-prefixed, so that ("ab", "c") and ("a", "bc") differ.
  std::string parts;
  PutKeyString(&parts, spec.type);
  PutKeyString(&parts, spec.group);
  // Added only when set, so that cursors of plain oldest-first listings,
  // handed out before these options existed, stay valid.
  if (spec.newest_first()) parts.push_back('<');
  if (spec.created_from_us) {
    parts.push_back('f');
    PutBigEndian64(&parts, static_cast<uint64_t>(*spec.created_from_us));
  }
  if (spec.created_before_us) {
    parts.push_back('b');
    PutBigEndian64(&parts, static_cast<uint64_t>(*spec.created_before_us));
  }
  return Fnv1a(hash, parts);
}

void AppendHex(uint64_t value, int digits, std::string* out) {
  static constexpr char kDigits[] = "0123456789abcdef";
  for (int i = digits - 1; i >= 0; --i) {
    out->push_back(kDigits[(value >> (4 * i)) & 0xf]);
  }
}

bool ParseHex(std::string_view text, uint64_t* value) {
  uint64_t v = 0;
  for (char c : text) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return false;
    }
    v = (v << 4) | static_cast<uint64_t>(digit);
  }
  *value = v;
  return true;
}

// The key where a scan of `prefix` resumes after task `after`: the prefix
// followed by the next id, big-endian.
std::string ResumeKey(std::string_view prefix, TaskId after) {
  std::string key(prefix);
  PutBigEndian64(&key, after + 1);
  return key;
}

// Where a backward scan of `prefix` resumes below task `before` (the key
// itself is excluded); empty, the end of the prefix, when `before` is 0.
std::string ResumeBelowKey(std::string_view prefix, TaskId before) {
  if (before == 0) return "";
  std::string key(prefix);
  PutBigEndian64(&key, before);
  return key;
}

// Scans the id-ordered entries of `prefix` that follow spec.after in the
// listing's order.
Status ScanInOrder(const TaskStore::ReadView& view, const std::string& prefix,
                   const ListSpec& spec, const IndexVisitor& visit) {
  if (spec.newest_first()) {
    return view.ScanReverse(ColumnFamily::kIndex, prefix,
                            ResumeBelowKey(prefix, spec.after), visit);
  }
  return view.Scan(ColumnFamily::kIndex, prefix, ResumeKey(prefix, spec.after),
                   visit);
}

TaskId TrailingId(std::string_view key) {
  TaskId id = 0;
  DecodeTrailingId(key, &id);
  return id;
}

// Candidate ids whose gaps are at most this are read with one forward scan
// of the `tasks` family (skipping the records in between) instead of one
// point lookup each: a lookup searches the memtable's skiplist and every
// level, a step of an iterator follows one link.
constexpr TaskId kMaxScanGap = 8;
// Runs shorter than this use point lookups: opening an iterator costs about
// as much as two lookups.
constexpr size_t kMinScanRun = 3;
// Candidates buffered before their records are read, when the record decides
// whether they match (a group listing with a type).
constexpr size_t kCheckedBatch = 64;

// Builds one page from candidate ids offered in the listing's order: reads,
// verifies and filters their records, stops at the limit (learning whether
// more follow from the next match) or when the scan budget is spent.
// Candidates are buffered and their records read together, in that order.
class PageBuilder {
 public:
  PageBuilder(const TaskStore::ReadView& view, const ListSpec& spec,
              const PageVisitor& visit, PageInfo* info)
      : view_(view),
        spec_(spec),
        visit_(visit),
        info_(info),
        // Only a group listing with a type needs the record to decide on
        // the type; a created-time range always does.
        check_type_(!spec.group.empty() && !spec.type.empty()),
        check_record_(check_type_ || spec.has_created_range()) {
    pending_.reserve(check_record_ ? kCheckedBatch : spec.limit);
  }

  // Counts one index entry examined; returns false once the budget is
  // spent, after noting where the next page must resume.
  bool Examine(TaskId id) {
    if (info_->examined == spec_.limit + kMaxPageScan) {
      // `id` is not looked at: the next page starts with it.
      budget_spent_ = true;
      return false;
    }
    ++info_->examined;
    last_examined_ = id;
    return true;
  }

  // Offers the next candidate id; returns false when the page is complete.
  bool Offer(TaskId id) {
    if (done_) return false;
    if (!check_record_ && produced_ + pending_.size() == spec_.limit) {
      // A sure match beyond the limit: more follow, and this one is not
      // read.
      more_ = true;
      Flush();
      return Stop();
    }
    pending_.push_back(id);
    if (check_record_ && pending_.size() == kCheckedBatch) return Flush();
    return true;
  }

  // Offers a task read by a scan of the `tasks` family (or a point read).
  bool OfferTask(TaskId id, TaskBytes& task) {
    if (done_) return false;
    if (!task.Verify(id).ok()) return Unreadable(id);
    if (check_type_ && TypeOf(task.view()) != spec_.type) return true;
    if (!InCreatedRange(task.view())) return true;
    const size_t bytes = ListedBytes(task);
    if (produced_ == spec_.limit ||
        (produced_ > 0 && bytes > kMaxPageBytes - listed_bytes_)) {
      more_ = true;
      return Stop();
    }
    ++produced_;
    listed_bytes_ += std::min(bytes, kMaxPageBytes);
    last_produced_ = id;
    visit_(task);
    return true;
  }

  // Counts `id` as listed but unreadable; returns false when the page is
  // complete.
  bool Unreadable(TaskId id) {
    if (produced_ == spec_.limit) {
      more_ = true;
      return Stop();
    }
    ++produced_;
    last_produced_ = id;
    info_->unreadable.push_back(id);
    return true;
  }
  // Reads what is still buffered and sets the cursor; returns the first
  // error.
  Status Finish() {
    if (!done_) Flush();
    if (!status_.ok()) return status_;
    if (more_) {
      info_->next_cursor = EncodeCursor(spec_, last_produced_);
    } else if (budget_spent_) {
      info_->next_cursor = EncodeCursor(spec_, last_examined_);
    }
    return Status::OK();
  }

 private:
  // The stored bytes `task` adds to the page: its values, without the
  // payload and result when the listing leaves them out.
  size_t ListedBytes(const TaskBytes& task) const {
    size_t bytes = task.spec().size() + task.state().size();
    for (size_t i = 0; i < task.failure_count(); ++i) {
      bytes += task.failure(i).size();
    }
    if (spec_.include_payload) return bytes;
    const TaskView& view = task.view();
    if (const auto* payload = view.spec->payload()) bytes -= payload->size();
    if (const auto* result = view.state->result()) bytes -= result->size();
    return bytes;
  }

  bool InCreatedRange(const TaskView& task) const {
    if (!spec_.has_created_range()) return true;
    const int64_t created = task.spec->created_us();
    if (spec_.created_from_us && created < *spec_.created_from_us) return false;
    return !spec_.created_before_us || created < *spec_.created_before_us;
  }

  // Whether ids a then b, next to each other in the listing's order, are
  // close enough to read with one scan.
  bool Close(TaskId a, TaskId b) const {
    return (spec_.newest_first() ? a - b : b - a) <= kMaxScanGap;
  }

  // Reads the buffered candidates' records: runs of close ids with one scan,
  // the others with point lookups. Returns false when the page is complete.
  bool Flush() {
    size_t i = 0;
    while (i < pending_.size() && !done_) {
      size_t j = i + 1;
      while (j < pending_.size() && Close(pending_[j - 1], pending_[j])) ++j;
      if (j - i >= kMinScanRun && spec_.newest_first()) {
        ReadRunBackward(i, j);
      } else if (j - i >= kMinScanRun) {
        ReadRun(i, j);
      } else {
        for (size_t k = i; k < j && !done_; ++k) ReadOne(pending_[k]);
      }
      i = j;
    }
    pending_.clear();
    return !done_;
  }

  void ReadOne(TaskId id) {
    Status s = view_.GetTask(id, &task_);
    if (s.ok()) {
      OfferTask(id, task_);
    } else if (s.IsNotFound()) {
      // Index and task come from one snapshot and one WriteBatch, so this
      // is damage, not a race.
      Unreadable(id);
    } else if (s.IsCorruption()) {
      Unreadable(id);
    } else {
      Fail(s);
    }
  }

  // Reads pending_[from, to) with one scan of the `tasks` family.
  void ReadRun(size_t from, size_t to) {
    size_t next = from;
    const TaskId last = pending_[to - 1];
    Status s = view_.ScanTasks(
        ColumnFamily::kTasks, pending_[from],
        [&](TaskId id, TaskBytes& task, const Status& opened) {
          // Wanted ids the scan passed have no values.
          while (next < to && pending_[next] < id) {
            if (!Unreadable(pending_[next++])) return false;
          }
          if (next < to && pending_[next] == id) {
            ++next;
            bool go_on = opened.ok() ? OfferTask(id, task) : Unreadable(id);
            if (!go_on) return false;
          }
          return next < to && id < last;
        });
    if (!s.ok()) {
      Fail(s);
      return;
    }
    while (next < to && !done_) Unreadable(pending_[next++]);
  }

  // Reads pending_[from, to), descending ids, with one forward scan of the
  // `tasks` family (a task's values are keyed oldest first, so a forward
  // scan assembles them): the records are kept, then offered newest first.
  void ReadRunBackward(size_t from, size_t to) {
    enum : uint8_t { kMissing, kRead, kUnopened };
    const size_t n = to - from;
    run_.resize(std::max(run_.size(), n));
    run_read_.assign(n, kMissing);
    // Walks pending_ from its smallest id (to - 1) up to from.
    size_t next = to;
    Status s = view_.ScanTasks(
        ColumnFamily::kTasks, pending_[to - 1],
        [&](TaskId id, TaskBytes& task, const Status& opened) {
          while (next > from && pending_[next - 1] < id) --next;
          if (next > from && pending_[next - 1] == id) {
            --next;
            run_[next - from] = std::move(task);
            run_read_[next - from] = opened.ok() ? kRead : kUnopened;
          }
          return next > from && id < pending_[from];
        });
    if (!s.ok()) {
      Fail(s);
      return;
    }
    for (size_t k = 0; k < n && !done_; ++k) {
      if (run_read_[k] == kRead) {
        OfferTask(pending_[from + k], run_[k]);
      } else {
        Unreadable(pending_[from + k]);
      }
    }
  }

  void Fail(const Status& s) {
    status_ = s;
    done_ = true;
  }
  bool Stop() {
    done_ = true;
    return false;
  }

  const TaskStore::ReadView& view_;
  const ListSpec& spec_;
  const PageVisitor& visit_;
  PageInfo* info_;
  const bool check_type_;
  const bool check_record_;
  // Candidates whose records are not read yet, in the listing's order.
  std::vector<TaskId> pending_;
  // Reused for every point read.
  TaskBytes task_;
  // The records of a backward run, and whether each was read.
  std::vector<TaskBytes> run_;
  std::vector<uint8_t> run_read_;
  Status status_;
  size_t produced_ = 0;
  // Of kMaxPageBytes; at most that.
  size_t listed_bytes_ = 0;
  TaskId last_produced_ = 0;
  TaskId last_examined_ = 0;
  bool more_ = false;
  bool budget_spent_ = false;
  bool done_ = false;
};

// Scans one id-ordered index range, offering each id.
Status ScanIds(const TaskStore::ReadView& view, const std::string& prefix,
               const ListSpec& spec, PageBuilder* page) {
  return ScanInOrder(view, prefix, spec,
                     [&](std::string_view key, std::string_view) {
                       TaskId id = TrailingId(key);
                       return page->Examine(id) && page->Offer(id);
                     });
}

// The status-index ranges of `status`, one per type that has an entry in
// it, found by skipping from each type's range to the next: one seek per
// type, however many tasks each holds.
Status TypeRanges(const TaskStore::ReadView& view, TaskStatus status,
                  std::vector<std::string>* ranges) {
  const std::string prefix = StatusIndexPrefix(status);
  std::string from = prefix;
  for (;;) {
    std::string_view type;
    bool found = false;
    std::string key;
    Status s = view.Scan(ColumnFamily::kIndex, prefix, from,
                         [&](std::string_view k, std::string_view) {
                           key.assign(k);
                           return false;
                         });
    if (!s.ok()) return s;
    TaskStatus decoded;
    TaskId id;
    found = !key.empty() && DecodeStatusIndexKey(key, &decoded, &type, &id);
    if (!found) return Status::OK();
    ranges->push_back(StatusIndexPrefix(status, type));
    from = PrefixSuccessor(ranges->back());
    if (from.empty()) return Status::OK();
  }
}

// Offers the ids of several id-ordered ranges beyond spec.after, merged in
// the listing's order. Each range is cut at limit + 1 ids: the first
// limit + 1 ids of the union are among them.
Status MergeRanges(const TaskStore::ReadView& view,
                   const std::vector<std::string>& ranges, const ListSpec& spec,
                   PageBuilder* page) {
  std::vector<TaskId> ids;
  for (const std::string& prefix : ranges) {
    size_t taken = 0;
    Status s = ScanInOrder(view, prefix, spec,
                           [&](std::string_view key, std::string_view) {
                             ids.push_back(TrailingId(key));
                             return ++taken <= spec.limit;
                           });
    if (!s.ok()) return s;
  }
  if (spec.newest_first()) {
    std::sort(ids.rbegin(), ids.rend());
  } else {
    std::sort(ids.begin(), ids.end());
  }
  for (TaskId id : ids) {
    if (!page->Examine(id) || !page->Offer(id)) break;
  }
  return Status::OK();
}

// Ids a newest-first listing without filters reads with one forward scan.
constexpr TaskId kBackwardChunk = 256;

// The highest task id below `below` (0: any), or 0 when there is none: one
// backward seek.
Status HighestTaskBelow(const TaskStore::ReadView& view, TaskId below,
                        TaskId* highest) {
  *highest = 0;
  return view.ScanReverse(ColumnFamily::kTasks, "",
                          below == 0 ? "" : TaskPrefix(below),
                          [&](std::string_view key, std::string_view) {
                            TaskValueKind kind;
                            uint32_t number = 0;
                            if (!DecodeTaskKey(key, highest, &kind, &number)) {
                              *highest = 0;
                            }
                            return false;
                          });
}

// Offers the tasks below spec.after (0: all), newest first. A backward
// iterator steps key by key through every value of a task and is slow in
// RocksDB, so this finds the highest id below the bound with one backward
// seek, reads the ids of a chunk below it with one forward scan, offers them
// newest first, and repeats under the chunk.
Status NewestTasks(const TaskStore::ReadView& view, const ListSpec& spec,
                   PageBuilder* page) {
  struct Read {
    TaskId id;
    TaskBytes task;
    bool opened;
  };
  std::vector<Read> chunk;
  TaskId below = spec.after;
  for (;;) {
    TaskId top = 0;
    Status s = HighestTaskBelow(view, below, &top);
    if (!s.ok() || top == 0) return s;
    const TaskId bottom = top > kBackwardChunk ? top - kBackwardChunk + 1 : 1;
    chunk.clear();
    s = view.ScanTasks(ColumnFamily::kTasks, bottom,
                       [&](TaskId id, TaskBytes& task, const Status& opened) {
                         if (id > top) return false;
                         chunk.push_back({id, std::move(task), opened.ok()});
                         return true;
                       });
    if (!s.ok()) return s;
    for (auto it = chunk.rbegin(); it != chunk.rend(); ++it) {
      if (!page->Examine(it->id)) return Status::OK();
      bool go_on = it->opened ? page->OfferTask(it->id, it->task)
                              : page->Unreadable(it->id);
      if (!go_on) return Status::OK();
    }
    below = bottom;
  }
}

}  // namespace

Status ParseTaskQuery(const TaskQuery& query, ListSpec* spec) {
  if (query.limit == 0 || query.limit > kMaxPageSize) {
    return Status::InvalidArgument("limit must be between 1 and " +
                                   std::to_string(kMaxPageSize) + ", got " +
                                   std::to_string(query.limit));
  }
  if (query.type.size() > kMaxKeyString || query.group.size() > kMaxKeyString) {
    return Status::InvalidArgument("type or group is longer than " +
                                   std::to_string(kMaxKeyString) + " bytes");
  }
  if (query.status && static_cast<size_t>(*query.status) >= kTaskStatusCount) {
    return Status::InvalidArgument("status is out of range");
  }
  if (query.order != ListOrder::kOldestFirst &&
      query.order != ListOrder::kNewestFirst) {
    return Status::InvalidArgument("order is out of range");
  }
  if (query.created_from && query.created_before &&
      *query.created_before <= *query.created_from) {
    return Status::InvalidArgument("created_before must be after created_from");
  }
  spec->status = query.status;
  spec->type = query.type;
  spec->group = query.group;
  spec->created_from_us.reset();
  spec->created_before_us.reset();
  if (query.created_from) {
    spec->created_from_us = query.created_from->time_since_epoch().count();
  }
  if (query.created_before) {
    spec->created_before_us = query.created_before->time_since_epoch().count();
  }
  spec->order = query.order;
  spec->include_payload = query.include_payload;
  spec->limit = query.limit;
  spec->after = 0;
  if (query.cursor.empty()) return Status::OK();

  std::string_view cursor = query.cursor;
  uint64_t after = 0;
  uint64_t fingerprint = 0;
  if (cursor.size() != kCursorSize ||
      cursor.substr(0, kCursorVersion.size()) != kCursorVersion ||
      !ParseHex(cursor.substr(2, 16), &after) ||
      !ParseHex(cursor.substr(18, 8), &fingerprint)) {
    return Status::InvalidArgument("malformed cursor '" + query.cursor + "'");
  }
  if (fingerprint != FilterFingerprint(*spec)) {
    return Status::InvalidArgument(
        "the cursor belongs to a query with other filters");
  }
  spec->after = after;
  return Status::OK();
}

std::string EncodeCursor(const ListSpec& spec, TaskId last) {
  std::string cursor(kCursorVersion);
  cursor.reserve(kCursorSize);
  AppendHex(last, 16, &cursor);
  AppendHex(FilterFingerprint(spec), 8, &cursor);
  return cursor;
}

Status ListPage(const TaskStore::ReadView& view, const ListSpec& spec,
                const PageVisitor& visit, PageInfo* info) {
  *info = PageInfo{};
  PageBuilder page(view, spec, visit, info);
  // Nothing is above the largest id.
  if (!spec.newest_first() &&
      spec.after == std::numeric_limits<TaskId>::max()) {
    return page.Finish();
  }

  Status s;
  if (!spec.group.empty()) {
    std::string prefix = GroupIndexPrefix(view.StoredGroup(spec.group));
    s = ScanInOrder(
        view, prefix, spec, [&](std::string_view key, std::string_view value) {
          TaskId id = TrailingId(key);
          if (!page.Examine(id)) return false;
          if (spec.status &&
              (value.size() != 1 || static_cast<uint8_t>(value[0]) !=
                                        static_cast<uint8_t>(*spec.status))) {
            return true;
          }
          return page.Offer(id);
        });
  } else if (!spec.type.empty() && spec.status) {
    s = ScanIds(view, StatusIndexPrefix(*spec.status, spec.type), spec, &page);
  } else if (!spec.type.empty()) {
    s = ScanIds(view, TypeIndexPrefix(spec.type), spec, &page);
  } else if (spec.status) {
    std::vector<std::string> ranges;
    s = TypeRanges(view, *spec.status, &ranges);
    if (s.ok()) s = MergeRanges(view, ranges, spec, &page);
  } else if (spec.newest_first()) {
    s = NewestTasks(view, spec, &page);
  } else {
    s = view.ScanTasks(ColumnFamily::kTasks, spec.after + 1,
                       [&](TaskId id, TaskBytes& task, const Status& opened) {
                         if (!page.Examine(id)) return false;
                         return opened.ok() ? page.OfferTask(id, task)
                                            : page.Unreadable(id);
                       });
  }
  if (!s.ok()) return s;
  return page.Finish();
}

JsonPayloadTypes JsonPayloadTypes::With(std::string_view type) const {
  JsonPayloadTypes copy = *this;
  auto at = std::lower_bound(copy.types_.begin(), copy.types_.end(), type);
  if (at == copy.types_.end() || *at != type) {
    copy.types_.insert(at, std::string(type));
  }
  return copy;
}

bool JsonPayloadTypes::Contains(std::string_view type) const {
  auto at = std::lower_bound(types_.begin(), types_.end(), type);
  return at != types_.end() && *at == type;
}

PayloadFormat FormatOf(const TaskView& task, const ListSpec& spec,
                       const JsonPayloadTypes* json_types) {
  if (!spec.include_payload) return PayloadFormat::kOmitted;
  return FormatOf(task, json_types);
}

PayloadFormat FormatOf(const TaskView& task,
                       const JsonPayloadTypes* json_types) {
  if (json_types == nullptr || json_types->size() == 0) {
    return PayloadFormat::kBinary;
  }
  return json_types->FormatOf(TypeOf(task));
}

PageJsonWriter::PageJsonWriter(std::string* out) : writer_(out) {
  writer_.BeginObject();
  writer_.LiteralKey("tasks");
  writer_.BeginArray();
}

void PageJsonWriter::Add(const TaskView& task, PayloadFormat format) {
  WriteTaskJson(task, format, &writer_);
}

void PageJsonWriter::Finish(const PageInfo& info) {
  writer_.EndArray();
  writer_.LiteralKey("next_cursor");
  if (info.next_cursor.empty()) {
    writer_.Null();
  } else {
    writer_.String(info.next_cursor);
  }
  writer_.LiteralKey("unreadable");
  writer_.BeginArray();
  for (TaskId id : info.unreadable) writer_.Uint(id);
  writer_.EndArray();
  writer_.EndObject();
}

Status ListPageJson(const TaskStore::ReadView& view, const ListSpec& spec,
                    const JsonPayloadTypes* json_types, std::string* out) {
  PageJsonWriter json(out);
  PageInfo info;
  size_t written = 0;
  const size_t start = out->size();
  Status s = ListPage(
      view, spec,
      [&](const TaskBytes& task) {
        json.Add(task.view(), FormatOf(task.view(), spec, json_types));
        if (++written == 1) {
          // Size the buffer once, from the first task, instead of letting a
          // page of thousands regrow it (each regrowth copies it all).
          size_t per_task = out->size() - start + 16;
          out->reserve(out->size() + per_task * (spec.limit - 1) + 128);
        }
      },
      &info);
  if (!s.ok()) return s;
  json.Finish(info);
  return Status::OK();
}

Status OldestWithStatus(const TaskStore::ReadView& view, TaskStatus status,
                        std::optional<TaskId>* id) {
  id->reset();
  std::vector<std::string> ranges;
  Status s = TypeRanges(view, status, &ranges);
  for (size_t i = 0; s.ok() && i < ranges.size(); ++i) {
    s = view.Scan(ColumnFamily::kIndex, ranges[i], "",
                  [&](std::string_view key, std::string_view) {
                    TaskId first = TrailingId(key);
                    if (!*id || first < **id) *id = first;
                    return false;
                  });
  }
  return s;
}

Status NextDue(const TaskStore::ReadView& view, std::optional<TaskId>* id) {
  id->reset();
  Status decoded;
  Status s = view.Scan(
      ColumnFamily::kIndex, DueIndexPrefix(), "",
      [&](std::string_view, std::string_view value) {
        TaskId due = 0;
        if (DecodeIdValue(value, &due)) {
          *id = due;
        } else {
          decoded = Status::Corruption("a due entry holds a malformed value");
        }
        return false;
      });
  return s.ok() ? decoded : s;
}

Status ReadTask(const TaskStore::ReadView& view, TaskId id, TaskBytes* task) {
  Status s = view.GetTask(id, task);
  if (!s.ok()) return s;
  return task->Verify(id);
}

Status ReadFailureHistory(const TaskStore::ReadView& view, TaskId id,
                          FailureHistory* history) {
  TaskBytes task;
  Status s = ReadTask(view, id, &task);
  if (!s.ok()) return s;
  const fb::TaskState& state = *task.view().state;
  history->id = id;
  history->status = StatusOf(state);
  history->attempts = state.attempts();
  history->max_attempts = state.max_attempts();
  history->last_error =
      state.last_error() != nullptr ? state.last_error()->str() : "";
  history->failures.clear();
  AppendFailures(task.view(), &history->failures);
  return Status::OK();
}

void DisablePerfCountersOnThisThread() {
  if (rocksdb::GetPerfLevel() != rocksdb::PerfLevel::kDisable) {
    rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
  }
}

}  // namespace spool::storage
