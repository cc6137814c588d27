#include "util/schedule.h"

#include <algorithm>
#include <limits>

#include "util/civil_time.h"

namespace spool {
namespace {

constexpr int64_t kMicrosPerSecond = 1'000'000;
constexpr int64_t kMicrosPerMinute = 60 * kMicrosPerSecond;
constexpr int64_t kMinutesPerDay = 24 * 60;
constexpr int64_t kSecondsPerDay = 24 * 60 * 60;
constexpr int64_t kMaxIntervalSeconds = 365 * kSecondsPerDay;
// The last minute whose start a Timestamp can represent.
constexpr int64_t kMaxSlotMinute =
    std::numeric_limits<int64_t>::max() / kMicrosPerMinute;

constexpr uint32_t kAllDaysOfMonth = 0xFFFFFFFEu;  // Bits 1-31.
constexpr uint8_t kAllDaysOfWeek = 0x7F;           // Bits 0-6.

// ---------------------------------------------------------------------------
// Calendar arithmetic beyond util/civil_time.h

bool IsLeapYear(int64_t year) {
  return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
}

// The longest a month can be; February counts its leap day.
constexpr int kLongestMonth[13] = {0,  31, 29, 31, 30, 31, 30,
                                   31, 31, 30, 31, 30, 31};

int DaysInMonth(int64_t year, int month) {
  if (month == 2 && !IsLeapYear(year)) return 28;
  return kLongestMonth[month];
}

// 0 = Sunday. 1970-01-01 was a Thursday.
int Weekday(int64_t days) { return static_cast<int>(FloorMod(days + 4, 7)); }

// ---------------------------------------------------------------------------
// Bit sets

// The lowest set bit of `bits` at or above `from`, or -1 if there is none.
int NextBit(uint64_t bits, int from) {
  if (from >= 64) return -1;
  const uint64_t candidates = bits & (~uint64_t{0} << from);
  return candidates == 0 ? -1 : __builtin_ctzll(candidates);
}

// Bits lo..hi set.
uint64_t BitRange(int lo, int hi) {
  uint64_t bits = 0;
  for (int v = lo; v <= hi; ++v) bits |= uint64_t{1} << v;
  return bits;
}

// ---------------------------------------------------------------------------
// Parsing

constexpr const char* kMonthNames[] = {"jan", "feb", "mar", "apr",
                                       "may", "jun", "jul", "aug",
                                       "sep", "oct", "nov", "dec"};
constexpr const char* kDayNames[] = {"sun", "mon", "tue", "wed",
                                     "thu", "fri", "sat"};

struct CronField {
  const char* name;
  // The values a token may name. For day-of-week max is 7, an alias of 0.
  int min;
  int max;
  // The values a field matches: max, except 6 for day-of-week.
  int last;
  // Three-letter names for the values first_named, first_named + 1, ...
  const char* const* names;
  int name_count;
  int first_named;
  const char* name_kind;
};

constexpr CronField kMinuteField = {"minute", 0, 59, 59,
                                    nullptr,  0, 0,  nullptr};
constexpr CronField kHourField = {"hour", 0, 23, 23, nullptr, 0, 0, nullptr};
constexpr CronField kDayOfMonthField = {"day-of-month", 1, 31, 31,
                                        nullptr,        0, 0,  nullptr};
constexpr CronField kMonthField = {"month",     1,  12, 12,
                                   kMonthNames, 12, 1,  "month name"};
constexpr CronField kDayOfWeekField = {"day-of-week", 0, 7, 6,
                                       kDayNames,     7, 0, "day name"};

Status FieldError(const CronField& field, const std::string& what) {
  return Status::InvalidArgument("cron field '" + std::string(field.name) +
                                 "': " + what);
}

std::string Quote(std::string_view text) {
  return "'" + std::string(text) + "'";
}

bool IsAllDigits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return c >= '0' && c <= '9';
  });
}

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char c = a[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != b[i]) return false;
  }
  return true;
}

// Parses a decimal number of at most 9 digits (so it cannot overflow);
// longer numbers become INT32_MAX, which every range check rejects.
int ParseSmallNumber(std::string_view digits) {
  if (digits.size() > 9) return std::numeric_limits<int32_t>::max();
  int value = 0;
  for (char c : digits) value = value * 10 + (c - '0');
  return value;
}

