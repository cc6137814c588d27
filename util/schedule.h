// Schedule: when a periodic task is due.
//
// A Schedule is the time arithmetic behind periodic tasks, and nothing more:
// given a time it says which slot comes next. The runtime enqueues one task
// per slot and deduplicates by slot time, so slot times must be a pure
// function of the schedule: the same spec gives the same slots in every
// process, before and after a restart.
//
// All times are UTC. There are no time zones and no daylight-saving rules:
// every day has 24 hours, so no slot is ever skipped or repeated.
//
// Two kinds of spec are accepted:
//
//   Cron, five fields separated by spaces or tabs:
//
//     minute        0-59
//     hour          0-23
//     day-of-month  1-31
//     month         1-12 or jan-dec
//     day-of-week   0-7 or sun-sat (0 and 7 are both Sunday)
//
//   Each field is a comma-separated list of elements; an element is '*', a
//   value, or a range 'a-b', optionally followed by '/step' ('*/15',
//   '8-18/2'). Names are case-insensitive and may appear in ranges
//   ('mon-fri'). Slots fall on whole minutes. As in Vixie cron and cronie
//   (see Debian's crontab(5)), when both day fields are restricted, that
//   is, neither contains '*', a day matches if EITHER matches
//   ('0 0 13 * 5' fires on the 13th and on every Friday); otherwise a day
//   must match both ('0 0 * * 5' fires on Fridays only, and so does the
//   Vixie quirk '0 0 */2 * 5', on odd-numbered days that are Fridays).
//
//   The macros @hourly, @daily (or @midnight), @weekly, @monthly and
//   @yearly (or @annually) stand for '0 * * * *', '0 0 * * *',
//   '0 0 * * 0', '0 0 1 * *' and '0 0 1 1 *'.
//
//   Interval: 'every <n><unit>' with unit s, m, h or d, e.g. 'every 30s',
//   'every 5m', 'every 2h', 'every 1d', from 1 second to 365 days. Slots are
//   the multiples of the interval since the Unix epoch (so 'every 1d' fires
//   at 00:00 UTC, and 'every 7d' on Thursdays, as 1970-01-01 was one); they
//   do not depend on when the schedule was created or the process started.
//
// Thread safety: a Schedule is an immutable value; const methods may be
// called from any number of threads.

#ifndef SPOOL_UTIL_SCHEDULE_H_
#define SPOOL_UTIL_SCHEDULE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <spool/status.h>
#include <spool/task.h>

namespace spool {

class Schedule {
 public:
  // Parses a cron expression, a macro or an interval (see the file
  // comment). Leading and trailing whitespace is ignored. On failure returns
  // InvalidArgument naming the field and the offending token, e.g.
  // "cron field 'hour': 24 is out of range 0-23".
  static Result<Schedule> Parse(std::string_view spec);

  // The first slot strictly after `t`.
  //
  // Empty only if the schedule can never fire (a cron spec naming days that
  // do not exist, such as '0 0 30 2 *'; see NeverFires), or if the slot would
  // lie beyond the range of Timestamp. Otherwise the slot is found however
  // far away it is: '0 0 29 2 *' called in March 2096 returns 2104-02-29,
  // as 2100 is not a leap year. The search goes field by field (month, then
  // day, hour, minute) and visits at most a few hundred days per year of
  // distance, so even the sparsest schedules take microseconds.
  std::optional<Timestamp> NextAfter(Timestamp t) const;

  // The slots s with after < s <= up_to, earliest first, at most `limit` of
  // them. To catch up after downtime in bounded batches, call again with
  // `after` set to the last slot returned until fewer than `limit` come back.
  std::vector<Timestamp> SlotsBetween(Timestamp after, Timestamp up_to,
                                      size_t limit) const;

  // The canonical spec: Parse(ToString()) equals *this, and two cron specs
  // that fire at the same times have the same canonical form (unless they
  // never fire, in which case each keeps its own fields). Cron specs are
  // written as five numeric fields, never names or macros: '@daily' and
  // '0 0 1-31 * 0-7' both become '0 0 * * *', 'mon-fri' becomes '1-5',
  // '0,15,30,45' becomes '*/15'. Intervals use the largest unit that
  // divides them: 'every 120s' becomes 'every 2m'. (An interval and a cron
  // spec never compare equal, even where 'every 1m' and '* * * * *' fire
  // alike.)
  std::string ToString() const;

  // True if this is a cron spec whose day fields can never both be satisfied
  // in any year, such as '0 0 30 2 *' or '0 0 31 4,6,9,11 *'. Such a spec
  // parses (its fields are each valid) but has no slots; callers that
  // register schedules may want to reject it.
  bool NeverFires() const;

  // True for 'every ...' schedules, false for cron specs and macros.
  bool is_interval() const { return interval_us_ != 0; }

  // Equal when the canonical forms are equal; see ToString().
  friend bool operator==(const Schedule& a, const Schedule& b);
  friend bool operator!=(const Schedule& a, const Schedule& b) {
    return !(a == b);
  }

 private:
  Schedule() = default;

  // Normalizes the day fields so that equal behaviour means equal members;
  // see the definition.
  void NormalizeDayFields();
  bool DayMatches(int64_t day, int day_of_month) const;
  std::optional<Timestamp> NextCronSlot(Timestamp t) const;
  std::optional<Timestamp> NextIntervalSlot(Timestamp t) const;

  // The interval in microseconds, or 0 for a cron spec.
  int64_t interval_us_ = 0;

  // Cron fields as bit sets: bit v is set when value v matches.
  uint64_t minutes_ = 0;        // Bits 0-59.
  uint32_t hours_ = 0;          // Bits 0-23.
  uint32_t days_of_month_ = 0;  // Bits 1-31.
  uint16_t months_ = 0;         // Bits 1-12.
  uint8_t days_of_week_ = 0;    // Bits 0-6, 0 = Sunday (7 is folded into 0).
  // Whether a day must match both day fields (a field contained '*') or
  // either one (both restricted); see the file comment.
  bool days_match_both_ = true;
  // After NormalizeDayFields: which day field ToString writes with '*' so
  // that parsing the canonical form selects the same rule.
  bool star_day_of_month_ = true;
  bool star_day_of_week_ = true;
  bool never_fires_ = false;
};

}  // namespace spool

#endif  // SPOOL_UTIL_SCHEDULE_H_
