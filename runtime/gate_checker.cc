// GateChecker (runtime/gate_checker.h).

#include "runtime/gate_checker.h"

#include <spdlog/spdlog.h>

#include "util/logging.h"
#include "util/thread_name.h"

namespace spool {

GateChecker::GateChecker(std::chrono::milliseconds interval)
    : interval_(interval) {}

GateChecker::~GateChecker() { Stop(); }

Status GateChecker::Register(const std::string& name,
                             std::shared_ptr<Gate> gate) {
  if (name.empty()) {
    return Status::InvalidArgument("RegisterGate needs a gate name");
  }
  if (gate == nullptr) {
    return Status::InvalidArgument("RegisterGate: gate '" + name + "' is null");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (thread_.joinable()) {
    return Status::FailedPrecondition("RegisterGate: gate '" + name +
                                      "' registered after Start");
  }
  if (!gates_.emplace(name, Entry{std::move(gate), {}, {}}).second) {
    return Status::FailedPrecondition("RegisterGate: gate '" + name +
                                      "' is already registered");
  }
  return Status::OK();
}

void GateChecker::Start(SetGateFn set_gate) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (gates_.empty() || thread_.joinable() || stopping_) return;
  set_gate_ = std::move(set_gate);
  thread_ = std::thread([this] { Run(); });
}

void GateChecker::Deferred(const std::string& gate) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = gates_.find(gate);
  if (it == gates_.end()) return;
  Clock::time_point now = Clock::now();
  it->second.next = now;
  it->second.hold_until = now + interval_;
  wake_.notify_one();
}

void GateChecker::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    wake_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

bool GateChecker::Ask(const std::string& name, Gate& gate) {
  try {
    return gate.IsOpen();
  } catch (...) {
    Logger()->warn("gate '{}': IsOpen threw; the gate counts as closed", name);
    return false;
  }
}

void GateChecker::Run() {
  NameThisThread("spool-gates");
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    Clock::time_point now = Clock::now();
    Clock::time_point next = now + interval_;
    for (auto& [name, entry] : gates_) {
      if (entry.next > now) {
        next = std::min(next, entry.next);
        continue;
      }
      std::shared_ptr<Gate> gate = entry.gate;
      lock.unlock();
      bool open = Ask(name, *gate);
      lock.lock();
      now = Clock::now();
      // An open answer within a deferral's hold waits for the hold's end.
      if (open && now < entry.hold_until) {
        entry.next = entry.hold_until;
      } else {
        entry.next = now + interval_;
        set_gate_(name, open);
      }
      next = std::min(next, entry.next);
      if (stopping_) return;
    }
    wake_.wait_until(lock, next, [&] {
      if (stopping_) return true;
      for (const auto& [name, entry] : gates_) {
        if (entry.next <= Clock::now()) return true;
      }
      return false;
    });
  }
}

}  // namespace spool
