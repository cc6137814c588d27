// Calendar arithmetic on the proleptic Gregorian calendar, in UTC, after
// Howard Hinnant's days_from_civil and civil_from_days
// (http://howardhinnant.github.io/date_algorithms.html). Days are counted
// from 1970-01-01. Shared by cron schedules (util/schedule.cc) and the
// RFC 3339 times of the JSON output (storage/record_json.cc); inline,
// because the JSON writer formats a time per field.

#ifndef SPOOL_UTIL_CIVIL_TIME_H_
#define SPOOL_UTIL_CIVIL_TIME_H_

#include <cstdint>

namespace spool {

// The Gregorian calendar repeats every 400 years, which is 146097 days and
// also a whole number of weeks, so any pattern of months, days and weekdays
// that occurs at all occurs within every span of that many days.
inline constexpr int64_t kDaysPerGregorianCycle = 146097;

// a / b rounded towards negative infinity, so that times before the epoch
// fall into the right second and day. REQUIRES: b > 0.
inline int64_t FloorDiv(int64_t a, int64_t b) {
  const int64_t quotient = a / b;
  return a % b < 0 ? quotient - 1 : quotient;
}

// a mod b in [0, b). REQUIRES: b > 0.
inline int64_t FloorMod(int64_t a, int64_t b) {
  const int64_t remainder = a % b;
  return remainder < 0 ? remainder + b : remainder;
}

struct CivilDate {
  int64_t year;
  int month;  // 1..12
  int day;    // 1..31
};

// The day number of a date. REQUIRES: a valid month and day.
inline int64_t DaysFromCivil(int64_t year, int month, int day) {
  year -= month <= 2 ? 1 : 0;
  const int64_t era = FloorDiv(year, 400);
  const int64_t year_of_era = year - era * 400;                     // 0..399
  const int64_t shifted_month = month > 2 ? month - 3 : month + 9;  // Mar = 0
  const int64_t day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
  const int64_t day_of_era =
      year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  return era * kDaysPerGregorianCycle + day_of_era - 719468;
}

// The date `days` after 1970-01-01; exact for any day count derived from an
// int64_t microsecond time.
inline CivilDate CivilFromDays(int64_t days) {
  days += 719468;  // Shift the epoch to 0000-03-01.
  const int64_t era = FloorDiv(days, kDaysPerGregorianCycle);
  const int64_t day_of_era = days - era * kDaysPerGregorianCycle;  // 0..146096
  const int64_t year_of_era = (day_of_era - day_of_era / 1460 +
                               day_of_era / 36524 - day_of_era / 146096) /
                              365;  // 0..399
  const int64_t day_of_year =
      day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
  const int64_t shifted_month = (5 * day_of_year + 2) / 153;  // March = 0
  const int day =
      static_cast<int>(day_of_year - (153 * shifted_month + 2) / 5 + 1);
  const int month = static_cast<int>(shifted_month < 10 ? shifted_month + 3
                                                        : shifted_month - 9);
  return CivilDate{year_of_era + era * 400 + (month <= 2 ? 1 : 0), month, day};
}

}  // namespace spool

#endif  // SPOOL_UTIL_CIVIL_TIME_H_
