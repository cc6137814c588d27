#include <cstdio>
#include <ctime>
#include <vector>

#include <spool/clock.h>

namespace spool {
namespace {

class SystemClockImpl final : public Clock {
 public:
  Timestamp Now() const override {
    return std::chrono::time_point_cast<Duration>(
        std::chrono::system_clock::now());
  }
  uint64_t AddListener(std::function<void()>) override { return 0; }
  void RemoveListener(uint64_t) override {}
};

}  // namespace

std::string FormatRfc3339(Timestamp at) {
  int64_t us = at.time_since_epoch().count();
  // Floor division, so that times before 1970 keep positive microseconds.
  int64_t seconds = us >= 0 ? us / 1000000 : (us - 999999) / 1000000;
  auto micros = static_cast<long>(us - seconds * 1000000);
  auto t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ",
                tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                tm.tm_min, tm.tm_sec, micros);
  return buffer;
}

std::shared_ptr<Clock> SystemClock() {
  static const auto clock = std::make_shared<SystemClockImpl>();
  return clock;
}

Timestamp ManualClock::Now() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return now_;
}

uint64_t ManualClock::AddListener(std::function<void()> on_jump) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t token = next_token_++;
  listeners_.emplace(token, std::move(on_jump));
  return token;
}

void ManualClock::RemoveListener(uint64_t token) {
  std::lock_guard<std::mutex> lock(mutex_);
  listeners_.erase(token);
}

void ManualClock::Advance(Duration delta) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    now_ += delta;
  }
  Notify();
}

void ManualClock::Set(Timestamp now) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    now_ = now;
  }
  Notify();
}

void ManualClock::Notify() {
  std::vector<std::function<void()>> listeners;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [token, fn] : listeners_) listeners.push_back(fn);
  }
  for (const auto& fn : listeners) fn();
}

}  // namespace spool
