// spool: look at a queue's directory, and change a queue no process runs.
//
//   spool [--config FILE] [--set section.key=value]... COMMAND ...
//   spool stats DIR [--json]
//   spool list DIR [--status S] [--type T] [--group G] [--limit N]
//                  [--cursor C] [--json]
//   spool show DIR ID [--json]
//   spool history DIR ID [--json]
//   spool export DIR
//   spool verify DIR [--json]
//   spool config --print [FILE]
//   spool retry DIR ID | cancel DIR ID | purge DIR [--status S]...
//                                              [--older-than SECONDS]
//
// The read commands open DIR with Runtime::OpenReadOnly, so they work on a
// queue another process holds and runs, and write nothing into DIR. The
// mutations open it with Runtime::Open and fail with Busy while another
// process holds it. Exit codes: 0 ok, 1 not found or damaged (or any other
// failure to read or change the store), 2 usage. docs/cli.md has the rest.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <spool/backup.h>
#include <spool/config.h>
#include <spool/runtime.h>

#include "storage/json_writer.h"
#include "storage/record_json.h"
#include "storage/task_store.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

// Every message is one line on stderr, starting with "spool: ".
int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "spool: %s\n", message.c_str());
  return code;
}

int FailStatus(const spool::Status& s) {
  return Fail(kExitFailed, s.ToString());
}

void Print(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
}

std::string Json(std::string_view text) {
  std::string out;
  spool::storage::AppendJsonString(text, &out);
  return out;
}

// What every command that opens DIR shares.
struct Common {
  std::string config_path;
  std::vector<std::string> overrides;
  std::string secondary_dir;
  std::string dir;
  bool json = false;
};

// The options to open common.dir with: the config file (or the defaults),
// the overrides, then DIR as storage.path. A bad config is a usage error.
int LoadFor(const Common& common, spool::Options* options) {
  // The path is required; DIR gives it (config --print has none: the
  // documented default).
  options->path = common.dir.empty() ? "./spool-data" : common.dir;
  spool::Status s =
      common.config_path.empty()
          ? spool::ParseOptions("", "--set", common.overrides, options)
          : spool::LoadOptions(common.config_path, common.overrides, options);
  if (!s.ok()) return Fail(kExitUsage, s.ToString());
  if (!common.dir.empty()) options->path = common.dir;
  options->secondary_path = common.secondary_dir;
  // The tool's own output says what went wrong; spool's warnings would only
  // repeat it.
  options->log_level = spool::LogLevel::kError;
  return kExitOk;
}

int OpenReadOnly(const Common& common, std::unique_ptr<spool::Runtime>* runtime,
                 spool::ReadOnlyScope scope = spool::ReadOnlyScope::kAll) {
  spool::Options options;
  if (int rc = LoadFor(common, &options); rc != kExitOk) return rc;
  options.read_only_scope = scope;
  spool::Status s = spool::Runtime::OpenReadOnly(options, runtime);
  if (!s.ok()) return FailStatus(s);
  return kExitOk;
}

int OpenForWriting(const Common& common,
                   std::unique_ptr<spool::Runtime>* runtime) {
  spool::Options options;
  if (int rc = LoadFor(common, &options); rc != kExitOk) return rc;
  // A mutation must not create a queue where there was none.
  std::error_code error;
  if (!std::filesystem::exists(options.path, error)) {
    return Fail(kExitFailed, "NotFound: storage directory " + options.path +
                                 " does not exist");
  }
  if (!std::filesystem::exists(std::filesystem::path(options.path) / "CURRENT",
                               error)) {
    return Fail(kExitFailed, "InvalidArgument: storage directory " +
                                 options.path +
                                 " is not a spool store (it holds no RocksDB "
                                 "database)");
  }
  spool::Status s = spool::Runtime::Open(options, runtime);
  if (!s.ok()) return FailStatus(s);
  return kExitOk;
}

// A task id: decimal digits, 1..2^64-1. CLI11 checks the flag values;
// this one is positional and checked here for the one-line message.
std::optional<spool::TaskId> ParseId(const std::string& text) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  spool::TaskId id = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    spool::TaskId next = id * 10 + static_cast<spool::TaskId>(c - '0');
    if (next / 10 != id) return std::nullopt;
    id = next;
  }
  if (id == 0) return std::nullopt;
  return id;
}

