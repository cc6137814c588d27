// RateBuckets (actors/rate_buckets.h).

#include "actors/rate_buckets.h"

#include <algorithm>
#include <exception>

#include "storage/keys.h"

namespace spool::actors {
namespace {

// The longest limit name, as the longest task type.
constexpr size_t kMaxNameBytes = 256;
// A reservation whose task has not come back this long after its slot is
// dropped (the task was cancelled or deleted meanwhile); should it come
// back later still, it is simply admitted afresh.
constexpr int64_t kReservationGraceUs = 10LL * 60 * 1000 * 1000;
constexpr size_t kFirstSweep = 1024;

std::string Named(const std::string& name, const std::string& what) {
  return "rate limit '" + name + "': " + what;
}

}  // namespace

RateBuckets::RateBuckets(
    std::shared_ptr<Clock> clock,
    std::function<std::string(std::string_view)> stored_key)
    : clock_(std::move(clock)), stored_key_(std::move(stored_key)) {}

Status RateBuckets::Add(Limit limit) {
  const std::string name = limit.name;
  if (name.empty()) return Status::InvalidArgument("AddRateLimit needs a name");
  if (name.size() > kMaxNameBytes) {
    return Status::InvalidArgument(
        "AddRateLimit: name is " + std::to_string(name.size()) +
        " bytes; the limit is " + std::to_string(kMaxNameBytes));
  }
  if (limit.rate.count == 0) {
    return Status::InvalidArgument(Named(name, "count must be > 0"));
  }
  if (limit.rate.period < std::chrono::milliseconds(1) ||
      limit.rate.period > std::chrono::hours(24)) {
    return Status::InvalidArgument(
        Named(name, "period must be between 1 ms and 24 h, got " +
                        std::to_string(limit.rate.period.count()) + " us"));
  }
  if (limit.types.empty()) {
    return Status::InvalidArgument(Named(name, "types must name a type"));
  }
  for (const std::string& type : limit.types) {
    if (type.empty()) {
      return Status::InvalidArgument(Named(name, "types holds an empty type"));
    }
  }
  for (const auto& existing : limits_) {
    if (existing->limit.name == name) {
      return Status::FailedPrecondition(Named(name, "already added"));
    }
  }
  auto state = std::make_unique<LimitState>();
  int64_t period = limit.rate.period.count();
  state->interval = std::max<int64_t>(period / limit.rate.count, 1);
  state->burst = period - state->interval;
  auto index = static_cast<uint32_t>(limits_.size());
  std::sort(limit.types.begin(), limit.types.end());
  limit.types.erase(std::unique(limit.types.begin(), limit.types.end()),
                    limit.types.end());
  for (const std::string& type : limit.types) by_type_[type].push_back(index);
  state->limit = std::move(limit);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto stored = restored_.find(name); stored != restored_.end()) {
    for (auto& [key, tat] : stored->second) {
      state->buckets[key] = Bucket{tat, tat, 0};
      ++bucket_total_;
    }
    restored_.erase(stored);
  }
  limits_.push_back(std::move(state));
  return Status::OK();
}

Status RateBuckets::KeysOf(const std::string& type, const TaskContext& attempt,
                           std::vector<BucketRef>* out) const {
  auto it = by_type_.find(type);
  if (it == by_type_.end()) return Status::OK();
  for (uint32_t index : it->second) {
    const Limit& limit = limits_[index]->limit;
    std::string key;
    if (limit.key_of) {
      try {
        key = limit.key_of(attempt);
      } catch (const std::exception& e) {
        return Status::Aborted(Named(limit.name, "key_of threw: ") + e.what());
      } catch (...) {
        return Status::Aborted(
            Named(limit.name, "key_of threw a non-standard exception"));
      }
      if (key.size() > kMaxRateKeyBytes) {
        return Status::InvalidArgument(Named(
            limit.name,
            "key_of returned a key of " + std::to_string(key.size()) +
                " bytes; the limit is " + std::to_string(kMaxRateKeyBytes)));
      }
      if (stored_key_ && !key.empty()) key = stored_key_(key);
    }
    out->push_back(BucketRef{index, std::move(key)});
  }
  return Status::OK();
}

