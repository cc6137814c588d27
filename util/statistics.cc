// spool::FormatPrometheus: Statistics in the Prometheus text exposition
// format, version 0.0.4.

#include <charconv>
#include <string_view>

#include <spool/statistics.h>

namespace spool {

namespace {

// A label value with backslash, double quote and line feed escaped.
std::string EscapeLabel(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// The shortest text that reads back as `value`.
std::string Number(double value) {
  char buffer[32];
  auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

class Writer {
 public:
  // The HELP and TYPE lines of a metric family.
  void Family(std::string_view name, std::string_view type,
              std::string_view help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }

  // One sample; `labels` is empty or `a="x",b="y"` (escaped).
  void Sample(std::string_view name, std::string_view labels,
              std::string_view value) {
    out_ += name;
    if (!labels.empty()) {
      out_ += '{';
      out_ += labels;
      out_ += '}';
    }
    out_ += ' ';
    out_ += value;
    out_ += '\n';
  }
  void Sample(std::string_view name, std::string_view labels, uint64_t value) {
    Sample(name, labels, std::to_string(value));
  }

  void Counter(std::string_view name, std::string_view help, uint64_t value) {
    Family(name, "counter", help);
    Sample(name, "", value);
  }

  void Gauge(std::string_view name, std::string_view help, uint64_t value) {
    Family(name, "gauge", help);
    Sample(name, "", value);
  }

  // The samples of one histogram; `labels` as for Sample.
  void HistogramSamples(const std::string& name, const std::string& labels,
                        const HistogramStatistics& h) {
    std::string prefix = labels.empty() ? "" : labels + ",";
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.upper_bounds.size(); ++i) {
      if (i < h.counts.size()) cumulative += h.counts[i];
      Sample(name + "_bucket",
             prefix + "le=\"" + Number(h.upper_bounds[i]) + "\"", cumulative);
    }
    Sample(name + "_bucket", prefix + "le=\"+Inf\"", h.count);
    Sample(name + "_sum", labels, Number(h.sum));
    Sample(name + "_count", labels, h.count);
  }

  void Histogram(const std::string& name, std::string_view help,
                 const HistogramStatistics& h) {
    Family(name, "histogram", help);
    HistogramSamples(name, "", h);
  }

  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

std::string StatusLabel(size_t status) {
  return std::string("status=\"") +
         TaskStatusName(static_cast<TaskStatus>(status)) + "\"";
}

}  // namespace

std::string FormatPrometheus(const Statistics& stats) {
  Writer w;
  struct CounterMetric {
    const char* name;
    const char* help;
    uint64_t Statistics::*value;
  };
  static constexpr CounterMetric kCounters[] = {
      {"spool_tasks_enqueued_total",
       "Tasks the writer received from Enqueue calls.", &Statistics::enqueued},
      {"spool_tasks_stored_total", "New task records committed.",
       &Statistics::stored},
      {"spool_attempts_claimed_total",
       "Attempts claimed: committed moves of a task to running.",
       &Statistics::claimed},
      {"spool_tasks_succeeded_total", "Tasks that succeeded.",
       &Statistics::succeeded},
      {"spool_attempts_failed_total",
       "Attempts that failed, crash-interrupted ones included.",
       &Statistics::failed},
      {"spool_attempts_retried_total",
       "Failed attempts after which a retry was scheduled.",
       &Statistics::retried},
      {"spool_tasks_dead_total",
       "Tasks that ended failed: out of attempts, a permanent error or a "
       "failed dependency.",
       &Statistics::dead},
      {"spool_tasks_cancelled_total", "Tasks that ended cancelled.",
       &Statistics::cancelled},
      {"spool_tasks_recovered_total",
       "Tasks left running by the last process and dealt with at open.",
       &Statistics::recovered},
      {"spool_enqueues_refused_busy_total",
       "Enqueue calls refused with Busy: the writer held its bound of tasks "
       "or bytes not yet durable.",
       &Statistics::busy_refusals},
      {"spool_storage_failures_total",
       "Failed commits: a batch not written or synced, or the store not "
       "reopened.",
       &Statistics::storage_failures},
      {"spool_storage_recoveries_total",
       "First successful commits after failed ones.",
       &Statistics::storage_recoveries},
  };
  for (const CounterMetric& c : kCounters) {
    w.Counter(c.name, c.help, stats.*c.value);
  }
  if (!stats.rate_limits.empty()) {
    w.Family("spool_rate_limit_deferred_total", "counter",
             "Attempts a named rate limit made wait for a slot, by limit.");
    for (const RateLimitStatistics& limit : stats.rate_limits) {
      w.Sample("spool_rate_limit_deferred_total",
               "limit=\"" + EscapeLabel(limit.name) + "\"", limit.deferred);
    }
  }

  w.Histogram("spool_commit_batch_tasks", "Tasks changed per group commit.",
              stats.commit_batch_tasks);
  w.Histogram("spool_commit_duration_seconds",
              "Time to write one group commit to storage, its sync included.",
              stats.commit_seconds);
  w.Histogram("spool_wal_sync_duration_seconds",
              "Time per commit in writing and syncing the write-ahead log.",
              stats.sync_seconds);
  w.Histogram("spool_task_start_latency_seconds",
              "Time from a task's enqueue to the start of its first attempt.",
              stats.start_latency_seconds);

  w.Family("spool_handler_duration_seconds", "histogram",
           "Time from a handler's start to its return, by task type.");
  for (const TypeStatistics& type : stats.types) {
    w.HistogramSamples("spool_handler_duration_seconds",
                       "type=\"" + EscapeLabel(type.type) + "\"",
                       type.handler_seconds);
  }

  w.Family("spool_tasks", "gauge", "Stored tasks by status.");
  for (size_t i = 0; i < kTaskStatusCount; ++i) {
    w.Sample("spool_tasks", StatusLabel(i), stats.tasks[i]);
  }
  w.Family("spool_type_tasks", "gauge", "Stored tasks by type and status.");
  for (const TypeStatistics& type : stats.types) {
    std::string label = "type=\"" + EscapeLabel(type.type) + "\",";
    for (size_t i = 0; i < kTaskStatusCount; ++i) {
      w.Sample("spool_type_tasks", label + StatusLabel(i), type.tasks[i]);
    }
  }
  w.Gauge("spool_running_handlers", "Handlers running now.", stats.running);
  w.Gauge("spool_ready_tasks", "Tasks due and waiting to be claimed.",
          stats.ready);
  w.Gauge("spool_reader_queue_depth", "Queries waiting for a reader.",
          stats.reader_queue_depth);
  w.Gauge("spool_watchers", "Live queries subscribed.", stats.watchers);
  w.Gauge("spool_pending_enqueued_tasks",
          "Enqueued tasks handed to the writer, not yet stored or failed.",
          stats.pending_tasks);
  w.Gauge("spool_pending_enqueued_bytes",
          "Payload and type bytes of those tasks.", stats.pending_bytes);
  w.Gauge("spool_waiting_enqueued_tasks",
          "Enqueued tasks waiting for room in the writer (on_full = wait).",
          stats.waiting_tasks);
  w.Gauge("spool_waiting_enqueued_bytes",
          "Payload and type bytes of those tasks.", stats.waiting_bytes);
  w.Gauge("spool_storage_consecutive_failures",
          "Commits failed in a row now; 0 once one succeeds.",
          stats.storage_consecutive_failures);
  return w.Take();
}

}  // namespace spool