int BadId(const std::string& text) {
  return Fail(kExitUsage, "task id '" + text +
                              "' is not a task id (a decimal number from 1)");
}

std::string StatusCountsJson(const spool::StatusCounts& counts,
                             uint64_t* total) {
  std::string out = "{";
  for (size_t i = 0; i < spool::kTaskStatusCount; ++i) {
    if (i > 0) out += ",";
    out += Json(spool::TaskStatusName(static_cast<spool::TaskStatus>(i)));
    out += ":" + std::to_string(counts.by_status[i]);
    if (total != nullptr) *total += counts.by_status[i];
  }
  return out + "}";
}

uint64_t DirectoryBytes(const std::string& dir) {
  uint64_t bytes = 0;
  std::error_code error;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, error);
       !error && it != std::filesystem::recursive_directory_iterator();
       it.increment(error)) {
    std::error_code size_error;
    if (it->is_regular_file(size_error)) {
      uintmax_t size = it->file_size(size_error);
      if (!size_error) bytes += size;
    }
  }
  return bytes;
}

int Stats(const Common& common) {
  std::unique_ptr<spool::Runtime> runtime;
  // The counts alone: on a live queue the open replays only the holder's
  // writes of them, not its whole unflushed log (docs/cli.md).
  if (int rc = OpenReadOnly(common, &runtime, spool::ReadOnlyScope::kCounts);
      rc != kExitOk) {
    return rc;
  }
  auto by_status_future = runtime->CountByStatus();
  auto by_type_future = runtime->CountByType();
  const auto& by_status = by_status_future.Wait();
  if (!by_status.ok()) return FailStatus(by_status.status());
  const auto& by_type = by_type_future.Wait();
  if (!by_type.ok()) return FailStatus(by_type.status());
  uint64_t bytes = DirectoryBytes(common.dir);
  if (common.json) {
    uint64_t total = 0;
    std::string out = "{\"path\":" + Json(common.dir) + ",\"schema_version\":" +
                      std::to_string(spool::storage::kSchemaVersion) +
                      ",\"size_bytes\":" + std::to_string(bytes) +
                      ",\"by_status\":" + StatusCountsJson(*by_status, &total);
    out += ",\"by_type\":{";
    bool first = true;
    for (const auto& [type, counts] : *by_type) {
      if (!first) out += ",";
      first = false;
      out += Json(type) + ":" + StatusCountsJson(counts, nullptr);
    }
    out += "},\"total\":" + std::to_string(total) + "}\n";
    Print(out);
    return kExitOk;
  }
  uint64_t total = 0;
  for (uint64_t n : by_status->by_status) total += n;
  std::printf("path            %s\n", common.dir.c_str());
  std::printf("schema version  %u\n", spool::storage::kSchemaVersion);
  std::printf("size            %llu bytes\n",
              static_cast<unsigned long long>(bytes));
  std::printf("tasks           %llu\n", static_cast<unsigned long long>(total));
  for (size_t i = 0; i < spool::kTaskStatusCount; ++i) {
    std::printf("  %-16s%llu\n",
                spool::TaskStatusName(static_cast<spool::TaskStatus>(i)),
                static_cast<unsigned long long>(by_status->by_status[i]));
  }
  for (const auto& [type, counts] : *by_type) {
    std::printf("type %s:", type.c_str());
    for (size_t i = 0; i < spool::kTaskStatusCount; ++i) {
      if (counts.by_status[i] == 0) continue;
      std::printf(" %s=%llu",
                  spool::TaskStatusName(static_cast<spool::TaskStatus>(i)),
                  static_cast<unsigned long long>(counts.by_status[i]));
    }
    std::printf("\n");
  }
  return kExitOk;
}

struct ListFlags {
  std::string status;
  std::string type;
  std::string group;
  size_t limit = 100;
  std::string cursor;
  bool newest_first = false;
  bool without_payload = false;
};