// A single value: a number in the field's range, or a name.
Status ParseValue(const CronField& field, std::string_view token, int* value) {
  if (IsAllDigits(token)) {
    const int number = ParseSmallNumber(token);
    if (number < field.min || number > field.max) {
      return FieldError(field, std::string(token) + " is out of range " +
                                   std::to_string(field.min) + "-" +
                                   std::to_string(field.max));
    }
    *value = number;
    return Status::OK();
  }
  for (int i = 0; i < field.name_count; ++i) {
    if (EqualsIgnoringCase(token, field.names[i])) {
      *value = field.first_named + i;
      return Status::OK();
    }
  }
  return FieldError(field, Quote(token) + " is not a number" +
                               (field.name_kind != nullptr
                                    ? std::string(" or ") + field.name_kind
                                    : std::string()));
}

struct ParsedField {
  uint64_t bits = 0;
  // Some element was '*' or '*/step'.
  bool has_star = false;
};

// One list element: '*', 'v' or 'a-b', optionally followed by '/step'.
Status ParseElement(const CronField& field, std::string_view element,
                    std::string_view field_text, ParsedField* parsed) {
  if (element.empty()) {
    return FieldError(field, "empty list element in " + Quote(field_text));
  }
  std::string_view range = element;
  std::string_view step_text;
  const size_t slash = element.find('/');
  const bool has_step = slash != std::string_view::npos;
  if (has_step) {
    range = element.substr(0, slash);
    step_text = element.substr(slash + 1);
  }
  int lo;
  int hi;
  if (range == "*") {
    lo = field.min;
    hi = field.last;
    parsed->has_star = true;
  } else if (range.find('-') != std::string_view::npos) {
    const size_t dash = range.find('-');
    const std::string_view first = range.substr(0, dash);
    const std::string_view second = range.substr(dash + 1);
    if (first.empty() || second.empty() ||
        second.find('-') != std::string_view::npos) {
      return FieldError(field, Quote(range) + " is not a valid range");
    }
    Status s = ParseValue(field, first, &lo);
    if (s.ok()) s = ParseValue(field, second, &hi);
    if (!s.ok()) return s;
    if (lo > hi) {
      return FieldError(field, "range " + Quote(range) +
                                   " is reversed (its start is after its end)");
    }
  } else {
    if (range.empty()) {
      return FieldError(field, Quote(element) + " has no value before '/'");
    }
    Status s = ParseValue(field, range, &lo);
    if (!s.ok()) return s;
    if (has_step) {
      // Crons disagree on whether 'v/step' means v alone or v-max/step, so
      // neither reading is guessed.
      return FieldError(
          field, "step in " + Quote(element) + " needs a range or '*', e.g. '" +
                     std::string(range) + "-" + std::to_string(field.last) +
                     "/" + std::string(step_text) + "'");
    }
    hi = lo;
  }
  int step = 1;
  if (has_step) {
    if (!IsAllDigits(step_text)) {
      return FieldError(field, Quote(step_text) + " is not a valid step in " +
                                   Quote(element));
    }
    step = ParseSmallNumber(step_text);
    const int max_step = field.last - field.min + 1;
    if (step < 1 || step > max_step) {
      return FieldError(field, "step " + std::string(step_text) + " in " +
                                   Quote(element) + " is out of range 1-" +
                                   std::to_string(max_step));
    }
  }
  for (int v = lo; v <= hi; v += step) {
    // Day-of-week 7 is Sunday, stored as 0.
    parsed->bits |= uint64_t{1} << (v > field.last ? 0 : v);
  }
  return Status::OK();
}

Status ParseField(const CronField& field, std::string_view text,
                  ParsedField* parsed) {
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string_view element = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos
                                               : comma - start);
    Status s = ParseElement(field, element, text, parsed);
    if (!s.ok()) return s;
    if (comma == std::string_view::npos) return Status::OK();
    start = comma + 1;
  }
}

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
         c == '\v';
}

std::vector<std::string_view> SplitOnSpaces(std::string_view text) {
  std::vector<std::string_view> tokens;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && IsSpace(text[i])) ++i;
    const size_t start = i;
    while (i < text.size() && !IsSpace(text[i])) ++i;
    if (i > start) tokens.push_back(text.substr(start, i - start));
  }
  return tokens;
}

