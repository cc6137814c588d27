#include "util/logging.h"

#include <cerrno>
#include <map>
#include <mutex>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

namespace spool {

namespace {

LogLevel FromSpdlog(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
      return LogLevel::kTrace;
    case spdlog::level::debug:
      return LogLevel::kDebug;
    case spdlog::level::info:
      return LogLevel::kInfo;
    case spdlog::level::warn:
      return LogLevel::kWarn;
    case spdlog::level::err:
    case spdlog::level::critical:
      return LogLevel::kError;
    default:
      return LogLevel::kOff;
  }
}

// Forwards each line's message to the registered sinks. spdlog calls
// sink_it_ under the base sink's mutex, so registration shares it; a sink is
// never called after RemoveLogSink returns.
class ForwardingSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  uint64_t Add(LogSink sink) {
    std::lock_guard<std::mutex> lock(mutex_);
    uint64_t token = next_++;
    sinks_.emplace(token, std::move(sink));
    return token;
  }
  // Returns how many sinks are left.
  size_t Remove(uint64_t token) {
    std::lock_guard<std::mutex> lock(mutex_);
    sinks_.erase(token);
    return sinks_.size();
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::string_view text(msg.payload.data(), msg.payload.size());
    LogLevel level = FromSpdlog(msg.level);
    for (auto& [token, sink] : sinks_) sink(level, text);
  }
  void flush_() override {}

 private:
  uint64_t next_ = 1;
  std::map<uint64_t, LogSink> sinks_;
};

// Writes each formatted line to stderr with one write(2), so that lines
// from other writers of the same file (another process, a library's own
// logger, std::cerr) never cut into one: spdlog's color sink writes a line
// in up to five pieces.
class StderrLineSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    const char* data = line.data();
    size_t left = line.size();
    while (left > 0) {
      ssize_t n = ::write(STDERR_FILENO, data, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // nowhere to report a failing stderr
      data += n;
      left -= static_cast<size_t>(n);
    }
  }
  void flush_() override {}
};

struct LoggerState {
  std::shared_ptr<spdlog::logger> logger;
  std::shared_ptr<ForwardingSink> forward = std::make_shared<ForwardingSink>();
  // Guards the silencing of the other sinks, and their levels from before.
  std::mutex mutex;
  std::vector<spdlog::level::level_enum> saved_levels;
};

LoggerState& State() {
  static LoggerState* state = [] {
    auto* s = new LoggerState;
    s->logger = spdlog::get("spool");
    if (!s->logger) {
      s->logger = std::make_shared<spdlog::logger>(
          "spool", std::make_shared<StderrLineSink>());
      spdlog::register_logger(s->logger);
      s->logger->set_level(spdlog::level::warn);
    }
    s->logger->sinks().push_back(s->forward);
    return s;
  }();
  return *state;
}

// Silences, or restores, every sink of the logger but the forwarding one.
void SilenceOtherSinks(LoggerState& state, bool silent) {
  if (silent && !state.saved_levels.empty()) return;  // already silent
  std::vector<spdlog::sink_ptr>& sinks = state.logger->sinks();
  for (size_t i = 0; i < sinks.size(); ++i) {
    if (sinks[i] == state.forward) continue;
    if (silent) {
      state.saved_levels.push_back(sinks[i]->level());
      sinks[i]->set_level(spdlog::level::off);
    } else if (!state.saved_levels.empty()) {
      sinks[i]->set_level(state.saved_levels.front());
      state.saved_levels.erase(state.saved_levels.begin());
    }
  }
  state.saved_levels.shrink_to_fit();
}

}  // namespace

std::shared_ptr<spdlog::logger> Logger() { return State().logger; }

void SetLogLevel(LogLevel level) {
  static constexpr spdlog::level::level_enum kLevels[] = {
      spdlog::level::trace, spdlog::level::debug, spdlog::level::info,
      spdlog::level::warn,  spdlog::level::err,   spdlog::level::off};
  Logger()->set_level(kLevels[static_cast<int>(level)]);
}

uint64_t AddLogSink(LogSink sink) {
  LoggerState& state = State();
  std::lock_guard<std::mutex> lock(state.mutex);
  uint64_t token = state.forward->Add(std::move(sink));
  SilenceOtherSinks(state, true);
  return token;
}

void RemoveLogSink(uint64_t token) {
  if (token == 0) return;
  LoggerState& state = State();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.forward->Remove(token) == 0) SilenceOtherSinks(state, false);
}

}  // namespace spool
