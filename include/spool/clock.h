// Clock: where spool gets the time, so that tests can drive it.
//
// spool reads the time for task timestamps, delays and retry backoff through
// Options::clock. The default is the system clock. A ManualClock only moves
// when told to, and wakes the runtime's timers when it does, so a test can
// let a one-hour retry delay pass without sleeping.

#ifndef SPOOL_INCLUDE_CLOCK_H_
#define SPOOL_INCLUDE_CLOCK_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <spool/task.h>

namespace spool {

// Thread safety: implementations must allow concurrent calls.
class Clock {
 public:
  virtual ~Clock() = default;

  // The current time.
  virtual Timestamp Now() const = 0;

  // Registers `on_jump`, called after the time moves other than by waiting
  // (a ManualClock's Advance or Set). Returns a token for RemoveListener. The
  // system clock never calls it. The callback must not block.
  virtual uint64_t AddListener(std::function<void()> on_jump) = 0;
  virtual void RemoveListener(uint64_t token) = 0;
};

// The system's wall clock, shared.
std::shared_ptr<Clock> SystemClock();

// `at` as RFC 3339 in UTC with microseconds ("2026-12-01T20:16:34.000123Z"),
// the form spool's task JSON uses.
std::string FormatRfc3339(Timestamp at);

// A clock that moves only when Advance or Set is called.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(Timestamp start) : now_(start) {}

  Timestamp Now() const override;
  uint64_t AddListener(std::function<void()> on_jump) override;
  void RemoveListener(uint64_t token) override;

  // Moves the time forward by `delta` (negative moves it back) and notifies
  // the listeners.
  void Advance(Duration delta);
  // Sets the time and notifies the listeners.
  void Set(Timestamp now);

 private:
  void Notify();

  mutable std::mutex mutex_;
  Timestamp now_;
  uint64_t next_token_ = 1;
  std::map<uint64_t, std::function<void()>> listeners_;
};

}  // namespace spool

#endif  // SPOOL_INCLUDE_CLOCK_H_