// The five-field equivalents of the macros.
struct Macro {
  const char* name;
  const char* expansion;
};
constexpr Macro kMacros[] = {
    {"@hourly", "0 * * * *"},   {"@daily", "0 0 * * *"},
    {"@midnight", "0 0 * * *"}, {"@weekly", "0 0 * * 0"},
    {"@monthly", "0 0 1 * *"},  {"@yearly", "0 0 1 1 *"},
    {"@annually", "0 0 1 1 *"},
};

// Parses the part after "every": digits and a unit, e.g. "30s".
Status ParseInterval(std::string_view spec,
                     const std::vector<std::string_view>& tokens,
                     int64_t* interval_us) {
  auto error = [&](const std::string& what) {
    return Status::InvalidArgument("interval " + Quote(spec) + ": " + what);
  };
  if (tokens.size() != 2) {
    return error("expected 'every <number><unit>' such as 'every 30s'");
  }
  const std::string_view duration = tokens[1];
  size_t digits = 0;
  while (digits < duration.size() && duration[digits] >= '0' &&
         duration[digits] <= '9') {
    ++digits;
  }
  if (digits == 0) {
    return error(Quote(duration) +
                 " does not start with a number (expected e.g. '30s')");
  }
  const std::string_view unit = duration.substr(digits);
  int64_t unit_seconds;
  if (unit == "s") {
    unit_seconds = 1;
  } else if (unit == "m") {
    unit_seconds = 60;
  } else if (unit == "h") {
    unit_seconds = 3600;
  } else if (unit == "d") {
    unit_seconds = kSecondsPerDay;
  } else {
    return error(unit.empty()
                     ? "missing unit after " +
                           Quote(duration.substr(0, digits)) + " (s, m, h or d)"
                     : "unit " + Quote(unit) + " is not one of s, m, h, d");
  }
  const int64_t count = ParseSmallNumber(duration.substr(0, digits));
  if (count == 0) return error("the interval must be at least 1s");
  // count < 10^9 and unit_seconds <= 86400, so this cannot overflow.
  const int64_t seconds = count * unit_seconds;
  if (seconds > kMaxIntervalSeconds) {
    return error(Quote(duration) + " is longer than the limit of 365d");
  }
  *interval_us = seconds * kMicrosPerSecond;
  return Status::OK();
}

// ---------------------------------------------------------------------------
// Formatting

std::vector<int> Values(uint64_t bits) {
  std::vector<int> values;
  for (int v = 0; v < 64; ++v) {
    if ((bits >> v) & 1) values.push_back(v);
  }
  return values;
}

// The step between consecutive values if they form an arithmetic
// progression of at least three values with a step above 1, else 0.
int ProgressionStep(const std::vector<int>& values) {
  if (values.size() < 3) return 0;
  const int step = values[1] - values[0];
  if (step < 2) return 0;
  for (size_t i = 2; i < values.size(); ++i) {
    if (values[i] - values[i - 1] != step) return 0;
  }
  return step;
}

// A list without '*': 'a-b/s' for a progression, else runs of three or more
// as 'a-b' and other values singly. REQUIRES: bits != 0.
std::string FormatList(uint64_t bits) {
  const std::vector<int> values = Values(bits);
  if (const int step = ProgressionStep(values)) {
    return std::to_string(values.front()) + "-" +
           std::to_string(values.back()) + "/" + std::to_string(step);
  }
  std::string out;
  for (size_t i = 0; i < values.size();) {
    size_t j = i;
    while (j + 1 < values.size() && values[j + 1] == values[j] + 1) ++j;
    auto append = [&out](const std::string& element) {
      if (!out.empty()) out += ',';
      out += element;
    };
    if (j - i >= 2) {
      append(std::to_string(values[i]) + "-" + std::to_string(values[j]));
    } else {
      for (size_t k = i; k <= j; ++k) append(std::to_string(values[k]));
    }
    i = j + 1;
  }
  return out;
}

// Bits min, min + step, ... up to last.
uint64_t StepBits(int min, int last, int step) {
  uint64_t bits = 0;
  for (int v = min; v <= last; v += step) bits |= uint64_t{1} << v;
  return bits;
}

