// RateBuckets: the runtime's named rate limits (Runtime::AddRateLimit,
// spool/rate_limit.h), shared by whoever is about to run an attempt (the
// workers, and the gateway for remote workers), which asks Admit first, and
// the scheduler, which sends what changed to the writer to store.
//
// Each bucket is a generic cell rate algorithm, as the per-type limits in
// the scheduler are: `tat`, the theoretical arrival time of the next
// attempt, allows one at `now` when tat - burst <= now, and moves on by one
// interval (period / count) per attempt. An attempt that may not start now
// reserves the earliest time every bucket it falls in allows (their tat
// moves on as if it had started then), and waits; when it comes back at
// that time it is admitted without counting again.
//
// Two times per bucket: `tat` counts attempts started, reserved and held;
// `stored` counts only those started and held, and is what is stored. A
// restart loses the reservations (they are in memory), and the tasks that
// held them take new slots from `stored`, so no slot is counted twice and
// the limit is never exceeded.
//
// A bucket whose times have both passed allows what a new one allows: it
// is dropped (and its stored state deleted) by a sweep that runs when the
// bucket count doubles, so a key function with many keys costs memory only
// for the buckets in use. Reservations likewise: one per waiting task.
//
// Thread safe: one mutex, held for map updates only; the key functions (user
// code) run outside it. The limits are fixed before the first Admit
// (Runtime::Start), so LimitsType reads them without the lock.

#ifndef SPOOL_ACTORS_RATE_BUCKETS_H_
#define SPOOL_ACTORS_RATE_BUCKETS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <spool/clock.h>
#include <spool/handler.h>
#include <spool/rate_limit.h>
#include <spool/status.h>

namespace spool::internal {

// What TaskContext::HoldRateLimits reaches: the buckets its attempt was
// admitted under.
class RateHold {
 public:
  virtual ~RateHold() = default;
  virtual Status Hold(Duration duration) = 0;
};

}  // namespace spool::internal

namespace spool::actors {

class RateBuckets {
 public:
  // One named limit, as Runtime::AddRateLimit takes it.
  struct Limit {
    std::string name;
    RateLimit rate;
    std::vector<std::string> types;
    // Null: the whole limit is one bucket.
    RateKeyOf key_of;
  };

  // A bucket: the limit's index, and its key in stored form.
  struct BucketRef {
    uint32_t limit = 0;
    std::string key;
  };

  // What Admit decided.
  struct Verdict {
    // Not OK: a key function failed; the attempt fails with this error.
    Status status;
    // Non-zero: the attempt may not start before then (task clock, us);
    // its slot is reserved.
    int64_t wait_until_us = 0;
    // Admitted: the buckets it counted against (for Hold).
    std::vector<BucketRef> buckets;
  };

  // `clock` is the task clock. `stored_key` turns a bucket key into the
  // form kept in memory and on disk (an HMAC tag when the store is
  // encrypted, since keys come from payloads); null keeps keys as they are.
  RateBuckets(std::shared_ptr<Clock> clock,
              std::function<std::string(std::string_view)> stored_key);
  RateBuckets(const RateBuckets&) = delete;
  RateBuckets& operator=(const RateBuckets&) = delete;

  // Adds a limit. InvalidArgument naming the field for an empty or
  // oversized name, a count of 0, a period outside [1 ms, 24 h], no types
  // or an empty type; FailedPrecondition for a name already added.
  // REQUIRES: before the first Admit.
  Status Add(Limit limit);

  // True when no limit was added.
  bool empty() const { return limits_.empty(); }
  // Whether a limit named `name` was added.
  bool Has(std::string_view name) const {
    for (const auto& state : limits_) {
      if (state->limit.name == name) return true;
    }
    return false;
  }
  // Whether some limit covers `type`.
  bool LimitsType(const std::string& type) const {
    return by_type_.count(type) != 0;
  }

  // Asks whether attempt `id` of `type`, described by `attempt` (for the
  // key functions), may start now. Admitted: counted against each of its
  // buckets. Not yet: see Verdict::wait_until_us.
  Verdict Admit(TaskId id, const std::string& type, const TaskContext& attempt);