RateBuckets::Bucket& RateBuckets::BucketOf(const BucketRef& ref) {
  auto [it, added] = limits_[ref.limit]->buckets.try_emplace(ref.key);
  if (added) ++bucket_total_;
  return it->second;
}

bool RateBuckets::ReservationHolds(const Reservation& reservation) const {
  for (const BucketRef& ref : reservation.buckets) {
    const auto& buckets = limits_[ref.limit]->buckets;
    auto it = buckets.find(ref.key);
    if (it != buckets.end() && it->second.held_until > reservation.at) {
      return false;
    }
  }
  return true;
}

void RateBuckets::Spend(const std::vector<BucketRef>& buckets, int64_t at) {
  for (const BucketRef& ref : buckets) {
    int64_t interval = limits_[ref.limit]->interval;
    Bucket& bucket = BucketOf(ref);
    bucket.tat = std::max(bucket.tat, at) + interval;
    bucket.stored = std::max(bucket.stored, at) + interval;
    Changed(ref);
  }
}

void RateBuckets::Reserve(const std::vector<BucketRef>& buckets, int64_t at) {
  for (const BucketRef& ref : buckets) {
    Bucket& bucket = BucketOf(ref);
    bucket.tat = std::max(bucket.tat, at) + limits_[ref.limit]->interval;
  }
}

RateBuckets::Verdict RateBuckets::Admit(TaskId id, const std::string& type,
                                        const TaskContext& attempt) {
  Verdict verdict;
  std::vector<BucketRef> refs;
  verdict.status = KeysOf(type, attempt, &refs);
  if (!verdict.status.ok() || refs.empty()) return verdict;
  int64_t now = clock_->Now().time_since_epoch().count();

  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = reserved_.find(id); it != reserved_.end()) {
    Reservation& reservation = it->second;
    if (reservation.buckets.size() == refs.size() &&
        std::equal(refs.begin(), refs.end(), reservation.buckets.begin(),
                   [](const BucketRef& a, const BucketRef& b) {
                     return a.limit == b.limit && a.key == b.key;
                   }) &&
        ReservationHolds(reservation)) {
      if (now < reservation.at) {
        verdict.wait_until_us = reservation.at;  // back early: wait again
        return verdict;
      }
      // Its slot comes: it starts as if it had started then, which its
      // reservation already counted in tat.
      for (const BucketRef& ref : refs) {
        Bucket& bucket = BucketOf(ref);
        bucket.stored = std::max(bucket.stored, reservation.at) +
                        limits_[ref.limit]->interval;
        Changed(ref);
      }
      reserved_.erase(it);
      verdict.buckets = std::move(refs);
      return verdict;
    }
    reserved_.erase(it);  // voided by a hold, or its buckets changed
  }

  int64_t earliest = now;
  for (const BucketRef& ref : refs) {
    const Bucket& bucket = BucketOf(ref);
    earliest = std::max(earliest, bucket.tat - limits_[ref.limit]->burst);
  }
  if (earliest <= now) {
    Spend(refs, now);
    verdict.buckets = std::move(refs);
  } else {
    for (const BucketRef& ref : refs) {
      LimitState& state = *limits_[ref.limit];
      if (BucketOf(ref).tat - state.burst > now) ++state.deferred;
    }
    Reserve(refs, earliest);
    reserved_[id] = Reservation{earliest, std::move(refs)};
    verdict.wait_until_us = earliest;
  }
  MaybeSweep(now);
  return verdict;
}

void RateBuckets::Hold(const std::vector<BucketRef>& buckets,
                       Duration duration) {
  int64_t until_us = clock_->Now().time_since_epoch().count() +
                     std::max<int64_t>(duration.count(), 0);
  std::lock_guard<std::mutex> lock(mu_);
  for (const BucketRef& ref : buckets) {
    int64_t burst = limits_[ref.limit]->burst;
    Bucket& bucket = BucketOf(ref);
    // The first attempt after the hold is allowed at until_us, and the
    // bucket refills from there rather than bursting.
    bucket.tat = std::max(bucket.tat, until_us + burst);
    bucket.stored = std::max(bucket.stored, until_us + burst);
    bucket.held_until = std::max(bucket.held_until, until_us);
    Changed(ref);
  }
}

