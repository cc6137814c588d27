#include "util/schedule.h"

#include <array>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <random>
#include <string>
#include <string_view>
#include <time.h>
#include <vector>

#include <gtest/gtest.h>

namespace spool {
namespace {

constexpr int64_t kMicrosPerMinute = 60'000'000;

// Builds a UTC time with the C library, so that the tests do not lean on the
// calendar code under test.
Timestamp At(int year, int month, int day, int hour = 0, int minute = 0,
             int second = 0, int64_t micros = 0) {
  struct tm tm = {};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  const int64_t seconds = timegm(&tm);
  return Timestamp(Duration(seconds * 1'000'000 + micros));
}

std::string Show(Timestamp t) {
  const int64_t us = t.time_since_epoch().count();
  const time_t seconds =
      static_cast<time_t>(us / 1'000'000 - (us % 1'000'000 < 0 ? 1 : 0));
  struct tm tm;
  gmtime_r(&seconds, &tm);
  static const char* const kWeekdays[] = {"Sun", "Mon", "Tue", "Wed",
                                          "Thu", "Fri", "Sat"};
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%04d-%02d-%02d %02d:%02d:%02d (%s)",
                tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                tm.tm_min, tm.tm_sec, kWeekdays[tm.tm_wday]);
  return buffer;
}

std::string Show(const std::optional<Timestamp>& t) {
  return t.has_value() ? Show(*t) : std::string("none");
}

Schedule MustParse(std::string_view spec) {
  Result<Schedule> result = Schedule::Parse(spec);
  EXPECT_TRUE(result.ok()) << spec << ": " << result.status().ToString();
  if (!result.ok()) return Schedule::Parse("* * * * *").value();
  return std::move(result).value();
}

// ---------------------------------------------------------------------------
// A slow, independent reference: each field is evaluated straight from its
// text for one value at a time, and time advances one minute per step.

const char* const kRefMonthNames[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                      "jul", "aug", "sep", "oct", "nov", "dec"};
const char* const kRefDayNames[] = {"sun", "mon", "tue", "wed",
                                    "thu", "fri", "sat"};

int RefValue(std::string_view token, int field) {
  std::string lower(token);
  for (char& c : lower) c = static_cast<char>(std::tolower(c));
  if (field == 3) {
    for (int i = 0; i < 12; ++i) {
      if (lower == kRefMonthNames[i]) return i + 1;
    }
  }
  if (field == 4) {
    for (int i = 0; i < 7; ++i) {
      if (lower == kRefDayNames[i]) return i;
    }
  }
  return std::stoi(lower);
}

// Whether `value` matches field number `field` (0 = minute ... 4 = weekday).
bool RefFieldMatches(const std::string& text, int field, int value) {
  static constexpr int kMin[] = {0, 0, 1, 1, 0};
  static constexpr int kMax[] = {59, 23, 31, 12, 6};
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string element = text.substr(start, comma - start);
    start = comma + 1;
    const size_t slash = element.find('/');
    const std::string base = element.substr(0, slash);
    const int step =
        slash == std::string::npos ? 1 : std::stoi(element.substr(slash + 1));
    int lo, hi;
    if (base == "*") {
      lo = kMin[field];
      hi = kMax[field];
    } else if (base.find('-') != std::string::npos) {
      lo = RefValue(base.substr(0, base.find('-')), field);
      hi = RefValue(base.substr(base.find('-') + 1), field);
    } else {
      lo = hi = RefValue(base, field);
    }
    for (int v = lo; v <= hi; v += step) {
      if (v == value || (field == 4 && v == 7 && value == 0)) return true;
    }
  }
  return false;
}

std::vector<std::string> RefFields(const std::string& spec) {
  std::string expanded = spec;
  if (spec == "@hourly") expanded = "0 * * * *";
  if (spec == "@daily" || spec == "@midnight") expanded = "0 0 * * *";
  if (spec == "@weekly") expanded = "0 0 * * 0";
  if (spec == "@monthly") expanded = "0 0 1 * *";
  if (spec == "@yearly" || spec == "@annually") expanded = "0 0 1 1 *";
  std::vector<std::string> fields;
  size_t i = 0;
  while (i < expanded.size()) {
    while (i < expanded.size() && expanded[i] == ' ') ++i;
    const size_t start = i;
    while (i < expanded.size() && expanded[i] != ' ') ++i;
    if (i > start) fields.push_back(expanded.substr(start, i - start));
  }
  return fields;
}

// The expression compiled into tables, each entry computed by
// RefFieldMatches.
struct RefCron {
  explicit RefCron(const std::string& spec) {
    const std::vector<std::string> fields = RefFields(spec);
    for (int v = 0; v < 60; ++v) minute[v] = RefFieldMatches(fields[0], 0, v);
    for (int v = 0; v < 24; ++v) hour[v] = RefFieldMatches(fields[1], 1, v);
    for (int v = 1; v <= 31; ++v) {
      day_of_month[v] = RefFieldMatches(fields[2], 2, v);
    }
    for (int v = 1; v <= 12; ++v) month[v] = RefFieldMatches(fields[3], 3, v);
    for (int v = 0; v < 7; ++v) {
      day_of_week[v] = RefFieldMatches(fields[4], 4, v);
    }
    // Vixie cron: "restricted" means the field does not contain '*'.
    either_day = fields[2].find('*') == std::string::npos &&
                 fields[4].find('*') == std::string::npos;
  }