int MakeQuery(const ListFlags& flags, spool::TaskQuery* query) {
  if (!flags.status.empty()) {
    query->status = spool::ParseTaskStatus(flags.status);
    if (!query->status) {
      return Fail(kExitUsage, "--status: '" + flags.status +
                                  "' is not a task status (pending, waiting, "
                                  "running, succeeded, failed, cancelled, "
                                  "...)");
    }
  }
  query->type = flags.type;
  query->group = flags.group;
  query->limit = flags.limit;
  query->cursor = flags.cursor;
  if (flags.newest_first) query->order = spool::ListOrder::kNewestFirst;
  query->include_payload = !flags.without_payload;
  return kExitOk;
}

int List(const Common& common, const ListFlags& flags) {
  spool::TaskQuery query;
  if (int rc = MakeQuery(flags, &query); rc != kExitOk) return rc;
  std::unique_ptr<spool::Runtime> runtime;
  if (int rc = OpenReadOnly(common, &runtime); rc != kExitOk) return rc;
  if (common.json) {
    const auto& page = runtime->ListTasksJson(query).Wait();
    if (!page.ok()) {
      return page.status().IsInvalidArgument()
                 ? Fail(kExitUsage, page.status().ToString())
                 : FailStatus(page.status());
    }
    Print(*page);
    Print("\n");
    return kExitOk;
  }
  // The table shows no payload: none is read.
  query.include_payload = false;
  const auto& page = runtime->ListTasks(query).Wait();
  if (!page.ok()) {
    return page.status().IsInvalidArgument()
               ? Fail(kExitUsage, page.status().ToString())
               : FailStatus(page.status());
  }
  std::printf("%-10s %-10s %-20s %-9s %s\n", "ID", "STATUS", "TYPE", "ATTEMPTS",
              "GROUP");
  for (const spool::TaskInfo& task : page->tasks) {
    std::printf("%-10llu %-10s %-20s %4u/%-4u %s\n",
                static_cast<unsigned long long>(task.id),
                spool::TaskStatusName(task.status), task.type.c_str(),
                task.attempts, task.max_attempts, task.group.c_str());
  }
  for (spool::TaskId id : page->unreadable) {
    std::printf("%-10llu (unreadable: its record fails verification)\n",
                static_cast<unsigned long long>(id));
  }
  if (!page->next_cursor.empty()) {
    std::printf("next page: --cursor %s\n", page->next_cursor.c_str());
  }
  return kExitOk;
}

// For the commands about one task: its id, checked, and DIR opened
// read-only, without the index (which they do not read).
int OpenForTask(const Common& common, const std::string& id_text,
                spool::TaskId* id, std::unique_ptr<spool::Runtime>* runtime) {
  std::optional<spool::TaskId> parsed = ParseId(id_text);
  if (!parsed) return BadId(id_text);
  *id = *parsed;
  return OpenReadOnly(common, runtime, spool::ReadOnlyScope::kTasks);
}

// A task's result (TaskContext::SetResult): its size and, when short, its
// bytes as a JSON string, so that a binary result cannot garble the
// terminal; --json shows every byte (in base64 if need be).
void PrintResult(const std::string& result) {
  constexpr size_t kShownBytes = 256;
  if (result.size() <= kShownBytes) {
    std::printf("result       %zu bytes %s\n", result.size(),
                Json(result).c_str());
  } else {
    std::printf("result       %zu bytes (--json shows it)\n", result.size());
  }
}