// A field in a form that starts with '*': '*' or '*/s' covering as much of
// the set as a single step can, then any other values.
// REQUIRES: bit `min` is set.
std::string FormatWithStar(uint64_t bits, int min, int last) {
  int step = 1;
  while ((StepBits(min, last, step) & ~bits) != 0) ++step;
  const uint64_t covered = StepBits(min, last, step);
  std::string out = step == 1 ? "*" : "*/" + std::to_string(step);
  if (const uint64_t rest = bits & ~covered) out += "," + FormatList(rest);
  return out;
}

// Minute, hour and month, where '*' carries no meaning of its own: '*' for
// all values, '*/s' for every s-th value from the first when that is at
// least three values ('*/20' but '0,30'), else a list.
std::string FormatPlainField(uint64_t bits, int min, int last) {
  if (bits == BitRange(min, last)) return "*";
  for (int step = 2; step <= (last - min) / 2; ++step) {
    if (bits == StepBits(min, last, step)) return "*/" + std::to_string(step);
  }
  return FormatList(bits);
}

size_t ElementCount(const std::string& field) {
  return 1 + static_cast<size_t>(std::count(field.begin(), field.end(), ','));
}

std::string FormatInterval(int64_t interval_us) {
  const int64_t seconds = interval_us / kMicrosPerSecond;
  if (seconds % kSecondsPerDay == 0) {
    return "every " + std::to_string(seconds / kSecondsPerDay) + "d";
  }
  if (seconds % 3600 == 0) {
    return "every " + std::to_string(seconds / 3600) + "h";
  }
  if (seconds % 60 == 0) return "every " + std::to_string(seconds / 60) + "m";
  return "every " + std::to_string(seconds) + "s";
}

}  // namespace

Result<Schedule> Schedule::Parse(std::string_view spec) {
  const std::vector<std::string_view> tokens = SplitOnSpaces(spec);
  if (tokens.empty()) return Status::InvalidArgument("schedule is empty");

  Schedule schedule;
  if (tokens[0] == "every") {
    Status s = ParseInterval(spec, tokens, &schedule.interval_us_);
    if (!s.ok()) return s;
    return schedule;
  }

  std::vector<std::string_view> fields = tokens;
  if (tokens[0].front() == '@') {
    const Macro* macro = nullptr;
    for (const Macro& m : kMacros) {
      if (tokens.size() == 1 && tokens[0] == m.name) macro = &m;
    }
    if (macro == nullptr) {
      return Status::InvalidArgument(
          "unknown schedule macro " + Quote(spec) +
          " (expected @hourly, @daily, @midnight, @weekly, @monthly, "
          "@yearly or @annually, alone)");
    }
    fields = SplitOnSpaces(macro->expansion);
  }

  if (fields.size() != 5) {
    return Status::InvalidArgument(
        "cron expression " + Quote(spec) +
        " needs 5 fields (minute hour day-of-month month day-of-week), got " +
        std::to_string(fields.size()));
  }
  ParsedField minute, hour, day_of_month, month, day_of_week;
  Status s = ParseField(kMinuteField, fields[0], &minute);
  if (s.ok()) s = ParseField(kHourField, fields[1], &hour);
  if (s.ok()) s = ParseField(kDayOfMonthField, fields[2], &day_of_month);
  if (s.ok()) s = ParseField(kMonthField, fields[3], &month);
  if (s.ok()) s = ParseField(kDayOfWeekField, fields[4], &day_of_week);
  if (!s.ok()) return s;

  schedule.minutes_ = minute.bits;
  schedule.hours_ = static_cast<uint32_t>(hour.bits);
  schedule.days_of_month_ = static_cast<uint32_t>(day_of_month.bits);
  schedule.months_ = static_cast<uint16_t>(month.bits);
  schedule.days_of_week_ = static_cast<uint8_t>(day_of_week.bits);
  schedule.days_match_both_ = day_of_month.has_star || day_of_week.has_star;
  schedule.star_day_of_month_ = day_of_month.has_star;
  schedule.star_day_of_week_ = day_of_week.has_star;
  schedule.NormalizeDayFields();
  return schedule;
}

