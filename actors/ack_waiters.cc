#include "actors/ack_waiters.h"

#include <string>
#include <utility>

namespace spool::actors {

AckWaiters::~AckWaiters() {
  for (Held& held : held_) {
    Run(held.done, Status::Closed("the runtime closed before enough standbys "
                                  "acknowledged commit " +
                                  std::to_string(held.position) +
                                  "; it is stored on the primary's disk"));
  }
}

void AckWaiters::Run(std::vector<Completion>& done, const Status& status) {
  for (Completion& fn : done) fn(status);
  done.clear();
}

void AckWaiters::Hold(uint64_t position, std::vector<Completion> done,
                      TimePoint now) {
  // Held positions grow, so one at or below acked_ has nothing held before
  // it: Acked answered those.
  if (position <= acked_) return Run(done, Acknowledgement());
  held_.push_back({position, now + timeout_, std::move(done)});
}

void AckWaiters::After(std::vector<Completion> done) {
  if (held_.empty()) return Run(done, Acknowledgement());
  for (Completion& fn : done) held_.back().done.push_back(std::move(fn));
}

void AckWaiters::Acked(uint64_t position) {
  acked_ = std::max(acked_, position);
  while (!held_.empty() && held_.front().position <= position) {
    Run(held_.front().done, Acknowledgement());
    held_.pop_front();
  }
}

std::optional<AckWaiters::TimePoint> AckWaiters::Expire(TimePoint now) {
  // Deadlines grow with positions: the late ones are at the front.
  {
    while (!held_.empty() && held_.front().deadline <= now) {
      Held& held = held_.front();
      Run(held.done,
          Status::TimedOut(
              "commit " + std::to_string(held.position) +
              " is stored on the primary's disk, but fewer than " +
              std::to_string(min_acks_) +
              " standby(s) acknowledged it within " +
              std::to_string(timeout_.count()) +
              " ms (replication.ack_timeout_ms); it is not replicated"));
      held_.pop_front();
    }
  }
  if (held_.empty()) return std::nullopt;
  return held_.front().deadline;
}

}  // namespace spool::actors
