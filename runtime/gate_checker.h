// GateChecker: asks the application's gates (spool/gate.h) whether they are
// open, on a thread of its own, every recheck interval and right after a
// handler deferred on one, and hands each answer to the scheduler.

#ifndef SPOOL_RUNTIME_GATE_CHECKER_H_
#define SPOOL_RUNTIME_GATE_CHECKER_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <spool/gate.h>
#include <spool/status.h>

namespace spool {

class GateChecker {
 public:
  // `set_gate` opens or closes a gate as Runtime::SetGate does; called on
  // the checker's thread.
  using SetGateFn = std::function<void(const std::string& gate, bool open)>;

  explicit GateChecker(std::chrono::milliseconds interval);
  // Stops the thread.
  ~GateChecker();

  // Adds `gate` under `name`. REQUIRES: before Start. InvalidArgument for
  // an empty name or a null gate, FailedPrecondition for a name already
  // registered.
  Status Register(const std::string& name, std::shared_ptr<Gate> gate);

  // Starts the thread (a no-op without gates): every gate is asked at once,
  // then every interval.
  void Start(SetGateFn set_gate);

  // A handler deferred on `gate` (the scheduler closed it): asks it again
  // now, and lets an open answer open it only at the next interval. Never
  // blocks for long: it takes a mutex the checker holds only between
  // asks. Ignored for a gate not registered here.
  void Deferred(const std::string& gate);

  // Stops the thread, waiting for an IsOpen in progress. Idempotent.
  void Stop();

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    std::shared_ptr<Gate> gate;
    // Asked next at this time.
    Clock::time_point next;
    // A deferral keeps the gate closed until this time.
    Clock::time_point hold_until;
  };
  void Run();
  // Asks one gate (without the mutex held).
  static bool Ask(const std::string& name, Gate& gate);

  const std::chrono::milliseconds interval_;
  SetGateFn set_gate_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::map<std::string, Entry> gates_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace spool

#endif  // SPOOL_RUNTIME_GATE_CHECKER_H_
