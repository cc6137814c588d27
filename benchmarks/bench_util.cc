#include "benchmarks/bench_util.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <memory>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace spool::bench {

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

void Samples::Append(const Samples& other) {
  values_.insert(values_.end(), other.values_.begin(), other.values_.end());
  sorted_ = false;
}

double Samples::Percentile(double p) {
  if (values_.empty()) return 0;
  if (!sorted_) {
    std::sort(values_.begin(), values_.end());
    sorted_ = true;
  }
  // Nearest rank: the smallest value with at least p% of the samples at or
  // below it.
  double rank = std::ceil(p / 100.0 * static_cast<double>(values_.size()));
  size_t index = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return values_[std::min(index, values_.size() - 1)];
}

double MicrosBetween(SteadyClock::time_point from, SteadyClock::time_point to) {
  return std::chrono::duration<double, std::micro>(to - from).count();
}

double MillisBetween(SteadyClock::time_point from, SteadyClock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

double ThreadCpuMicros() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 +
         static_cast<double>(ts.tv_nsec) / 1e3;
}

std::string BaseTempDir() {
  const char* base = std::getenv("TMPDIR");
  return base != nullptr && *base != '\0' ? base : "/tmp";
}

ScratchDir::ScratchDir(std::string_view prefix) {
  std::string pattern =
      BaseTempDir() + "/spool-bench-" + std::string(prefix) + "-XXXXXX";
  if (mkdtemp(pattern.data()) != nullptr) {
    chmod(pattern.c_str(), 0755);
    path_ = pattern;
  }
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
}

Plan MakePlan(bool quick, int rounds) {
  Plan plan;
  plan.quick = quick;
  if (quick) {
    // About a minute for the whole suite with every peer: postgres alone
    // spends ~1.3 s on initdb per fresh instance.
    plan.rounds = 3;
    plan.warmup_calls = 50;
    plan.sequential_enqueues = 500;
    plan.caller_warmup_s = 0.05;
    plan.caller_window_s = 0.25;
    plan.drain_tasks = 2000;
    plan.big_drain_tasks = 0;
    plan.cpu_calls = 500;
    plan.codec_min_time_s = 0.02;
  }
  if (rounds > 0) plan.rounds = rounds;
  plan.big_drain_rounds = std::min(plan.big_drain_rounds, plan.rounds);
  return plan;
}

bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string WithCommas(long long value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return value < 0 ? "-" + out : out;
}

std::string FormatValue(double value) {
  if (!std::isfinite(value)) return "n/a";
  double magnitude = std::fabs(value);
  // 999.6 prints as "1,000", not "1000".
  if (magnitude >= 999.5) return WithCommas(std::llround(value));
  char buf[32];
  if (magnitude >= 100) {
    std::snprintf(buf, sizeof(buf), "%.0f", value);
  } else if (magnitude >= 10) {
    std::snprintf(buf, sizeof(buf), "%.1f", value);
  } else if (magnitude >= 1) {
    std::snprintf(buf, sizeof(buf), "%.2f", value);
  } else {
    std::snprintf(buf, sizeof(buf), "%.3f", value);
  }
  return buf;
}

void Progress(const char* format, ...) {
  static std::mutex mutex;
  char buf[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof(buf), format, args);
  va_end(args);
  std::lock_guard<std::mutex> lock(mutex);
  std::fprintf(stderr, "[spool-bench] %s\n", buf);
  std::fflush(stderr);
}

namespace {

std::string Clean(std::string_view field) {
  std::string out(field);
  for (char& c : out) {
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

std::vector<std::string_view> SplitTabs(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    size_t tab = line.find('\t', start);
    if (tab == std::string_view::npos) {
      fields.push_back(line.substr(start));
      return fields;
    }
    fields.push_back(line.substr(start, tab - start));
    start = tab + 1;
  }
}

}  // namespace

void Reporter::WriteLine(const std::vector<std::string_view>& fields) {
  std::string line;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) line.push_back('\t');
    line += Clean(fields[i]);
  }
  line.push_back('\n');
  std::lock_guard<std::mutex> lock(mutex_);
  if (fd_ < 0) return;
  // One write per line where possible, so that a crash leaves whole lines.
  std::string_view rest = line;
  while (!rest.empty()) {
    ssize_t n = write(fd_, rest.data(), rest.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // The parent is gone; nothing to report to.
    }
    rest.remove_prefix(static_cast<size_t>(n));
  }
}