int Show(const Common& common, const std::string& id_text) {
  spool::TaskId id = 0;
  std::unique_ptr<spool::Runtime> runtime;
  if (int rc = OpenForTask(common, id_text, &id, &runtime); rc != kExitOk) {
    return rc;
  }
  if (common.json) {
    const auto& task = runtime->GetTaskJson(id).Wait();
    if (!task.ok()) return FailStatus(task.status());
    Print(*task);
    Print("\n");
    return kExitOk;
  }
  const auto& task = runtime->GetTask(id).Wait();
  if (!task.ok()) return FailStatus(task.status());
  std::printf("id           %llu\n", static_cast<unsigned long long>(task->id));
  std::printf("type         %s\n", task->type.c_str());
  std::printf("status       %s\n", spool::TaskStatusName(task->status));
  std::printf("priority     %d\n", task->priority);
  std::printf("attempts     %u of %u\n", task->attempts, task->max_attempts);
  std::printf("created      %s\n",
              spool::FormatRfc3339(task->created_at).c_str());
  std::printf("updated      %s\n",
              spool::FormatRfc3339(task->updated_at).c_str());
  if (task->next_attempt_at) {
    std::printf("next attempt %s\n",
                spool::FormatRfc3339(*task->next_attempt_at).c_str());
  }
  if (!task->group.empty())
    std::printf("group        %s\n", task->group.c_str());
  if (!task->last_error.empty()) {
    std::printf("last error   %s\n", task->last_error.c_str());
  }
  if (task->snoozes > 0) std::printf("snoozes      %u\n", task->snoozes);
  if (task->interrupted_attempts > 0) {
    std::printf("interrupted  %u of the attempts (a crash stopped them)\n",
                task->interrupted_attempts);
  }
  if (task->result) PrintResult(*task->result);
  std::printf("payload      %zu bytes\n", task->payload.size());
  return kExitOk;
}

int History(const Common& common, const std::string& id_text) {
  spool::TaskId id = 0;
  std::unique_ptr<spool::Runtime> runtime;
  if (int rc = OpenForTask(common, id_text, &id, &runtime); rc != kExitOk) {
    return rc;
  }
  const auto& history = runtime->GetFailureHistory(id).Wait();
  if (!history.ok()) return FailStatus(history.status());
  if (common.json) {
    std::string out =
        "{\"id\":" + std::to_string(history->id) +
        ",\"status\":" + Json(spool::TaskStatusName(history->status)) +
        ",\"attempts\":" + std::to_string(history->attempts) +
        ",\"max_attempts\":" + std::to_string(history->max_attempts) +
        ",\"last_error\":" +
        (history->last_error.empty() ? std::string("null")
                                     : Json(history->last_error)) +
        ",\"failures\":[";
    for (size_t i = 0; i < history->failures.size(); ++i) {
      const auto& failure = history->failures[i];
      if (i > 0) out += ",";
      out += "{\"attempt\":" + std::to_string(failure.attempt) +
             ",\"at\":" + Json(spool::FormatRfc3339(failure.at)) +
             ",\"error\":" + Json(failure.error) + "}";
    }
    out += "]}\n";
    Print(out);
    return kExitOk;
  }
  std::printf("task %llu: %s, %u of %u attempts\n",
              static_cast<unsigned long long>(history->id),
              spool::TaskStatusName(history->status), history->attempts,
              history->max_attempts);
  for (const auto& failure : history->failures) {
    std::printf("  attempt %u at %s: %s\n", failure.attempt,
                spool::FormatRfc3339(failure.at).c_str(),
                failure.error.c_str());
  }
  return kExitOk;
}

// Splits the "tasks" array of a ListTasksJson page into one line per task,
// and finds its next_cursor and whether it lists unreadable tasks. The
// page's strings escape every control character, so a task has no newline.
bool SplitPage(std::string_view page, std::string* lines, std::string* cursor,
               bool* unreadable) {
  constexpr std::string_view kHead = "{\"tasks\":[";
  if (page.substr(0, kHead.size()) != kHead) return false;
  size_t i = kHead.size();
  size_t start = i;
  int depth = 0;
  bool in_string = false;
  for (; i < page.size(); ++i) {
    char c = page[i];
    if (in_string) {
      // Most of a page is strings: jump to the next quote (memchr), which
      // ends the string unless an odd number of backslashes escape it. The
      // opening quote bounds the count.
      const void* quote = std::memchr(page.data() + i, '"', page.size() - i);
      if (quote == nullptr) return false;
      i = static_cast<size_t>(static_cast<const char*>(quote) - page.data());
      size_t slashes = 0;
      while (page[i - 1 - slashes] == '\\') ++slashes;
      in_string = slashes % 2 == 1;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (depth == 0) break;  // the end of the tasks array
      --depth;
      if (depth == 0) {
        lines->append(page.substr(start, i + 1 - start));
        lines->push_back('\n');
      }
    } else if (c == ',' && depth == 0) {
      start = i + 1;
    }
  }
  constexpr std::string_view kCursor = "\"next_cursor\":";
  size_t at = page.find(kCursor, i);
  if (at == std::string_view::npos) return false;
  at += kCursor.size();
  cursor->clear();
  if (page.substr(at, 1) == "\"") {
    size_t end = page.find('"', at + 1);
    if (end == std::string_view::npos) return false;
    cursor->assign(page.substr(at + 1, end - at - 1));
  }
  *unreadable = page.find("\"unreadable\":[]", at) == std::string_view::npos;
  return true;
}

