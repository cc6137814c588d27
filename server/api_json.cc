#include "server/api_json.h"

#include <cctype>
#include <cstdio>
#include <ctime>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>

#include <spool/clock.h>

#include "server/base64.h"
#include "server/json_parse.h"

namespace spool::http {
namespace {

using nlohmann::json;

Status FieldError(const std::string& field, const std::string& reason) {
  return Status::InvalidArgument(field + ": " + reason);
}

Status ParseBody(std::string_view body, json* out) {
  return ParseJson(body, "request body", out);
}

Status GetString(const json& value, const std::string& field,
                 std::string* out) {
  if (!value.is_string()) return FieldError(field, "expected a string");
  *out = value.get<std::string>();
  return Status::OK();
}

// One of a fixed set of names, each standing for a value of E; any other
// string is refused with the names listed.
template <class E>
Status GetChoice(const json& value, const std::string& field,
                 std::initializer_list<std::pair<std::string_view, E>> choices,
                 E* out) {
  std::string text;
  if (Status s = GetString(value, field, &text); !s.ok()) return s;
  std::string expected;
  size_t i = 0;
  for (const auto& [name, choice] : choices) {
    if (name == text) {
      *out = choice;
      return Status::OK();
    }
    expected += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ");
    expected += "\"" + std::string(name) + "\"";
    ++i;
  }
  return FieldError(field, "expected " + expected);
}

template <class Int>
Status GetInteger(const json& value, const std::string& field, Int* out,
                  int64_t min = std::numeric_limits<Int>::min(),
                  uint64_t max = std::numeric_limits<Int>::max()) {
  bool ok = false;
  if (value.is_number_unsigned()) {
    uint64_t v = value.get<uint64_t>();
    ok = v <= max && (min <= 0 || v >= static_cast<uint64_t>(min));
    if (ok) *out = static_cast<Int>(v);
  } else if (value.is_number_integer()) {
    int64_t v = value.get<int64_t>();
    ok = v >= min && (v < 0 || static_cast<uint64_t>(v) <= max);
    if (ok) *out = static_cast<Int>(v);
  }
  if (!ok) {
    return FieldError(field, "expected an integer in [" + std::to_string(min) +
                                 ", " + std::to_string(max) + "]");
  }
  return Status::OK();
}

// spool::kMaxDelay in milliseconds: the bound of every millisecond count a
// client sends, so that none overflows when it becomes a Duration or is
// added to a time.
constexpr int64_t kMaxDelayMs =
    std::chrono::duration_cast<std::chrono::milliseconds>(kMaxDelay).count();

// A millisecond count in [min, kMaxDelayMs], as a Duration.
template <class D>
Status GetMillis(const json& value, const std::string& field, D* out,
                 int64_t min = 0) {
  int64_t ms = 0;
  if (Status s = GetInteger(value, field, &ms, min, kMaxDelayMs); !s.ok())
    return FieldError(field, "expected milliseconds in [" +
                                 std::to_string(min) + ", " +
                                 std::to_string(kMaxDelayMs) +
                                 "] (spool::kMaxDelay, 365 days)");
  *out = std::chrono::duration_cast<D>(std::chrono::milliseconds(ms));
  return Status::OK();
}

Status ParseRetryPolicy(const json& value, const std::string& field,
                        RetryPolicy* policy) {
  if (!value.is_object()) return FieldError(field, "expected an object");
  RetryPolicy parsed;
  for (const auto& [key, member] : value.items()) {
    std::string name = field + "." + key;
    Status s;
    if (key == "kind") {
      s = GetChoice<RetryPolicy::Kind>(
          member, name,
          {{"none", RetryPolicy::Kind::kNone},
           {"fixed", RetryPolicy::Kind::kFixed},
           {"exponential", RetryPolicy::Kind::kExponential}},
          &parsed.kind);
    } else if (key == "max_attempts") {
      s = GetInteger(member, name, &parsed.max_attempts, 1);
    } else if (key == "initial_delay_ms" || key == "max_delay_ms") {
      s = GetMillis(member, name,
                    key == "initial_delay_ms" ? &parsed.initial_delay
                                              : &parsed.max_delay);
    } else if (key == "jitter") {
      if (!member.is_number()) {
        s = FieldError(name, "expected a number in [0, 1]");
      } else {
        parsed.jitter = member.get<double>();
      }
    } else {
      s = FieldError(name,
                     "unknown field; a retry policy takes kind, max_attempts, "
                     "initial_delay_ms, max_delay_ms and jitter");
    }
    if (!s.ok()) return s;
  }
  if (Status s = parsed.Validate(); !s.ok())
    return FieldError(field, s.message());
  *policy = parsed;
  return Status::OK();
}

// Takes `value` by reference to move its strings (type, payload) out rather
// than copy them; `value` is not used afterwards.
Status ParseTask(json& value, const std::string& prefix, TaskSpec* spec) {
  auto field_name = [&prefix](const std::string& key) {
    return prefix.empty() ? key : prefix + "." + key;
  };
  if (!value.is_object()) {
    return Status::InvalidArgument(
        (prefix.empty() ? std::string("body") : prefix) +
        ": expected a JSON object");
  }
  TaskSpec parsed;
  bool has_type = false, has_payload = false, has_delay = false,
       has_run_at = false;
  for (auto&& [key, member] : value.items()) {
    std::string name = field_name(key);
    EnqueueOptions& o = parsed.options;
    Status s;
    if (key == "type") {
      if (member.is_string()) {
        parsed.type = std::move(member.get_ref<std::string&>());
      } else {
        s = FieldError(name, "expected a string");
      }
      has_type = true;
    } else if (key == "payload") {
      if (has_payload)
        return FieldError(name, "give payload or payload_base64, not both");
      has_payload = true;
      parsed.payload = member.is_string()
                           ? std::move(member.get_ref<std::string&>())
                           : member.dump();
    } else if (key == "payload_base64") {
      if (has_payload)
        return FieldError(name, "give payload or payload_base64, not both");
      has_payload = true;
      std::string text;
      s = GetString(member, name, &text);
      if (s.ok()) {
        if (!DecodeBase64(text, &parsed.payload)) {
          s = FieldError(name, "not valid base64");
        }
      }
    } else if (key == "priority") {
      s = GetInteger(member, name, &o.priority);
    } else if (key == "delay_ms") {
      s = GetMillis(member, name, &o.delay);
      has_delay = true;
    } else if (key == "run_at") {
      std::string text;
      s = GetString(member, name, &text);
      if (s.ok()) {
        std::optional<Timestamp> at = ParseRfc3339(text);
        if (!at) {
          s = FieldError(
              name, "expected an RFC 3339 time, e.g. 2030-01-02T03:04:05Z");
        } else {
          o.run_at = *at;
        }
      }
      has_run_at = true;
    } else if (key == "group") {
      s = GetString(member, name, &o.group);
    } else if (key == "dedup_key") {
      s = GetString(member, name, &o.dedup_key);
    } else if (key == "idempotency_key") {
      s = GetString(member, name, &o.idempotency_key);
    } else if (key == "unique_for_ms") {
      int64_t ms = 0;
      s = GetInteger(member, name, &ms, 0, int64_t{3650} * 86'400'000);
      o.unique_for = std::chrono::milliseconds(ms);
    } else if (key == "on_duplicate") {
      using OnDuplicate = EnqueueOptions::OnDuplicate;
      s = GetChoice<OnDuplicate>(
          member, name,
          {{"keep", OnDuplicate::kKeepExisting},
           {"replace_payload", OnDuplicate::kReplacePayload}},
          &o.on_duplicate);
    } else if (key == "depends_on") {
      if (!member.is_array()) {
        s = FieldError(name, "expected an array of task ids");
      } else {
        for (size_t i = 0; i < member.size() && s.ok(); ++i) {
          TaskId id = 0;
          s = GetInteger(member[i], name + "[" + std::to_string(i) + "]", &id,
                         1);
          o.depends_on.push_back(id);
        }
      }
    } else if (key == "on_dependency_failure") {
      s = GetChoice<DependencyFailure>(member, name,
                                       {{"cancel", DependencyFailure::kCancel},
                                        {"fail", DependencyFailure::kFail},
                                        {"run", DependencyFailure::kRun}},
                                       &o.on_dependency_failure);
    } else if (key == "retry") {
      RetryPolicy policy;
      s = ParseRetryPolicy(member, name, &policy);
      o.retry = policy;
    } else if (key == "timeout_ms") {
      Duration timeout{0};
      s = GetMillis(member, name, &timeout, 1);
      o.timeout = timeout;
    } else {
      s = FieldError(
          name,
          "unknown field; a task takes type, payload, payload_base64, "
          "priority, delay_ms, run_at, group, dedup_key, unique_for_ms, "
          "on_duplicate, idempotency_key, depends_on, on_dependency_failure, "
          "retry and timeout_ms");
    }
    if (!s.ok()) return s;
  }
  if (!has_type) return FieldError(field_name("type"), "required");
  if (has_delay && has_run_at) {
    return FieldError(field_name("run_at"),
                      "give delay_ms or run_at, not both");
  }
  *spec = std::move(parsed);
  return Status::OK();
}

std::string StatusObject(const StatusCounts& counts) {
  std::string out = "{";
  for (size_t i = 0; i < kTaskStatusCount; ++i) {
    if (i > 0) out += ',';
    out += '"';
    out += TaskStatusName(static_cast<TaskStatus>(i));
    out += "\":" + std::to_string(counts.by_status[i]);
  }
  return out + "}";
}

std::string Quote(std::string_view text) {
  return json(std::string(text))
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Status ParseTaskRequest(std::string_view body, TaskSpec* spec) {
  json value;
  if (Status s = ParseBody(body, &value); !s.ok()) return s;
  return ParseTask(value, "", spec);
}

Status ParseBatchRequest(std::string_view body, std::vector<TaskSpec>* specs) {
  json value;
  if (Status s = ParseBody(body, &value); !s.ok()) return s;
  if (!value.is_object())
    return Status::InvalidArgument("body: expected a JSON object");
  json* tasks = nullptr;
  for (auto&& [key, member] : value.items()) {
    if (key != "tasks")
      return FieldError(key, "unknown field; a batch takes tasks");
    tasks = &member;
  }
  if (tasks == nullptr || !tasks->is_array() || tasks->empty()) {
    return FieldError("tasks", "expected a non-empty array of tasks");
  }
  std::vector<TaskSpec> parsed(tasks->size());
  for (size_t i = 0; i < tasks->size(); ++i) {
    Status s =
        ParseTask((*tasks)[i], "tasks[" + std::to_string(i) + "]", &parsed[i]);
    if (!s.ok()) return s;
  }
  *specs = std::move(parsed);
  return Status::OK();
}

Status ParseRetryRequest(std::string_view body,
                         std::optional<RetryPolicy>* policy) {
  policy->reset();
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos)
    return Status::OK();
  json value;
  if (Status s = ParseBody(body, &value); !s.ok()) return s;
  if (!value.is_object())
    return Status::InvalidArgument("body: expected a JSON object");
  for (const auto& [key, member] : value.items()) {
    if (key != "retry")
      return FieldError(key, "unknown field; a retry takes retry");
    RetryPolicy parsed;
    if (Status s = ParseRetryPolicy(member, "retry", &parsed); !s.ok())
      return s;
    *policy = parsed;
  }
  return Status::OK();
}

Status ParsePurgeRequest(std::string_view body, PurgeOptions* options) {
  PurgeOptions parsed;
  if (body.find_first_not_of(" \t\r\n") != std::string_view::npos) {
    json value;
    if (Status s = ParseBody(body, &value); !s.ok()) return s;
    if (!value.is_object())
      return Status::InvalidArgument("body: expected a JSON object");
    for (const auto& [key, member] : value.items()) {
      Status s;
      if (key == "statuses") {
        if (!member.is_array()) {
          s = FieldError(key, "expected an array of status names");
        } else {
          parsed.statuses.clear();
          for (size_t i = 0; i < member.size() && s.ok(); ++i) {
            std::string name = key + "[" + std::to_string(i) + "]";
            std::string text;
            s = GetString(member[i], name, &text);
            if (!s.ok()) break;
            std::optional<TaskStatus> status = ParseTaskStatus(text);
            if (!status || !IsTerminal(*status)) {
              s = FieldError(
                  name, "expected \"succeeded\", \"failed\" or \"cancelled\"");
            } else {
              parsed.statuses.push_back(*status);
            }
          }
        }
      } else if (key == "older_than_ms") {
        s = GetMillis(member, key, &parsed.older_than);
      } else if (key == "types") {
        if (!member.is_array()) {
          s = FieldError(key, "expected an array of type names");
        } else {
          for (size_t i = 0; i < member.size() && s.ok(); ++i) {
            std::string text;
            s = GetString(member[i], key + "[" + std::to_string(i) + "]",
                          &text);
            parsed.types.push_back(text);
          }
        }
      } else if (key == "batch_size") {
        s = GetInteger(member, key, &parsed.batch_size, 1, 100000);
      } else {
        s = FieldError(
            key,
            "unknown field; a purge takes statuses, older_than_ms, types "
            "and batch_size");
      }
      if (!s.ok()) return s;
    }
  }
  *options = std::move(parsed);
  return Status::OK();
}

std::optional<std::string> UrlDecode(std::string_view text,
                                     bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      int hi = HexValue(text[i + 1]), lo = HexValue(text[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::optional<std::string> QueryParameter(std::string_view url_query,
                                          std::string_view name) {
  while (!url_query.empty()) {
    size_t amp = url_query.find('&');
    std::string_view pair = url_query.substr(0, amp);
    url_query = amp == std::string_view::npos ? std::string_view()
                                              : url_query.substr(amp + 1);
    size_t eq = pair.find('=');
    if (pair.substr(0, eq) != name) continue;
    return UrlDecode(
        eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1),
        true);
  }
  return std::nullopt;
}

Status ParseTaskQuery(std::string_view url_query, bool strict,
                      TaskQuery* query) {
  TaskQuery parsed;
  std::string_view rest = url_query;
  while (!rest.empty()) {
    size_t amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view()
                                         : rest.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    std::string key(pair.substr(0, eq));
    std::optional<std::string> value = UrlDecode(
        eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1),
        true);
    if (!value) return FieldError(key, "malformed %-escape");
    if (key == "status") {
      if (value->empty()) continue;
      std::optional<TaskStatus> status = ParseTaskStatus(*value);
      if (!status) {
        return FieldError(key,
                          "unknown status \"" + *value +
                              "\"; expected pending, running, retry_scheduled, "
                              "succeeded, failed, cancelled, waiting or held");
      }
      parsed.status = status;
    } else if (key == "type") {
      parsed.type = *value;
    } else if (key == "group") {
      parsed.group = *value;
    } else if (key == "cursor") {
      parsed.cursor = *value;
    } else if (key == "limit") {
      if (value->empty()) continue;
      size_t limit = 0;
      bool ok = value->size() <= 6;
      for (char c : *value)
        ok = ok && std::isdigit(static_cast<unsigned char>(c));
      if (ok) limit = std::stoul(*value);
      if (!ok || limit < 1 || limit > kMaxPageSize) {
        return FieldError(key, "expected an integer in [1, " +
                                   std::to_string(kMaxPageSize) + "]");
      }
      parsed.limit = limit;
    } else if (key == "order") {
      if (*value == "newest") {
        parsed.order = ListOrder::kNewestFirst;
      } else if (*value != "oldest" && !value->empty()) {
        return FieldError(key, "expected \"oldest\" or \"newest\"");
      }
    } else if (key == "created_from" || key == "created_before") {
      if (value->empty()) continue;
      std::optional<Timestamp> at = ParseRfc3339(*value);
      if (!at) {
        return FieldError(key,
                          "expected an RFC 3339 time, e.g. "
                          "2026-12-01T10:00:00Z");
      }
      (key == "created_from" ? parsed.created_from : parsed.created_before) =
          *at;
    } else if (key == "payload") {
      if (*value == "false") {
        parsed.include_payload = false;
      } else if (*value != "true" && !value->empty()) {
        return FieldError(key, "expected true or false");
      }
    } else if (strict) {
      return FieldError(
          key,
          "unknown parameter; a listing takes status, type, group, "
          "created_from, created_before, order, payload, limit and cursor");
    }
  }
  *query = std::move(parsed);
  return Status::OK();
}

std::string BackupJson(const BackupInfo& info) {
  Timestamp created{std::chrono::seconds(info.created_unix_seconds)};
  return "{\"id\":" + std::to_string(info.id) +
         ",\"created_at\":" + JsonString(Rfc3339(created)) +
         ",\"size_bytes\":" + std::to_string(info.size_bytes) +
         ",\"files\":" + std::to_string(info.files) +
         ",\"sequence\":" + std::to_string(info.sequence) +
         ",\"format_version\":" + std::to_string(info.format_version) + "}";
}

std::string CountsJson(const TypeCounts& counts) {
  StatusCounts total;
  std::string by_type = "{";
  bool first = true;
  for (const auto& [type, of_type] : counts) {
    for (size_t i = 0; i < kTaskStatusCount; ++i)
      total.by_status[i] += of_type.by_status[i];
    if (!first) by_type += ',';
    first = false;
    by_type += Quote(type) + ":" + StatusObject(of_type);
  }
  by_type += "}";
  return "{\"by_status\":" + StatusObject(total) + ",\"by_type\":" + by_type +
         "}";
}

std::string HistoryJson(const FailureHistory& history) {
  json failures = json::array();
  for (const TaskInfo::Failure& failure : history.failures) {
    failures.push_back({{"attempt", failure.attempt},
                        {"at", Rfc3339(failure.at)},
                        {"error", failure.error}});
  }
  json out = {
      {"id", history.id},
      {"status", TaskStatusName(history.status)},
      {"attempts", history.attempts},
      {"max_attempts", history.max_attempts},
      {"last_error",
       history.last_error.empty() ? json(nullptr) : json(history.last_error)},
      {"failures", std::move(failures)}};
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string EventJson(const TaskEvent& event) {
  const char* status = nullptr;
  switch (event.kind) {
    case TaskEvent::Kind::kEnqueued:
    case TaskEvent::Kind::kDeferred:
      status = "pending";
      break;
    case TaskEvent::Kind::kStarted:
    case TaskEvent::Kind::kTimedOut:
      status = "running";
      break;
    case TaskEvent::Kind::kRetryScheduled:
      status = "retry_scheduled";
      break;
    case TaskEvent::Kind::kSucceeded:
      status = "succeeded";
      break;
    case TaskEvent::Kind::kFailed:
      status = "failed";
      break;
    case TaskEvent::Kind::kCancelled:
      status = "cancelled";
      break;
  }
  std::string out = "{\"id\":" + std::to_string(event.id) +
                    ",\"type\":" + Quote(event.type) + ",\"kind\":\"" +
                    TaskEventKindName(event.kind) + "\",\"status\":\"" +
                    status + "\",\"attempt\":" + std::to_string(event.attempt) +
                    ",\"max_attempts\":" + std::to_string(event.max_attempts) +
                    ",\"at\":\"" + Rfc3339(event.at) + "\"";
  if (!event.error.empty()) out += ",\"error\":" + Quote(event.error);
  if (event.next_attempt_at)
    out += ",\"next_attempt_at\":\"" + Rfc3339(*event.next_attempt_at) + "\"";
  if (event.was_running) out += ",\"was_running\":true";
  if (!event.dedup_key.empty())
    out += ",\"dedup_key\":" + Quote(event.dedup_key);
  if (!event.idempotency_key.empty()) {
    out += ",\"idempotency_key\":" + Quote(event.idempotency_key);
  }
  if (event.run_at) out += ",\"run_at\":\"" + Rfc3339(*event.run_at) + "\"";
  if (event.defer_reason != DeferReason::kNone) {
    out += ",\"defer_reason\":\"";
    out += DeferReasonName(event.defer_reason);
    out += "\"";
  }
  if (!event.gate.empty()) out += ",\"gate\":" + Quote(event.gate);
  return out + "}";
}

std::string JsonString(std::string_view text) { return Quote(text); }

std::string ErrorJson(std::string_view code, std::string_view message) {
  return "{\"error\":{\"code\":" + Quote(code) +
         ",\"message\":" + Quote(message) + "}}";
}

std::string Rfc3339(Timestamp at) { return FormatRfc3339(at); }

std::optional<Timestamp> ParseRfc3339(std::string_view text) {
  int year, month, day, hour, minute, second;
  if (text.size() < 20) return std::nullopt;
  std::string s(text);
  int consumed = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &year, &month, &day,
                  &hour, &minute, &second, &consumed) != 6 ||
      consumed != 19) {
    return std::nullopt;
  }
  size_t i = 19;
  int64_t micros = 0;
  if (i < s.size() && s[i] == '.') {
    int digits = 0;
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      if (digits < 6) micros = micros * 10 + (s[i] - '0');
      ++digits;
      ++i;
    }
    if (digits == 0) return std::nullopt;
    for (int d = digits; d < 6; ++d) micros *= 10;
  }
  int64_t offset_seconds = 0;
  if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
    ++i;
  } else if (i + 6 == s.size() && (s[i] == '+' || s[i] == '-') &&
             s[i + 3] == ':') {
    int oh = 0, om = 0;
    if (std::sscanf(s.c_str() + i + 1, "%2d:%2d", &oh, &om) != 2)
      return std::nullopt;
    offset_seconds = (oh * 3600 + om * 60) * (s[i] == '+' ? 1 : -1);
    i += 6;
  } else {
    return std::nullopt;
  }
  if (i != s.size() || month < 1 || month > 12 || day < 1 || day > 31 ||
      hour > 23 || minute > 59 || second > 60) {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  int64_t epoch = static_cast<int64_t>(timegm(&tm)) - offset_seconds;
  return Timestamp(std::chrono::microseconds(epoch * 1000000 + micros));
}

}  // namespace spool::http