// Rewrites the day-related fields into the one form that behaves the same,
// so that operator== and ToString() see through differences of spelling:
//   - days of the month that exist in none of the chosen months are dropped
//     (and with the both-fields rule, months in which none of the days
//     exist), and a day-of-month set holding every day that can occur is
//     made complete ('1-29' in February is '*');
//   - with the either-field rule, a field that matches every day makes every
//     day match, and a day-of-month field that matches no day leaves the
//     weekdays alone; both are then expressed with the both-fields rule;
//   - the '*' that selects the both-fields rule is placed canonically.
// A spec that can never fire keeps its fields as parsed.
void Schedule::NormalizeDayFields() {
  int longest_month = 0;
  for (int m = 1; m <= 12; ++m) {
    if ((months_ >> m) & 1) {
      longest_month = std::max(longest_month, kLongestMonth[m]);
    }
  }
  const auto possible_days = static_cast<uint32_t>(BitRange(1, longest_month));
  uint32_t days = days_of_month_ & possible_days;
  uint16_t months = months_;
  if (days_match_both_) {
    months = 0;
    for (int m = 1; m <= 12; ++m) {
      const auto days_in_m =
          static_cast<uint32_t>(BitRange(1, kLongestMonth[m]));
      if (((months_ >> m) & 1) && (days & days_in_m) != 0) {
        months |= static_cast<uint16_t>(1u << m);
      }
    }
    if (months == 0) {
      never_fires_ = true;
      return;
    }
  } else if (days == 0) {
    days_match_both_ = true;
    days = kAllDaysOfMonth;
  }
  // A month was dropped only if it is shorter than every chosen day, so the
  // longest month stays and possible_days still describes the months left.
  const bool every_day_of_month = (days & possible_days) == possible_days;
  const bool every_day_of_week = days_of_week_ == kAllDaysOfWeek;
  if (!days_match_both_ && (every_day_of_month || every_day_of_week)) {
    days_match_both_ = true;
    days = kAllDaysOfMonth;
    days_of_week_ = kAllDaysOfWeek;
  }
  months_ = months;
  days_of_month_ =
      (days & possible_days) == possible_days ? kAllDaysOfMonth : days;

  if (!days_match_both_) {
    star_day_of_month_ = false;
    star_day_of_week_ = false;
    return;
  }
  const bool all_month_days = days_of_month_ == kAllDaysOfMonth;
  const bool all_week_days = days_of_week_ == kAllDaysOfWeek;
  if (all_month_days || all_week_days) {
    star_day_of_month_ = all_month_days;
    star_day_of_week_ = all_week_days;
    return;
  }
  // Both fields restricted under the both-fields rule: one of them must be
  // written with '*', which needs its first value (1 or Sunday) in the set.
  // The field that parsed with '*' has it, so at least one qualifies; pick
  // the one whose form has fewer elements, day-of-month on a tie.
  const bool month_day_can_star = (days_of_month_ >> 1) & 1;
  const bool week_day_can_star = days_of_week_ & 1;
  if (month_day_can_star && week_day_can_star) {
    const size_t month_day_cost =
        ElementCount(FormatWithStar(days_of_month_, 1, 31));
    const size_t week_day_cost =
        ElementCount(FormatWithStar(days_of_week_, 0, 6));
    star_day_of_month_ = month_day_cost <= week_day_cost;
  } else {
    star_day_of_month_ = month_day_can_star;
  }
  star_day_of_week_ = !star_day_of_month_;
}

bool Schedule::NeverFires() const { return never_fires_; }

bool Schedule::DayMatches(int64_t day, int day_of_month) const {
  const bool month_day_matches = (days_of_month_ >> day_of_month) & 1;
  const bool week_day_matches = (days_of_week_ >> Weekday(day)) & 1;
  return days_match_both_ ? (month_day_matches && week_day_matches)
                          : (month_day_matches || week_day_matches);
}

std::optional<Timestamp> Schedule::NextIntervalSlot(Timestamp t) const {
  // Slots are the multiples of the interval; take the first one after t.
  const int64_t index =
      FloorDiv(t.time_since_epoch().count(), interval_us_) + 1;
  if (index > std::numeric_limits<int64_t>::max() / interval_us_) {
    return std::nullopt;
  }
  return Timestamp(Duration(index * interval_us_));
}