int Export(const Common& common, size_t page_size) {
  std::unique_ptr<spool::Runtime> runtime;
  // Every task in id order reads the tasks alone: on a live queue the open
  // then replays none of the holder's index writes (docs/cli.md).
  if (int rc = OpenReadOnly(common, &runtime, spool::ReadOnlyScope::kTasks);
      rc != kExitOk) {
    return rc;
  }
  spool::TaskQuery query;
  query.limit = page_size;
  std::string lines;
  bool damaged = false;
  // One page in memory at a time, and the next one asked for before this
  // one is written, so that the reader and the output overlap.
  auto next = runtime->ListTasksJson(query);
  while (true) {
    const auto& page = next.Wait();
    if (!page.ok()) return FailStatus(page.status());
    lines.clear();
    bool unreadable = false;
    if (!SplitPage(*page, &lines, &query.cursor, &unreadable)) {
      return Fail(kExitFailed, "export: a page of " + common.dir +
                                   " is not the expected JSON");
    }
    damaged |= unreadable;
    bool more = !query.cursor.empty();
    if (more) next = runtime->ListTasksJson(query);
    Print(lines);
    if (!more) break;
  }
  if (std::fflush(stdout) != 0) {
    return Fail(kExitFailed,
                std::string("export: writing stdout: ") + std::strerror(errno));
  }
  if (damaged) {
    return Fail(kExitFailed, "export: " + common.dir +
                                 " has unreadable task records, left out "
                                 "(run spool verify " +
                                 common.dir + ")");
  }
  return kExitOk;
}

int Verify(const Common& common) {
  std::unique_ptr<spool::Runtime> runtime;
  if (int rc = OpenReadOnly(common, &runtime); rc != kExitOk) return rc;
  const auto& report = runtime->CheckConsistency().Wait();
  if (!report.ok()) return FailStatus(report.status());
  if (common.json) {
    std::string out = "{\"path\":" + Json(common.dir) +
                      ",\"ok\":" + (report->ok() ? "true" : "false") +
                      ",\"tasks\":" + std::to_string(report->tasks) +
                      ",\"unreadable\":" + std::to_string(report->unreadable) +
                      ",\"unreadable_ids\":[";
    for (size_t i = 0; i < report->unreadable_ids.size(); ++i) {
      if (i > 0) out += ",";
      out += std::to_string(report->unreadable_ids[i]);
    }
    out +=
        "],\"index_mismatches\":" + std::to_string(report->index_mismatches) +
        ",\"set_aside\":" + std::to_string(report->set_aside) +
        ",\"problems\":[";
    for (size_t i = 0; i < report->problems.size(); ++i) {
      if (i > 0) out += ",";
      out += Json(report->problems[i]);
    }
    out += "]}\n";
    Print(out);
  } else {
    std::printf(
        "%s: %llu tasks, %llu unreadable, %llu index mismatches, "
        "%llu set aside: %s\n",
        common.dir.c_str(), static_cast<unsigned long long>(report->tasks),
        static_cast<unsigned long long>(report->unreadable),
        static_cast<unsigned long long>(report->index_mismatches),
        static_cast<unsigned long long>(report->set_aside),
        report->ok() ? "ok" : "DAMAGED");
    for (const std::string& problem : report->problems) {
      std::printf("  %s\n", problem.c_str());
    }
  }
  if (!report->ok()) {
    std::fflush(stdout);
    return Fail(kExitFailed, "verify: " + common.dir + " is damaged");
  }
  return kExitOk;
}