void Reporter::AddRow(const Row& row) {
  char value[64];
  std::snprintf(value, sizeof(value), "%.17g", row.value);
  WriteLine({"R", row.scenario, row.system, row.variant, row.metric, value,
             row.unit, row.group});
}

void Reporter::Note(std::string_view text) { WriteLine({"N", text}); }

void Reporter::Info(std::string_view key, std::string_view value) {
  WriteLine({"I", key, value});
}

void Reporter::Error(std::string_view text) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    failed_ = true;
  }
  WriteLine({"E", text});
}

ProtocolLine ParseProtocolLine(std::string_view line) {
  ProtocolLine out;
  std::vector<std::string_view> f = SplitTabs(line);
  if (f.empty() || f[0].size() != 1) return out;
  switch (f[0][0]) {
    case 'R': {
      if (f.size() != 8) return out;
      char* end = nullptr;
      std::string value(f[5]);
      out.row.value = std::strtod(value.c_str(), &end);
      if (end == value.c_str()) return out;
      out.row.scenario = f[1];
      out.row.system = f[2];
      out.row.variant = f[3];
      out.row.metric = f[4];
      out.row.unit = f[6];
      out.row.group = f[7];
      break;
    }
    case 'N':
    case 'E':
      if (f.size() != 2) return out;
      out.text = f[1];
      break;
    case 'I':
      if (f.size() != 3) return out;
      out.key = f[1];
      out.text = f[2];
      break;
    default:
      return out;
  }
  out.kind = f[0][0];
  return out;
}

void Abandon(Reporter* out, const Status& status) {
  out->Error(status.ToString());
  Progress("abandoning this worker: %s", status.ToString().c_str());
  std::fflush(nullptr);
  _exit(3);
}

CallerRun RunCallers(int callers, double warmup_s, double window_s,
                     const std::function<Status(int caller)>& call) {
  struct PerCaller {
    Samples latencies;
    size_t completed = 0;
    Status error;
  };
  std::vector<PerCaller> per(static_cast<size_t>(callers));
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  SteadyClock::time_point window_start, window_end;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(callers));
  for (int i = 0; i < callers; ++i) {
    threads.emplace_back([&, i] {
      PerCaller& mine = per[static_cast<size_t>(i)];
      mine.latencies.Reserve(4096);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      while (!stop.load(std::memory_order_relaxed)) {
        auto before = SteadyClock::now();
        Status s = call(i);
        auto after = SteadyClock::now();
        if (!s.ok()) {
          mine.error = s;
          return;
        }
        if (after >= window_start && after <= window_end) {
          ++mine.completed;
          mine.latencies.Add(MicrosBetween(before, after));
        }
      }
    });
  }
  auto released = SteadyClock::now();
  window_start = released + std::chrono::duration_cast<SteadyClock::duration>(
                                std::chrono::duration<double>(warmup_s));
  window_end = window_start + std::chrono::duration_cast<SteadyClock::duration>(
                                  std::chrono::duration<double>(window_s));
  go.store(true, std::memory_order_release);
  std::this_thread::sleep_until(window_end);
  stop.store(true, std::memory_order_relaxed);
  for (std::thread& t : threads) t.join();

  CallerRun run;
  size_t completed = 0;
  for (PerCaller& p : per) {
    completed += p.completed;
    run.latencies_us.Append(p.latencies);
    if (run.error.ok() && !p.error.ok()) run.error = p.error;
  }
  run.ops_per_s = static_cast<double>(completed) / window_s;
  return run;
}

}  // namespace spool::bench
