// The JSON of spoold's REST API (docs/server.md): request bodies into spool
// calls, spool's results into response bodies. Request parsing is strict:
// an unknown field or a value of the wrong type is an InvalidArgument whose
// message starts with the field's name, e.g. `tasks[1].priority: expected
// an integer`. Bodies are parsed with nlohmann-json.
//
// Thread safety: free functions on values; safe to call concurrently.

#ifndef SPOOL_SERVER_API_JSON_H_
#define SPOOL_SERVER_API_JSON_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <spool/backup.h>
#include <spool/query.h>
#include <spool/status.h>
#include <spool/task.h>

namespace spool::http {

// The body of POST /v1/tasks: {type, payload, payload_base64, priority,
// delay_ms | run_at, group, dedup_key, idempotency_key, depends_on, retry,
// timeout_ms, on_dependency_failure}. `type` is required. A string payload
// is stored as its bytes; any other JSON value as its compact text.
// REQUIRES: spec != nullptr.
Status ParseTaskRequest(std::string_view body, TaskSpec* spec);

// The body of POST /v1/tasks:batch: {"tasks": [<task>, ...]}, at least one.
// REQUIRES: specs != nullptr.
Status ParseBatchRequest(std::string_view body, std::vector<TaskSpec>* specs);

// The body of POST /v1/tasks/{id}/retry: empty, {} or {"retry": <policy>}.
// REQUIRES: policy != nullptr.
Status ParseRetryRequest(std::string_view body,
                         std::optional<RetryPolicy>* policy);

// The body of POST /v1/purge: empty, {} or {"statuses": [...],
// "older_than_ms": N, "types": [...], "batch_size": N}.
// REQUIRES: options != nullptr.
Status ParsePurgeRequest(std::string_view body, PurgeOptions* options);

// The query of GET /v1/tasks and of /v1/events' listing: status, type,
// group, created_from and created_before (RFC 3339), order (oldest or
// newest), payload (true or false), limit, cursor (URL-decoded values). Unknown
// parameters are refused when `strict`; otherwise they are left to the caller.
// REQUIRES: query != nullptr.
Status ParseTaskQuery(std::string_view url_query, bool strict,
                      TaskQuery* query);

// A URL query's value for `name`, URL-decoded; nullopt when absent.
std::optional<std::string> QueryParameter(std::string_view url_query,
                                          std::string_view name);

// URL-decodes a path segment or query value (%XX, and '+' as a space when
// `plus_is_space`). nullopt for a malformed escape.
std::optional<std::string> UrlDecode(std::string_view text, bool plus_is_space);

// {"by_status": {"pending": N, ... every status}, "by_type": {"TYPE":
// {"pending": N, ...}, ...}}. by_status is the sum over types, so both come
// from one snapshot.
std::string CountsJson(const TypeCounts& counts);

// {"id", "created_at" (RFC 3339), "size_bytes", "files", "sequence",
// "format_version"}: a backup POST /v1/backup made.
std::string BackupJson(const BackupInfo& info);

// {"id", "status", "attempts", "max_attempts", "last_error", "failures":
// [{"attempt", "at", "error"}]}.
std::string HistoryJson(const FailureHistory& history);

// The `event: task` data: {"id", "type", "kind", "status", "attempt",
// "max_attempts", "at", "error", "next_attempt_at", "was_running"}.
std::string EventJson(const TaskEvent& event);

// {"error": {"code": <code>, "message": <message>}}.
std::string ErrorJson(std::string_view code, std::string_view message);

// `text` as a JSON string, quoted and escaped (invalid UTF-8 replaced).
std::string JsonString(std::string_view text);

// RFC 3339 UTC with microseconds, as spool's task JSON writes times.
std::string Rfc3339(Timestamp at);

// Parses "YYYY-MM-DDTHH:MM:SS[.ffffff](Z|+HH:MM|-HH:MM)".
std::optional<Timestamp> ParseRfc3339(std::string_view text);

}  // namespace spool::http

#endif  // SPOOL_SERVER_API_JSON_H_