int PrintConfig(const Common& common, const std::string& file) {
  Common with_file = common;
  if (!file.empty()) with_file.config_path = file;
  // The file and the overrides alone: not LoadFor, whose quieter log level
  // is the tool's own, not the config's.
  spool::Options options;
  options.path = "./spool-data";
  spool::Status loaded =
      with_file.config_path.empty()
          ? spool::ParseOptions("", "--set", with_file.overrides, &options)
          : spool::LoadOptions(with_file.config_path, with_file.overrides,
                               &options);
  if (!loaded.ok()) return Fail(kExitUsage, loaded.ToString());
  spool::ConfigSources sources;
  spool::Status s = spool::LoadConfigSources(with_file.config_path,
                                             with_file.overrides, &sources);
  if (!s.ok()) return Fail(kExitUsage, s.ToString());
  Print(spool::DescribeOptions(options, sources));
  return kExitOk;
}

int Mutate(const Common& common, const std::string& command,
           const std::string& id_text) {
  std::optional<spool::TaskId> id = ParseId(id_text);
  if (!id) return BadId(id_text);
  std::unique_ptr<spool::Runtime> runtime;
  if (int rc = OpenForWriting(common, &runtime); rc != kExitOk) return rc;
  if (command == "cancel") {
    const auto& status = runtime->Cancel(*id).Wait();
    if (!status.ok()) return FailStatus(status.status());
    std::printf("task %llu: %s\n", static_cast<unsigned long long>(*id),
                spool::TaskStatusName(*status));
  } else {
    // Retry checks that the task's type has a handler; this process runs
    // none (it never calls Start), so it registers one that is never run.
    const auto& task = runtime->GetTask(*id).Wait();
    if (!task.ok()) return FailStatus(task.status());
    spool::Status s = runtime->RegisterHandler(
        task->type, [](spool::TaskContext&) { return spool::Status::OK(); });
    if (!s.ok()) return FailStatus(s);
    const auto& retried = runtime->Retry(*id).Wait();
    if (!retried.ok()) return FailStatus(retried.status());
    std::printf("task %llu: pending again\n",
                static_cast<unsigned long long>(*id));
  }
  spool::Status closed = runtime->Close().Wait().status();
  if (!closed.ok()) return FailStatus(closed);
  return kExitOk;
}

int Purge(const Common& common, const std::vector<std::string>& statuses,
          int64_t older_than_seconds) {
  spool::PurgeOptions options;
  if (!statuses.empty()) {
    options.statuses.clear();
    for (const std::string& name : statuses) {
      std::optional<spool::TaskStatus> status = spool::ParseTaskStatus(name);
      if (!status) {
        return Fail(kExitUsage,
                    "--status: '" + name + "' is not a task status");
      }
      options.statuses.push_back(*status);
    }
  }
  options.older_than = std::chrono::seconds(older_than_seconds);
  std::unique_ptr<spool::Runtime> runtime;
  if (int rc = OpenForWriting(common, &runtime); rc != kExitOk) return rc;
  const auto& deleted = runtime->Purge(options).Wait();
  if (!deleted.ok()) {
    return deleted.status().IsInvalidArgument()
               ? Fail(kExitUsage, deleted.status().ToString())
               : FailStatus(deleted.status());
  }
  std::printf("purged %llu tasks\n", static_cast<unsigned long long>(*deleted));
  spool::Status closed = runtime->Close().Wait().status();
  if (!closed.ok()) return FailStatus(closed);
  return kExitOk;
}

std::string BackupJson(const spool::BackupInfo& info) {
  std::string created;
  spool::storage::AppendRfc3339(info.created_unix_seconds * 1'000'000,
                                &created);
  return "{\"id\":" + std::to_string(info.id) +
         ",\"created_at\":" + Json(created) +
         ",\"size_bytes\":" + std::to_string(info.size_bytes) +
         ",\"files\":" + std::to_string(info.files) +
         ",\"sequence\":" + std::to_string(info.sequence) +
         ",\"format_version\":" + std::to_string(info.format_version) + "}";
}