  // Holds `buckets` for `duration` from now: nothing they cover is
  // admitted before then, reservations made before the hold included.
  void Hold(const std::vector<BucketRef>& buckets, Duration duration);

  // A bucket's stored state (see StateKey), read at open. Kept until a
  // limit of that name is added; ignored for a name never added.
  void Restore(std::string_view name, std::string_view key, int64_t tat_us);

  // The stored states Restore kept for names no limit was added under (a
  // limit removed from the code or the config since), as their StateKeys,
  // for the caller to delete; forgets them. Call once the limits are fixed
  // (Runtime::Start).
  std::vector<std::string> TakeUnusedRestored();
  // How many attempts each limit made wait, by name, in the order the
  // limits were added: an attempt counts once per limit whose bucket had no
  // slot when it asked (a reservation taken), not again when it comes back
  // early or at its slot.
  std::vector<std::pair<std::string, uint64_t>> Deferrals() const;
  // Appends the meta values to write for the buckets changed since the last
  // call: (StateKey, 8-byte time), or an empty value to delete it.
  void TakeChanges(std::vector<std::pair<std::string, std::string>>* out);

  // The meta key a bucket's state is stored under, and its prefix.
  static std::string StateKey(std::string_view name, std::string_view key);
  static constexpr std::string_view kStatePrefix = "bucket/";

  // Buckets and reservations held now, for tests.
  size_t bucket_count() const;
  size_t reservation_count() const;

 private:
  struct Bucket {
    int64_t tat = 0;
    int64_t stored = 0;
    // Reservations for times before this are void (Hold).
    int64_t held_until = 0;
  };
  struct Reservation {
    int64_t at = 0;
    std::vector<BucketRef> buckets;
  };
  struct LimitState {
    Limit limit;
    int64_t interval = 1;
    int64_t burst = 0;
    // Attempts this limit made wait (Deferrals).
    uint64_t deferred = 0;
    std::unordered_map<std::string, Bucket> buckets;
  };

  // The buckets `type`'s attempt falls in, or the key function's error.
  Status KeysOf(const std::string& type, const TaskContext& attempt,
                std::vector<BucketRef>* out) const;
  // REQUIRES: mu_ held.
  bool ReservationHolds(const Reservation& reservation) const;
  void Spend(const std::vector<BucketRef>& buckets, int64_t at);
  void Reserve(const std::vector<BucketRef>& buckets, int64_t at);
  void MaybeSweep(int64_t now);
  Bucket& BucketOf(const BucketRef& ref);
  void Changed(const BucketRef& ref) { changed_.emplace(ref.limit, ref.key); }

  const std::shared_ptr<Clock> clock_;
  const std::function<std::string(std::string_view)> stored_key_;
  // Fixed once the first attempt is admitted.
  std::vector<std::unique_ptr<LimitState>> limits_;
  std::unordered_map<std::string, std::vector<uint32_t>> by_type_;

  mutable std::mutex mu_;
  std::unordered_map<TaskId, Reservation> reserved_;
  // Changed since TakeChanges: (limit, key).
  std::set<std::pair<uint32_t, std::string>> changed_;
  size_t bucket_total_ = 0;
  size_t sweep_at_ = 1024;
  // Restored states of limits not added yet, by name.
  std::unordered_map<std::string, std::vector<std::pair<std::string, int64_t>>>
      restored_;
};

// The buckets one attempt was admitted under, for its handler to hold.
class AdmittedBuckets final : public internal::RateHold {
 public:
  AdmittedBuckets(RateBuckets* owner,
                  std::vector<RateBuckets::BucketRef> buckets)
      : owner_(owner), buckets_(std::move(buckets)) {}
  Status Hold(Duration duration) override {
    owner_->Hold(buckets_, duration);
    return Status::OK();
  }

 private:
  RateBuckets* owner_;
  std::vector<RateBuckets::BucketRef> buckets_;
};

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_RATE_BUCKETS_H_