void RateBuckets::MaybeSweep(int64_t now) {
  if (bucket_total_ + reserved_.size() < sweep_at_) return;
  for (uint32_t index = 0; index < limits_.size(); ++index) {
    auto& buckets = limits_[index]->buckets;
    for (auto it = buckets.begin(); it != buckets.end();) {
      const Bucket& bucket = it->second;
      if (bucket.tat > now || bucket.stored > now || bucket.held_until > now) {
        ++it;
        continue;
      }
      changed_.emplace(index, it->first);
      it = buckets.erase(it);
      --bucket_total_;
    }
  }
  for (auto it = reserved_.begin(); it != reserved_.end();) {
    if (it->second.at + kReservationGraceUs < now) {
      it = reserved_.erase(it);
    } else {
      ++it;
    }
  }
  sweep_at_ = std::max(kFirstSweep, 2 * (bucket_total_ + reserved_.size()));
}

void RateBuckets::Restore(std::string_view name, std::string_view key,
                          int64_t tat_us) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& state : limits_) {
    if (state->limit.name != name) continue;
    auto [it, added] =
        state->buckets.try_emplace(std::string(key), Bucket{tat_us, tat_us, 0});
    if (added) ++bucket_total_;
    return;
  }
  restored_[std::string(name)].emplace_back(std::string(key), tat_us);
}

std::vector<std::string> RateBuckets::TakeUnusedRestored() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> keys;
  for (const auto& [name, buckets] : restored_) {
    for (const auto& [key, tat] : buckets) keys.push_back(StateKey(name, key));
  }
  restored_.clear();
  return keys;
}

std::vector<std::pair<std::string, uint64_t>> RateBuckets::Deferrals() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<std::string, uint64_t>> out;
  out.reserve(limits_.size());
  for (const auto& state : limits_) {
    out.emplace_back(state->limit.name, state->deferred);
  }
  return out;
}

void RateBuckets::TakeChanges(
    std::vector<std::pair<std::string, std::string>>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t now = clock_->Now().time_since_epoch().count();
  for (const auto& [index, key] : changed_) {
    const LimitState& state = *limits_[index];
    std::string value;
    auto it = state.buckets.find(key);
    // A bucket whose stored time passed allows what a new one does: its
    // stored state goes.
    if (it != state.buckets.end() && it->second.stored > now) {
      storage::PutBigEndian64(&value, storage::EncodeTime(it->second.stored));
    }
    out->emplace_back(StateKey(state.limit.name, key), std::move(value));
  }
  changed_.clear();
}

std::string RateBuckets::StateKey(std::string_view name, std::string_view key) {
  std::string stored(kStatePrefix);
  storage::PutKeyString(&stored, name);
  storage::PutKeyString(&stored, key);
  return stored;
}

size_t RateBuckets::bucket_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bucket_total_;
}

size_t RateBuckets::reservation_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reserved_.size();
}

}  // namespace spool::actors

namespace spool {
namespace {
// The longest hold, as the longest snooze: 365 days.
constexpr Duration kMaxHold = kMaxDelay;
}  // namespace

// Here, beside RateHold, rather than with the other TaskContext methods in
// attempt_control.cc: only this one reaches the buckets.
Status TaskContext::HoldRateLimits(Duration duration) {
  if (duration < Duration(0) || duration > kMaxHold) {
    return Status::InvalidArgument(
        "HoldRateLimits: duration must be between 0 and 365 days, got " +
        std::to_string(duration.count()) + " us");
  }
  if (rate_hold_ == nullptr) {
    return Status::FailedPrecondition(
        "HoldRateLimits: no named rate limit (Runtime::AddRateLimit) admitted "
        "this attempt of task type '" +
        std::string(type_) +
        "': none covers the type, or the attempt runs on a remote worker");
  }
  return rate_hold_->Hold(duration);
}

}  // namespace spool