std::string BackupLine(const spool::BackupInfo& info) {
  std::string created;
  spool::storage::AppendRfc3339(info.created_unix_seconds * 1'000'000,
                                &created);
  return "backup " + std::to_string(info.id) + ": " + created + ", " +
         std::to_string(info.files) + " files, " +
         std::to_string(info.size_bytes) + " bytes, sequence " +
         std::to_string(info.sequence) + ", format " +
         std::to_string(info.format_version);
}

// spool backup DIR DEST: a backup of a store no process holds (a running
// spoold makes its own: POST /v1/backup).
int Backup(const Common& common, const std::string& destination) {
  std::unique_ptr<spool::Runtime> runtime;
  if (int rc = OpenForWriting(common, &runtime); rc != kExitOk) return rc;
  const auto& made = runtime->BackupTo(destination).Wait();
  spool::Status closed = runtime->Close().Wait().status();
  if (!made.ok()) return FailStatus(made.status());
  if (!closed.ok()) return FailStatus(closed);
  Print(common.json ? BackupJson(*made) + "\n"
                    : BackupLine(*made) + " (" + destination + ")\n");
  return kExitOk;
}

int Backups(const Common& common, const std::string& destination) {
  std::vector<spool::BackupInfo> backups;
  spool::Status s = spool::ListBackups(destination, &backups);
  if (!s.ok()) return FailStatus(s);
  std::string out;
  if (common.json) {
    out = "[";
    for (size_t i = 0; i < backups.size(); ++i) {
      out += (i > 0 ? "," : "") + BackupJson(backups[i]);
    }
    out += "]\n";
  } else {
    for (const spool::BackupInfo& info : backups)
      out += BackupLine(info) + "\n";
    if (backups.empty()) out = "no backups in " + destination + "\n";
  }
  Print(out);
  return kExitOk;
}