std::optional<Timestamp> Schedule::NextCronSlot(Timestamp t) const {
  if (never_fires_) return std::nullopt;
  // The search starts at the first whole minute strictly after t and moves a
  // cursor forward: to the next matching month, day, hour, then minute,
  // resetting the smaller fields whenever a larger one moves.
  const int64_t first_minute =
      FloorDiv(t.time_since_epoch().count(), kMicrosPerMinute) + 1;
  int64_t day = FloorDiv(first_minute, kMinutesPerDay);
  const auto minute_of_day =
      static_cast<int>(FloorMod(first_minute, kMinutesPerDay));
  int hour = minute_of_day / 60;
  int minute = minute_of_day % 60;
  CivilDate date = CivilFromDays(day);

  auto next_day = [&] {
    ++day;
    hour = 0;
    minute = 0;
    if (date.day < DaysInMonth(date.year, date.month)) {
      ++date.day;
    } else if (date.month < 12) {
      ++date.month;
      date.day = 1;
    } else {
      ++date.year;
      date.month = 1;
      date.day = 1;
    }
  };

  // A schedule that can fire does so within one Gregorian cycle, whose
  // length bounds the loop; see kDaysPerGregorianCycle.
  const int64_t last_day = day + kDaysPerGregorianCycle;
  while (day <= last_day) {
    if (((months_ >> date.month) & 1) == 0) {
      const int next_month = NextBit(months_, date.month + 1);
      if (next_month > 0) {
        date.month = next_month;
      } else {
        ++date.year;
        date.month = NextBit(months_, 1);
      }
      date.day = 1;
      hour = 0;
      minute = 0;
      day = DaysFromCivil(date.year, date.month, 1);
      continue;
    }
    if (!DayMatches(day, date.day)) {
      next_day();
      continue;
    }
    const int next_hour = NextBit(hours_, hour);
    if (next_hour < 0) {
      next_day();
      continue;
    }
    if (next_hour != hour) {
      hour = next_hour;
      minute = 0;
    }
    const int next_minute = NextBit(minutes_, minute);
    if (next_minute < 0) {
      if (hour == 23) {
        next_day();
      } else {
        ++hour;
        minute = 0;
      }
      continue;
    }
    const int64_t slot_minute = day * kMinutesPerDay + hour * 60 + next_minute;
    if (slot_minute > kMaxSlotMinute) return std::nullopt;
    return Timestamp(Duration(slot_minute * kMicrosPerMinute));
  }
  return std::nullopt;
}

std::optional<Timestamp> Schedule::NextAfter(Timestamp t) const {
  return is_interval() ? NextIntervalSlot(t) : NextCronSlot(t);
}

std::vector<Timestamp> Schedule::SlotsBetween(Timestamp after, Timestamp up_to,
                                              size_t limit) const {
  std::vector<Timestamp> slots;
  Timestamp cursor = after;
  while (slots.size() < limit && cursor < up_to) {
    const std::optional<Timestamp> next = NextAfter(cursor);
    if (!next.has_value() || *next > up_to) break;
    slots.push_back(*next);
    cursor = *next;
  }
  return slots;
}

std::string Schedule::ToString() const {
  if (is_interval()) return FormatInterval(interval_us_);
  const std::string month_days = star_day_of_month_
                                     ? FormatWithStar(days_of_month_, 1, 31)
                                     : FormatList(days_of_month_);
  const std::string week_days = star_day_of_week_
                                    ? FormatWithStar(days_of_week_, 0, 6)
                                    : FormatList(days_of_week_);
  return FormatPlainField(minutes_, 0, 59) + " " +
         FormatPlainField(hours_, 0, 23) + " " + month_days + " " +
         FormatPlainField(months_, 1, 12) + " " + week_days;
}

bool operator==(const Schedule& a, const Schedule& b) {
  return a.interval_us_ == b.interval_us_ && a.minutes_ == b.minutes_ &&
         a.hours_ == b.hours_ && a.days_of_month_ == b.days_of_month_ &&
         a.months_ == b.months_ && a.days_of_week_ == b.days_of_week_ &&
         a.days_match_both_ == b.days_match_both_ &&
         a.star_day_of_month_ == b.star_day_of_month_ &&
         a.star_day_of_week_ == b.star_day_of_week_;
}

}  // namespace spool