  bool DayMatches(int mday, int wday) const {
    return either_day ? (day_of_month[mday] || day_of_week[wday])
                      : (day_of_month[mday] && day_of_week[wday]);
  }

  std::array<bool, 60> minute{};
  std::array<bool, 24> hour{};
  std::array<bool, 32> day_of_month{};
  std::array<bool, 13> month{};
  std::array<bool, 7> day_of_week{};
  bool either_day = false;
};

bool RefIsLeap(int year) {
  return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
}

int RefDaysInMonth(int year, int month) {
  static constexpr int kDays[] = {0,  31, 28, 31, 30, 31, 30,
                                  31, 31, 30, 31, 30, 31};
  return month == 2 && RefIsLeap(year) ? 29 : kDays[month];
}

// The first matching minute after t, trying every minute up to `max_minutes`
// ahead; empty if none.
std::optional<Timestamp> RefNextAfter(const RefCron& cron, Timestamp t,
                                      int64_t max_minutes) {
  const int64_t us = t.time_since_epoch().count();
  int64_t minute_index =
      us / kMicrosPerMinute - (us % kMicrosPerMinute < 0 ? 1 : 0) + 1;
  const time_t start = static_cast<time_t>(minute_index * 60);
  struct tm tm;
  gmtime_r(&start, &tm);
  int year = tm.tm_year + 1900, month = tm.tm_mon + 1, mday = tm.tm_mday;
  int wday = tm.tm_wday, hour = tm.tm_hour, minute = tm.tm_min;
  for (int64_t step = 0; step < max_minutes; ++step, ++minute_index) {
    if (cron.month[month] && cron.DayMatches(mday, wday) && cron.hour[hour] &&
        cron.minute[minute]) {
      // Cross-check the incremental calendar against the C library.
      const time_t found = static_cast<time_t>(minute_index * 60);
      gmtime_r(&found, &tm);
      EXPECT_TRUE(tm.tm_year + 1900 == year && tm.tm_mon + 1 == month &&
                  tm.tm_mday == mday && tm.tm_wday == wday &&
                  tm.tm_hour == hour && tm.tm_min == minute)
          << "reference calendar drifted";
      return Timestamp(Duration(minute_index * kMicrosPerMinute));
    }
    if (++minute < 60) continue;
    minute = 0;
    if (++hour < 24) continue;
    hour = 0;
    wday = (wday + 1) % 7;
    if (++mday <= RefDaysInMonth(year, month)) continue;
    mday = 1;
    if (++month <= 12) continue;
    month = 1;
    ++year;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// Parsing and canonical form

TEST(ScheduleParseTest, CanonicalForms) {
  const std::pair<const char*, const char*> cases[] = {
      {"* * * * *", "* * * * *"},
      {"0 0 * * *", "0 0 * * *"},
      {"  0\t0   * *  *  ", "0 0 * * *"},
      {"*/15 * * * *", "*/15 * * * *"},
      {"0,15,30,45 * * * *", "*/15 * * * *"},
      {"0-59/15 * * * *", "*/15 * * * *"},
      {"0-59 0-23 * 1-12 *", "* * * * *"},
      {"*/1 * * * *", "* * * * *"},
      {"*/30 * * * *", "0,30 * * * *"},
      {"*/20 * * * *", "*/20 * * * *"},
      {"0 */8 * * *", "0 */8 * * *"},
      {"0 0 1 */4 *", "0 0 1 */4 *"},
      {"0 0 1 */6 *", "0 0 1 1,7 *"},
      {"5-10 * * * *", "5-10 * * * *"},
      {"1,2 * * * *", "1,2 * * * *"},
      {"10-50/20 * * * *", "10-50/20 * * * *"},
      {"10-55/20 * * * *", "10-50/20 * * * *"},
      {"1,2,3,10,20 * * * *", "1-3,10,20 * * * *"},
      {"59,0,30 * * * *", "0,30,59 * * * *"},
      {"05 07 * * *", "5 7 * * *"},
      {"0 9-17 * * mon-fri", "0 9-17 * * 1-5"},
      {"0 9-17 * * MON-Fri", "0 9-17 * * 1-5"},
      {"0 0 1 jan,JUL *", "0 0 1 1,7 *"},
      {"0 0 1 jan-dec *", "0 0 1 * *"},
      {"0 0 * * 7", "0 0 * * 0"},
      {"0 0 * * sun", "0 0 * * 0"},
      {"0 0 * * 5-7", "0 0 * * 0,5,6"},
      {"0 0 * * 0,7", "0 0 * * 0"},
      // Day fields: a field that matches every day makes the other decide
      // (or, under the either rule, makes every day match).
      {"0 0 * * 0-7", "0 0 * * *"},
      {"0 0 * * 0-6", "0 0 * * *"},
      {"0 0 1-31 * *", "0 0 * * *"},
      {"0 0 1 * 0-6", "0 0 * * *"},
      {"0 0 1-31 * 1", "0 0 * * *"},
      {"0 0 1-31 * mon", "0 0 * * *"},
      {"0 0 13 * 5", "0 0 13 * 5"},
      {"0 0 */2 * 1", "0 0 */2 * 1"},
      {"0 0 1-31/2 * 1", "0 0 1-31/2 * 1"},
      {"0 0 * * */2", "0 0 * * 0-6/2"},
      {"0 0 15 * */2", "0 0 15 * */2"},
      {"0 0 1,15 * */2", "0 0 1,15 * */2"},
      {"0 0 1-7 * */7", "0 0 1-7 * */7"},
      {"0 0 */7 * *", "0 0 1-29/7 * *"},
      // Days that cannot occur in the chosen months.
      {"0 0 1-29 2 *", "0 0 * 2 *"},
      {"0 0 1-30 2,4 *", "0 0 * 2,4 *"},
      {"0 0 31 * *", "0 0 31 1,3,5,7,8,10,12 *"},
      {"0 0 30 2 1", "0 0 * 2 1"},
      {"0 0 30,31 2 mon", "0 0 * 2 1"},
      {"0 0 29-31 * *", "0 0 29-31 * *"},
      // Macros.
      {"@hourly", "0 * * * *"},
      {"@daily", "0 0 * * *"},
      {"@midnight", "0 0 * * *"},
      {"@weekly", "0 0 * * 0"},
      {"@monthly", "0 0 1 * *"},
      {"@yearly", "0 0 1 1 *"},
      {"@annually", "0 0 1 1 *"},
      {" @daily ", "0 0 * * *"},
      // Intervals.
      {"every 30s", "every 30s"},
      {"every 60s", "every 1m"},
      {"every 90s", "every 90s"},
      {"every 5m", "every 5m"},
      {"every 90m", "every 90m"},
      {"every 120m", "every 2h"},
      {"every 2h", "every 2h"},
      {"every 24h", "every 1d"},
      {"every 1d", "every 1d"},
      {"every 365d", "every 365d"},
      {"every   007m", "every 7m"},
  };
  for (const auto& [spec, canonical] : cases) {
    const Schedule schedule = MustParse(spec);
    EXPECT_EQ(schedule.ToString(), canonical) << spec;
    const Schedule reparsed = MustParse(schedule.ToString());
    EXPECT_EQ(reparsed, schedule) << spec;
    EXPECT_EQ(reparsed.ToString(), canonical) << spec;
  }
}

TEST(ScheduleParseTest, EqualityFollowsBehaviour) {
  EXPECT_EQ(MustParse("@daily"), MustParse("0 0 * * *"));
  EXPECT_EQ(MustParse("0 0 * * 7"), MustParse("0 0 * * sun"));
  EXPECT_EQ(MustParse("0 0 1 * 0-6"), MustParse("0 0 * * *"));
  EXPECT_EQ(MustParse("0 0 30 2 1"), MustParse("0 0 * feb mon"));
  EXPECT_EQ(MustParse("every 60m"), MustParse("every 1h"));
  EXPECT_NE(MustParse("0 0 13 * 5"), MustParse("0 0 13 * *"));
  EXPECT_NE(MustParse("0 0 */2 * 1"), MustParse("0 0 1-31/2 * 1"));
  EXPECT_NE(MustParse("every 1m"), MustParse("* * * * *"));
  EXPECT_TRUE(MustParse("every 1m").is_interval());
  EXPECT_FALSE(MustParse("@hourly").is_interval());
}

struct ErrorCase {
  const char* spec;
  const char* message;
};

TEST(ScheduleParseTest, ErrorsNameTheFieldAndToken) {
  const ErrorCase cases[] = {
      {"", "schedule is empty"},
      {"   \t ", "schedule is empty"},
      {"* * * *",
       "cron expression '* * * *' needs 5 fields (minute hour day-of-month "
       "month day-of-week), got 4"},
      {"0 * * * * *",
       "cron expression '0 * * * * *' needs 5 fields (minute hour "
       "day-of-month month day-of-week), got 6"},
      {"60 * * * *", "cron field 'minute': 60 is out of range 0-59"},
      {"* 24 * * *", "cron field 'hour': 24 is out of range 0-23"},
      {"* * 0 * *", "cron field 'day-of-month': 0 is out of range 1-31"},
      {"* * 32 * *", "cron field 'day-of-month': 32 is out of range 1-31"},
      {"* * * 0 *", "cron field 'month': 0 is out of range 1-12"},
      {"* * * 13 *", "cron field 'month': 13 is out of range 1-12"},
      {"* * * * 8", "cron field 'day-of-week': 8 is out of range 0-7"},
      {"1-60 * * * *", "cron field 'minute': 60 is out of range 0-59"},
      {"99999999999 * * * *",
       "cron field 'minute': 99999999999 is out of range 0-59"},
      {"x * * * *", "cron field 'minute': 'x' is not a number"},
      {"jan * * * *", "cron field 'minute': 'jan' is not a number"},
      {"** * * * *", "cron field 'minute': '**' is not a number"},
      {"5x * * * *", "cron field 'minute': '5x' is not a number"},
      {"* * * foo *",
       "cron field 'month': 'foo' is not a number or month name"},
      {"* * * january *",
       "cron field 'month': 'january' is not a number or month name"},
      {"* * * * funday",
       "cron field 'day-of-week': 'funday' is not a number or day name"},
      {"* * mon * *", "cron field 'day-of-month': 'mon' is not a number"},
      {"5-1 * * * *",
       "cron field 'minute': range '5-1' is reversed (its start is after its "
       "end)"},
      {"* * * * sat-sun",
       "cron field 'day-of-week': range 'sat-sun' is reversed (its start is "
       "after its end)"},
      {"-5 * * * *", "cron field 'minute': '-5' is not a valid range"},
      {"5- * * * *", "cron field 'minute': '5-' is not a valid range"},
      {"1-2-3 * * * *", "cron field 'minute': '1-2-3' is not a valid range"},
      {"1,,2 * * * *", "cron field 'minute': empty list element in '1,,2'"},
      {",1 * * * *", "cron field 'minute': empty list element in ',1'"},
      {"1, * * * *", "cron field 'minute': empty list element in '1,'"},
      {"*/0 * * * *",
       "cron field 'minute': step 0 in '*/0' is out of range 1-60"},
      {"*/61 * * * *",
       "cron field 'minute': step 61 in '*/61' is out of range 1-60"},
      {"* */25 * * *",
       "cron field 'hour': step 25 in '*/25' is out of range 1-24"},
      {"* * * * */8",
       "cron field 'day-of-week': step 8 in '*/8' is out of range 1-7"},
      {"*/ * * * *", "cron field 'minute': '' is not a valid step in '*/'"},
      {"*/x * * * *", "cron field 'minute': 'x' is not a valid step in '*/x'"},
      {"*/2/3 * * * *",
       "cron field 'minute': '2/3' is not a valid step in '*/2/3'"},
      {"/5 * * * *", "cron field 'minute': '/5' has no value before '/'"},
      {"5/10 * * * *",
       "cron field 'minute': step in '5/10' needs a range or '*', e.g. "
       "'5-59/10'"},
      {"@reboot",
       "unknown schedule macro '@reboot' (expected @hourly, @daily, "
       "@midnight, @weekly, @monthly, @yearly or @annually, alone)"},
      {"@DAILY",
       "unknown schedule macro '@DAILY' (expected @hourly, @daily, "
       "@midnight, @weekly, @monthly, @yearly or @annually, alone)"},
      {"@daily 5",
       "unknown schedule macro '@daily 5' (expected @hourly, @daily, "
       "@midnight, @weekly, @monthly, @yearly or @annually, alone)"},
      {"every",
       "interval 'every': expected 'every <number><unit>' such as 'every "
       "30s'"},
      {"every 5 m",
       "interval 'every 5 m': expected 'every <number><unit>' such as "
       "'every 30s'"},
      {"every 0s", "interval 'every 0s': the interval must be at least 1s"},
      {"every 5", "interval 'every 5': missing unit after '5' (s, m, h or d)"},
      {"every 5x", "interval 'every 5x': unit 'x' is not one of s, m, h, d"},
      {"every 5M", "interval 'every 5M': unit 'M' is not one of s, m, h, d"},
      {"every 1h30m",
       "interval 'every 1h30m': unit 'h30m' is not one of s, m, h, d"},
      {"every s",
       "interval 'every s': 's' does not start with a number (expected e.g. "
       "'30s')"},
      {"every -5s",
       "interval 'every -5s': '-5s' does not start with a number (expected "
       "e.g. '30s')"},
      {"every 366d",
       "interval 'every 366d': '366d' is longer than the limit of 365d"},
      {"every 99999999999s",
       "interval 'every 99999999999s': '99999999999s' is longer than the "
       "limit of 365d"},
  };
  for (const ErrorCase& c : cases) {
    Result<Schedule> result = Schedule::Parse(c.spec);
    ASSERT_FALSE(result.ok()) << c.spec;
    EXPECT_TRUE(result.status().IsInvalidArgument()) << c.spec;
    EXPECT_EQ(result.status().message(), c.message) << c.spec;
  }
}

// ---------------------------------------------------------------------------
// Next slot

TEST(ScheduleNextTest, SimpleCases) {
  const Schedule hourly = MustParse("@hourly");
  EXPECT_EQ(hourly.NextAfter(At(2024, 3, 10, 14, 25)), At(2024, 3, 10, 15, 0));
  // Strictly after: a time exactly on a slot gives the next slot.
  EXPECT_EQ(hourly.NextAfter(At(2024, 3, 10, 15, 0)), At(2024, 3, 10, 16, 0));
  EXPECT_EQ(hourly.NextAfter(At(2024, 3, 10, 14, 59, 59, 999999)),
            At(2024, 3, 10, 15, 0));
  EXPECT_EQ(hourly.NextAfter(At(2024, 12, 31, 23, 30)), At(2025, 1, 1, 0, 0));

  const Schedule every_minute = MustParse("* * * * *");
  EXPECT_EQ(every_minute.NextAfter(At(2024, 3, 10, 14, 25, 0, 1)),
            At(2024, 3, 10, 14, 26));

  const Schedule weekdays = MustParse("30 9 * * mon-fri");
  // 2024-03-08 is a Friday.
  EXPECT_EQ(weekdays.NextAfter(At(2024, 3, 8, 10, 0)), At(2024, 3, 11, 9, 30));

  // Before the epoch too.
  EXPECT_EQ(MustParse("0 0 1 1 *").NextAfter(At(1969, 6, 1)), At(1970, 1, 1));
  EXPECT_EQ(MustParse("@daily").NextAfter(Timestamp(Duration(-1))),
            At(1970, 1, 1));
}

TEST(ScheduleNextTest, LeapDay) {
  const Schedule leap_day = MustParse("0 0 29 2 *");
  EXPECT_FALSE(leap_day.NeverFires());
  EXPECT_EQ(leap_day.NextAfter(At(2023, 3, 1)), At(2024, 2, 29));
  EXPECT_EQ(leap_day.NextAfter(At(2024, 2, 29)), At(2028, 2, 29));
  EXPECT_EQ(leap_day.NextAfter(At(1999, 1, 1)), At(2000, 2, 29));
  // 2100 is not a leap year: eight years from one leap day to the next.
  EXPECT_EQ(leap_day.NextAfter(At(2096, 3, 1)), At(2104, 2, 29));
  EXPECT_EQ(MustParse("59 23 29 feb *").NextAfter(At(2024, 2, 29, 23, 59)),
            At(2028, 2, 29, 23, 59));
}

TEST(ScheduleNextTest, SchedulesThatNeverFire) {
  for (const char* spec :
       {"0 0 30 2 *", "0 0 31 2 *", "0 0 30,31 2 *", "0 0 31 4,6,9,11 *",
        "0 0 31 2,4 *", "0 0 30 2 */7", "* * 31 feb *"}) {
    const Schedule schedule = MustParse(spec);
    EXPECT_TRUE(schedule.NeverFires()) << spec;
    EXPECT_EQ(schedule.NextAfter(At(2024, 1, 1)), std::nullopt) << spec;
    EXPECT_TRUE(
        schedule.SlotsBetween(At(2000, 1, 1), At(2400, 1, 1), 10).empty());
    // Each keeps its own fields.
    EXPECT_EQ(MustParse(schedule.ToString()), schedule) << spec;
  }
  EXPECT_EQ(MustParse("0 0 30 2 *").ToString(), "0 0 30 2 *");
  // With the either rule the weekday still fires.
  EXPECT_FALSE(MustParse("0 0 30 2 1").NeverFires());
  EXPECT_FALSE(MustParse("0 0 31 * *").NeverFires());
}

TEST(ScheduleNextTest, DayOfMonthOrDayOfWeek) {
  // Both restricted: the 13th OR any Friday. 2024-01-05 is a Friday.
  const Schedule either = MustParse("0 0 13 * 5");
  std::vector<Timestamp> expected = {At(2024, 1, 5),  At(2024, 1, 12),
                                     At(2024, 1, 13), At(2024, 1, 19),
                                     At(2024, 1, 26), At(2024, 2, 2)};
  EXPECT_EQ(either.SlotsBetween(At(2024, 1, 1), At(2024, 2, 2), 100), expected);

  // Day-of-month '*': weekdays alone decide.
  EXPECT_EQ(MustParse("0 0 * * 5").NextAfter(At(2024, 1, 6)), At(2024, 1, 12));
  // Day-of-week '*': days of the month alone decide.
  EXPECT_EQ(MustParse("0 0 13 * *").NextAfter(At(2024, 1, 6)), At(2024, 1, 13));

  // A field starting with '*' is unrestricted (Vixie cron), so both must
  // match: the first Sunday of each month. 2024-02-04 is one.
  const Schedule first_sunday = MustParse("0 0 1-7 * */7");
  EXPECT_EQ(first_sunday.NextAfter(At(2024, 1, 8)), At(2024, 2, 4));
  // And odd days of the month that are Mondays; 2024-01-01 is a Monday.
  EXPECT_EQ(
      MustParse("0 0 */2 * 1")
          .SlotsBetween(At(2023, 12, 31), At(2024, 3, 1), 10),
      (std::vector<Timestamp>{At(2024, 1, 1), At(2024, 1, 15), At(2024, 1, 29),
                              At(2024, 2, 5), At(2024, 2, 19)}));
  // Without the '*' the same days are restricted: odd days OR Mondays.
  EXPECT_EQ(MustParse("0 0 1-31/2 * 1").NextAfter(At(2024, 1, 7)),
            At(2024, 1, 8));
}

TEST(ScheduleNextTest, SparseSchedulesAreFoundFast) {
  // February 29th falling on a Sunday: 2004, 2032, 2060, 2088, then 2128,
  // as 2100 is not a leap year.
  const Schedule schedule = MustParse("0 0 29 2 */7");
  EXPECT_EQ(schedule.NextAfter(At(2004, 3, 1)), At(2032, 2, 29));
  EXPECT_EQ(schedule.NextAfter(At(2088, 3, 1)), At(2128, 2, 29));
  // The brute-force reference agrees over the 40 years.
  EXPECT_EQ(RefNextAfter(RefCron("0 0 29 2 */7"), At(2088, 3, 1),
                         int64_t{41} * 366 * 24 * 60),
            At(2128, 2, 29));
  const auto start = std::chrono::steady_clock::now();
  Timestamp t = At(2000, 1, 1);
  for (int i = 0; i < 20; ++i) t = *schedule.NextAfter(t);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  // 20 slots span about 560 years; a minute-by-minute search would take
  // minutes, the field-wise search well under a second even in debug builds.
  EXPECT_LT(elapsed, std::chrono::seconds(1));
  EXPECT_EQ(Show(t).substr(5), "02-29 00:00:00 (Sun)");
}

TEST(ScheduleNextTest, EdgesOfTheTimestampRange) {
  const Timestamp max = Timestamp::max();
  const Timestamp min = Timestamp::min();
  EXPECT_EQ(MustParse("* * * * *").NextAfter(max), std::nullopt);
  EXPECT_EQ(MustParse("every 1s").NextAfter(max), std::nullopt);
  EXPECT_EQ(MustParse("every 365d").NextAfter(max - Duration(1)), std::nullopt);
  const std::optional<Timestamp> first = MustParse("* * * * *").NextAfter(min);
  ASSERT_TRUE(first.has_value());
  EXPECT_GT(*first, min);
  EXPECT_LE(*first - min, std::chrono::minutes(1));
  const std::optional<Timestamp> first_second =
      MustParse("every 1s").NextAfter(min);
  ASSERT_TRUE(first_second.has_value());
  EXPECT_EQ(first_second->time_since_epoch().count() % 1'000'000, 0);
  EXPECT_LE(*first_second - min, std::chrono::seconds(1));
  // The last slot representable; the next one is not.
  const std::optional<Timestamp> last =
      MustParse("* * * * *").NextAfter(max - std::chrono::seconds(90));
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(MustParse("* * * * *").NextAfter(*last), std::nullopt);
}

// ---------------------------------------------------------------------------
// Against the brute-force reference

// Random times between 1999 and 2101, half of them near the boundaries where
// calendars go wrong: month ends, leap days, year ends, exact slot times.
class TimeSource {
 public:
  explicit TimeSource(uint32_t seed) : rng_(seed) {}

  Timestamp Next() {
    if (rng_() % 2 == 0) {
      std::uniform_int_distribution<int64_t> dist(
          At(1999, 1, 1).time_since_epoch().count(),
          At(2101, 12, 31).time_since_epoch().count());
      return Timestamp(Duration(dist(rng_)));
    }
    static constexpr int kSpecialDays[][2] = {
        {1, 1},  {1, 31}, {2, 28}, {2, 29}, {3, 1},   {3, 31},  {4, 30}, {5, 1},
        {6, 30}, {7, 31}, {8, 31}, {9, 30}, {10, 31}, {11, 30}, {12, 31}};
    static constexpr int kYears[] = {1999, 2000, 2001, 2023, 2024,
                                     2096, 2099, 2100, 2101};
    const auto& day = kSpecialDays[rng_() % std::size(kSpecialDays)];
    const int year = kYears[rng_() % std::size(kYears)];
    if (day[0] == 2 && day[1] == 29 && year % 4 != 0) return Next();
    if (day[0] == 2 && day[1] == 29 && year == 2100) return Next();
    const int hour = (rng_() % 2 == 0) ? 23 : static_cast<int>(rng_() % 24);
    const int minute = (rng_() % 2 == 0) ? 59 : static_cast<int>(rng_() % 60);
    Timestamp t = At(year, day[0], day[1], hour, minute);
    switch (rng_() % 3) {
      case 0:
        return t;  // Exactly on a minute, often a slot.
      case 1:
        return t - Duration(1);
      default:
        return t + Duration(rng_() % kMicrosPerMinute);
    }
  }

 private:
  std::mt19937 rng_;
};

// Nine years of minutes: longer than any gap in the specs tested (the
// largest is the eight years around 2100 between leap days).
constexpr int64_t kReferenceHorizonMinutes = int64_t{9} * 366 * 24 * 60;

void CheckAgainstReference(const std::string& spec, int samples,
                           uint32_t seed) {
  const Schedule schedule = MustParse(spec);
  const RefCron reference(spec);
  TimeSource times(seed);
  for (int i = 0; i < samples; ++i) {
    const Timestamp t = times.Next();
    const std::optional<Timestamp> expected =
        RefNextAfter(reference, t, kReferenceHorizonMinutes);
    const std::optional<Timestamp> actual = schedule.NextAfter(t);
    if (expected.has_value()) {
      ASSERT_EQ(actual, expected)
          << "spec '" << spec << "' seed " << seed << " sample " << i
          << ": after " << Show(t) << " (" << t.time_since_epoch().count()
          << " us) expected " << Show(expected) << ", got " << Show(actual);
    } else {
      // Nothing within the horizon: the schedule must agree.
      ASSERT_TRUE(!actual.has_value() ||
                  *actual - t > std::chrono::minutes(kReferenceHorizonMinutes))
          << "spec '" << spec << "' seed " << seed << " sample " << i
          << ": after " << Show(t) << " got " << Show(actual);
    }
  }
}

TEST(ScheduleReferenceTest, FixedExpressions) {
  struct Case {
    const char* spec;
    int samples;
  };
  const Case cases[] = {
      {"* * * * *", 300},
      {"*/7 * * * *", 300},
      {"0 * * * *", 300},
      {"59 23 * * *", 300},
      {"30 2 * * *", 300},
      {"@daily", 300},
      {"@weekly", 300},
      {"@monthly", 300},
      {"@yearly", 100},
      {"15 14 1 * *", 300},
      {"0 22 * * 1-5", 300},
      {"23 0-20/2 * * *", 300},
      {"5 4 * * sun", 300},
      {"0 0,12 1 */2 *", 300},
      {"0 4 8-14 * *", 300},
      {"0 0 1,15 * 3", 300},
      {"0 0 13 * 5", 300},
      {"0 0 */2 * 1", 300},
      {"0 0 1-7 * */7", 300},
      {"0 0 28-31 * *", 300},
      {"0 0 31 * *", 300},
      {"0 0 30 * *", 300},
      {"0 0 29 2 *", 60},
      {"0 12 29 feb mon", 200},
      {"59 23 31 12 *", 100},
      {"0 12 * jan,jul mon", 200},
      {"*/15 9-17 * * mon-fri", 300},
      {"0 0 * 2 0", 200},
      {"1-5,10-15/2,58 3,7,22 * * *", 300},
      {"0 0 30 2 1", 200},
      {"0 0 31 * */2", 200},
      {"0 0 1-31/2 * 1", 300},
      {"0 0 * * 0,7", 300},
      {"7 7 7 7 *", 100},
      {"0 0 1 */3 *", 200},
  };
  uint32_t seed = 1000;
  for (const Case& c : cases) CheckAgainstReference(c.spec, c.samples, ++seed);
}

// Random specs of every shape, checked against the reference, and for
// canonical-form stability.
class SpecGenerator {
 public:
  explicit SpecGenerator(uint32_t seed) : rng_(seed) {}

  std::string Next() {
    // Minutes and hours are kept fairly dense so that the reference finds
    // slots quickly; the day fields get every shape.
    return Field(0, 59, nullptr, 2) + " " + Field(0, 23, nullptr, 3) + " " +
           Field(1, 31, nullptr, 2) + " " + Field(1, 12, kRefMonthNames, 4) +
           " " + Field(0, 7, kRefDayNames, 2);
  }

 private:
  int Uniform(int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng_);
  }

  std::string Value(int min, int max, const char* const* names) {
    const int v = Uniform(min, max);
    if (names != nullptr && Uniform(0, 3) == 0) {
      const int first = names == kRefMonthNames ? 1 : 0;
      if (v - first < (names == kRefMonthNames ? 12 : 7)) {
        std::string name = names[v - first];
        if (Uniform(0, 1) == 0) name[0] = static_cast<char>(name[0] - 32);
        return name;
      }
    }
    return std::to_string(v);
  }

  std::string Element(int min, int max, const char* const* names) {
    switch (Uniform(0, 5)) {
      case 0:
        return "*";
      case 1:
        return "*/" + std::to_string(Uniform(1, max - min));
      case 2: {
        const int a = Uniform(min, max);
        const int b = Uniform(a, max);
        return std::to_string(a) + "-" + std::to_string(b);
      }
      case 3: {
        const int a = Uniform(min, max);
        const int b = Uniform(a, max);
        return std::to_string(a) + "-" + std::to_string(b) + "/" +
               std::to_string(Uniform(1, max - min));
      }
      default:
        return Value(min, max, names);
    }
  }

  // `wide` is how many list elements at most.
  std::string Field(int min, int max, const char* const* names, int wide) {
    if (Uniform(0, 2) == 0) return "*";
    std::string field = Element(min, max, names);
    const int extra = Uniform(0, wide - 1);
    for (int i = 0; i < extra; ++i) field += "," + Element(min, max, names);
    return field;
  }

  std::mt19937 rng_;
};

TEST(ScheduleReferenceTest, RandomExpressions) {
  constexpr uint32_t kSeed = 424242;
  SpecGenerator specs(kSeed);
  for (int i = 0; i < 400; ++i) {
    const std::string spec = specs.Next();
    Result<Schedule> parsed = Schedule::Parse(spec);
    ASSERT_TRUE(parsed.ok()) << spec << ": " << parsed.status().ToString();
    CheckAgainstReference(spec, 20, kSeed + static_cast<uint32_t>(i));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(ScheduleReferenceTest, CanonicalFormKeepsBehaviour) {
  // The canonical form must fire exactly when the original does, judged by
  // the reference on both texts, and be a fixed point.
  constexpr uint32_t kSeed = 777;
  SpecGenerator specs(kSeed);
  std::mt19937 rng(kSeed);
  std::uniform_int_distribution<int64_t> minutes(
      At(1999, 1, 1).time_since_epoch().count() / kMicrosPerMinute,
      At(2101, 1, 1).time_since_epoch().count() / kMicrosPerMinute);
  for (int i = 0; i < 3000; ++i) {
    const std::string spec = specs.Next();
    const Schedule schedule = MustParse(spec);
    const std::string canonical = schedule.ToString();
    const Schedule reparsed = MustParse(canonical);
    ASSERT_EQ(reparsed, schedule) << spec << " -> " << canonical;
    ASSERT_EQ(reparsed.ToString(), canonical) << spec;
    const RefCron original(spec), normalized(canonical);
    for (int k = 0; k < 200; ++k) {
      const time_t seconds = static_cast<time_t>(minutes(rng) * 60);
      struct tm tm;
      gmtime_r(&seconds, &tm);
      auto matches = [&](const RefCron& cron) {
        return cron.minute[tm.tm_min] && cron.hour[tm.tm_hour] &&
               cron.month[tm.tm_mon + 1] &&
               cron.DayMatches(tm.tm_mday, tm.tm_wday);
      };
      ASSERT_EQ(matches(original), matches(normalized))
          << "seed " << kSeed << ": '" << spec << "' -> '" << canonical
          << "' differ at " << Show(Timestamp(Duration(seconds * 1'000'000)));
    }
  }
}

// ---------------------------------------------------------------------------
// Intervals

TEST(ScheduleIntervalTest, SlotsAreAlignedToTheEpoch) {
  const Schedule every_5m = MustParse("every 5m");
  EXPECT_EQ(every_5m.NextAfter(At(2024, 5, 1, 12, 3, 17)),
            At(2024, 5, 1, 12, 5));
  EXPECT_EQ(every_5m.NextAfter(At(2024, 5, 1, 12, 5)), At(2024, 5, 1, 12, 10));
  EXPECT_EQ(every_5m.NextAfter(At(2024, 5, 1, 12, 4, 59, 999999)),
            At(2024, 5, 1, 12, 5));
  EXPECT_EQ(MustParse("every 30s").NextAfter(At(2024, 5, 1, 12, 0, 29)),
            At(2024, 5, 1, 12, 0, 30));
  EXPECT_EQ(MustParse("every 2h").NextAfter(At(2024, 5, 1, 13, 0)),
            At(2024, 5, 1, 14, 0));
  EXPECT_EQ(MustParse("every 1d").NextAfter(At(2024, 5, 1, 13, 0)),
            At(2024, 5, 2));
  // 'every 7d' counts weeks from Thursday, 1970-01-01.
  EXPECT_EQ(Show(*MustParse("every 7d").NextAfter(At(2024, 5, 1))).substr(20),
            "(Thu)");
  // Before the epoch: still multiples of the interval.
  EXPECT_EQ(MustParse("every 1h").NextAfter(Timestamp(Duration(-1))),
            Timestamp(Duration(0)));
  EXPECT_EQ(MustParse("every 1h").NextAfter(At(1969, 12, 31, 22, 30)),
            At(1969, 12, 31, 23, 0));

  // Intervals that do not divide an hour or a day stay aligned to the epoch,
  // not to the hour: every slot is a multiple of the interval.
  const Schedule every_7m = MustParse("every 7m");
  std::mt19937_64 rng(5);
  for (int i = 0; i < 1000; ++i) {
    const Timestamp t(
        Duration(static_cast<int64_t>(rng() >> 4) - (int64_t{1} << 58)));
    const Timestamp next = *every_7m.NextAfter(t);
    EXPECT_EQ(next.time_since_epoch().count() % (7 * kMicrosPerMinute), 0);
    EXPECT_GT(next, t);
    EXPECT_LE(next - t, std::chrono::minutes(7));
  }
}

// ---------------------------------------------------------------------------
// SlotsBetween

TEST(ScheduleSlotsTest, BoundsAndLimits) {
  const Schedule hourly = MustParse("@hourly");
  const Timestamp after = At(2024, 1, 1, 0, 0);
  const Timestamp up_to = At(2024, 1, 1, 5, 0);
  // `after` is excluded, `up_to` included.
  std::vector<Timestamp> all = hourly.SlotsBetween(after, up_to, 100);
  EXPECT_EQ(all, (std::vector<Timestamp>{At(2024, 1, 1, 1), At(2024, 1, 1, 2),
                                         At(2024, 1, 1, 3), At(2024, 1, 1, 4),
                                         At(2024, 1, 1, 5)}));
  // The limit keeps the earliest; continuing from the last gives the rest.
  std::vector<Timestamp> first = hourly.SlotsBetween(after, up_to, 2);
  EXPECT_EQ(first,
            (std::vector<Timestamp>{At(2024, 1, 1, 1), At(2024, 1, 1, 2)}));
  std::vector<Timestamp> rest = hourly.SlotsBetween(first.back(), up_to, 100);
  EXPECT_EQ(rest.size(), 3u);
  EXPECT_EQ(rest.front(), At(2024, 1, 1, 3));

  EXPECT_TRUE(hourly.SlotsBetween(after, up_to, 0).empty());
  EXPECT_TRUE(hourly.SlotsBetween(up_to, after, 100).empty());
  EXPECT_TRUE(hourly.SlotsBetween(after, after, 100).empty());
  EXPECT_TRUE(
      hourly.SlotsBetween(At(2024, 1, 1, 0, 1), At(2024, 1, 1, 0, 59), 100)
          .empty());

  // A huge limit with a small window costs only the slots found.
  EXPECT_EQ(hourly.SlotsBetween(after, up_to, SIZE_MAX).size(), 5u);

  // Catching up a week of downtime of a five-minute interval in batches.
  const Schedule every_5m = MustParse("every 5m");
  Timestamp cursor = At(2024, 1, 1);
  const Timestamp now = At(2024, 1, 8);
  size_t total = 0;
  while (true) {
    std::vector<Timestamp> batch = every_5m.SlotsBetween(cursor, now, 500);
    total += batch.size();
    for (size_t i = 1; i < batch.size(); ++i) {
      ASSERT_EQ(batch[i] - batch[i - 1], std::chrono::minutes(5));
    }
    if (batch.size() < 500) break;
    cursor = batch.back();
  }
  EXPECT_EQ(total, 7u * 24 * 12);
}

TEST(ScheduleSlotsTest, MatchesRepeatedNextAfter) {
  for (const char* spec : {"*/7 3-5 * * *", "0 0 13 * 5", "every 45m",
                           "0 0 29 2 *", "0 12 * * mon-fri"}) {
    const Schedule schedule = MustParse(spec);
    const Timestamp after = At(2023, 11, 1, 0, 0, 0, 123);
    const Timestamp up_to = At(2032, 3, 1);
    const std::vector<Timestamp> slots =
        schedule.SlotsBetween(after, up_to, 200);
    Timestamp t = after;
    for (const Timestamp& slot : slots) {
      const std::optional<Timestamp> next = schedule.NextAfter(t);
      ASSERT_TRUE(next.has_value()) << spec;
      ASSERT_EQ(*next, slot) << spec;
      t = slot;
    }
    if (slots.size() < 200) {
      const std::optional<Timestamp> beyond = schedule.NextAfter(t);
      EXPECT_TRUE(!beyond.has_value() || *beyond > up_to) << spec;
    }
  }
}

}  // namespace
}  // namespace spool