int Restore(const std::string& destination, const std::string& dir,
            const std::optional<uint32_t>& id) {
  spool::RestoreOptions options;
  options.id = id;
  spool::BackupInfo restored;
  spool::Status s = spool::RestoreBackup(destination, dir, options, &restored);
  if (!s.ok()) return FailStatus(s);
  Print("restored " + BackupLine(restored) + " of " + destination + " into " +
        dir + "\n");
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "spool: inspect a spool queue's directory (also while another process "
      "runs it); retry, cancel or purge tasks of one no process holds, back "
      "it up and restore it.",
      "spool"};
  app.require_subcommand(1);
  Common common;
  app.add_option("--config", common.config_path,
                 "TOML config file for the options used to open DIR (e.g. "
                 "storage.encryption_key_file)");
  app.add_option("--set", common.overrides,
                 "section.key=value override, repeatable, applied in order")
      ->allow_extra_args(false);  // one value per --set
  app.add_option("--secondary-dir", common.secondary_dir,
                 "where a read-only open keeps RocksDB's secondary files "
                 "(default: a temporary directory, removed on exit)");

  auto add_dir = [&common](CLI::App* command) {
    command->add_option("DIR", common.dir, "the queue's storage directory")
        ->required();
  };
  auto add_json = [&common](CLI::App* command) {
    command->add_flag("--json", common.json, "write JSON");
  };

  CLI::App* stats = app.add_subcommand("stats", "counts by status and type");
  add_dir(stats);
  add_json(stats);

  ListFlags list_flags;
  CLI::App* list = app.add_subcommand("list", "one page of tasks, by id");
  add_dir(list);
  list->add_option("--status", list_flags.status, "only tasks in this status");
  list->add_option("--type", list_flags.type, "only tasks of this type");
  list->add_option("--group", list_flags.group, "only tasks of this group");
  list->add_option("--limit", list_flags.limit, "tasks per page")
      ->check(CLI::Range(size_t{1}, spool::kMaxPageSize));
  list->add_option("--cursor", list_flags.cursor,
                   "the next-page cursor of the previous page");
  list->add_flag("--newest", list_flags.newest_first,
                 "newest first (a cursor continues in the same order)");
  list->add_flag("--no-payload", list_flags.without_payload,
                 "leave payloads out of --json");
  add_json(list);

  std::string id;
  CLI::App* show = app.add_subcommand("show", "one task");
  add_dir(show);
  show->add_option("ID", id, "task id")->required();
  add_json(show);

  CLI::App* history = app.add_subcommand("history", "a task's failed attempts");
  add_dir(history);
  history->add_option("ID", id, "task id")->required();
  add_json(history);

  size_t page_size = 1000;
  CLI::App* export_command = app.add_subcommand(
      "export", "every task as JSON lines, one per task, in id order");
  add_dir(export_command);
  export_command
      ->add_option("--page-size", page_size,
                   "tasks read per page (memory is bounded by one page)")
      ->check(CLI::Range(size_t{1}, spool::kMaxPageSize));

  CLI::App* verify = app.add_subcommand(
      "verify", "check every record and the index; exit 1 on damage");
  add_dir(verify);
  add_json(verify);

  bool print = false;
  std::string config_file;
  CLI::App* config = app.add_subcommand(
      "config", "print the effective configuration (--print [FILE])");
  config->add_flag("--print", print, "print the effective config as TOML")
      ->required();
  config->add_option("FILE", config_file, "a config file (else --config)");

  CLI::App* retry =
      app.add_subcommand("retry", "run a failed or cancelled task again");
  add_dir(retry);
  retry->add_option("ID", id, "task id")->required();
  CLI::App* cancel = app.add_subcommand("cancel", "cancel a task");
  add_dir(cancel);
  cancel->add_option("ID", id, "task id")->required();

  std::vector<std::string> purge_statuses;
  int64_t older_than = 0;
  CLI::App* purge = app.add_subcommand("purge", "delete finished tasks");
  add_dir(purge);
  purge
      ->add_option(
          "--status", purge_statuses,
          "finished statuses to delete, repeatable (default: succeeded)")
      ->allow_extra_args(false);
  purge
      ->add_option("--older-than", older_than,
                   "only tasks finished at least this many seconds ago")
      ->check(CLI::NonNegativeNumber);

  std::string destination;
  CLI::App* backup = app.add_subcommand(
      "backup", "back up DIR (no process may hold it) into DEST");
  add_dir(backup);
  backup->add_option("DEST", destination, "the backup directory")->required();
  add_json(backup);
  CLI::App* backups =
      app.add_subcommand("backups", "list the backups in DEST, oldest first");
  backups->add_option("DEST", destination, "the backup directory")->required();
  add_json(backups);
  std::optional<uint32_t> restore_id;
  CLI::App* restore = app.add_subcommand(
      "restore", "restore a backup of DEST into DIR (new or empty)");
  restore->add_option("DEST", destination, "the backup directory")->required();
  add_dir(restore);
  restore->add_option("--id", restore_id, "which backup (default: the newest)")
      ->check(CLI::Range(uint32_t{1}, UINT32_MAX));

  for (CLI::App* command : app.get_subcommands({})) command->fallthrough();

  // The first word that is not a flag or a flag's value names the command;
  // CLI11 would only say that a subcommand is required.
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--config" || arg == "--set" || arg == "--secondary-dir") {
      ++i;
      continue;
    }
    if (arg.empty() || arg[0] == '-') continue;
    std::string known;
    bool found = false;
    for (CLI::App* command : app.get_subcommands({})) {
      known += (known.empty() ? "" : ", ") + command->get_name();
      found |= command->get_name() == arg;
    }
    if (!found) {
      return Fail(kExitUsage, "unknown command '" + std::string(arg) +
                                  "' (commands: " + known + ")");
    }
    break;
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    std::replace(what.begin(), what.end(), '\n', ' ');
    return Fail(kExitUsage, what + " (see spool --help)");
  }

  if (*stats) return Stats(common);
  if (*list) return List(common, list_flags);
  if (*show) return Show(common, id);
  if (*history) return History(common, id);
  if (*export_command) return Export(common, page_size);
  if (*verify) return Verify(common);
  if (*config) return PrintConfig(common, config_file);
  if (*retry) return Mutate(common, "retry", id);
  if (*cancel) return Mutate(common, "cancel", id);
  if (*purge) return Purge(common, purge_statuses, older_than);
  if (*backup) return Backup(common, destination);
  if (*backups) return Backups(common, destination);
  if (*restore) return Restore(destination, common.dir, restore_id);
  return Fail(kExitUsage, "no command (see spool --help)");
}
