// The configuration layer: a registry of config keys, and the code that checks
// TOML values and command-line overrides against it.
//
// Every config key is one row of the registry (Registry() below): its
// section, name, value kind, allowed values, setter, renderer and a one-line
// doc. Parsing, overrides, error messages, suggestions and DescribeOptions
// are all driven by that table, so adding a key is adding a row (and its
// documentation in config/spool.toml, which a test enforces).
//
// The tables of named things, [types.NAME], [groups.NAME] and
// [periodic.NAME], and [retry] (whose values nest inside them) are not
// rows: [periodic.NAME] has its own parser, the others one table of fields
// (TableField) each, shared by the file and --set.

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <spool/config.h>

#include <toml++/toml.h>

#include "util/schedule.h"

namespace spool {
namespace {

// The source name used in messages about --set / ApplyOverride values.
constexpr std::string_view kOverrideSource = "override";

// Long strings are cut to this many bytes when quoted back in a message.
constexpr size_t kMaxQuotedBytes = 64;

// A "did you mean" suggestion is offered up to this edit distance.
constexpr size_t kMaxSuggestionDistance = 2;

// ---------------------------------------------------------------------------
// Small string helpers.

// `text` as a TOML basic string: in double quotes, with '"', '\' and control
// characters escaped. Bytes >= 0x80 are copied unchanged, so valid UTF-8 in
// gives valid TOML out.
std::string QuoteTomlString(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04X",
                        static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

// `text` quoted for an error message, shortened when long so that a stray
// megabyte string does not become a megabyte message.
std::string QuoteForMessage(std::string_view text) {
  if (text.size() <= kMaxQuotedBytes) return QuoteTomlString(text);
  return QuoteTomlString(text.substr(0, kMaxQuotedBytes)) + "...";
}

// A key as messages show it: bare when TOML allows it bare (letters, digits,
// '_' and '-'), else quoted, so that a quoted key holding a newline or a
// quote cannot garble the message.
std::string KeyForMessage(std::string_view key) {
  auto is_bare = [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (c >= '0' && c <= '9') || c == '_' || c == '-';
  };
  if (!key.empty() && std::all_of(key.begin(), key.end(), is_bare)) {
    return std::string(key);
  }
  return QuoteForMessage(key);
}

// "section.name" as messages show it.
std::string KeyForMessage(std::string_view section, std::string_view name) {
  return KeyForMessage(section) + "." + KeyForMessage(name);
}

// The Levenshtein distance between `a` and `b`. Only used on key names, which
// are short.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> previous(b.size() + 1);
  std::vector<size_t> current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] =
          std::min({previous[j] + 1, current[j - 1] + 1, substitution});
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

// Parses a whole decimal integer: an optional sign, then digits, with single
// '_' allowed between digits as in TOML. Returns nullopt for anything else,
// including values outside int64_t.
std::optional<int64_t> ParseIntegerText(std::string_view text) {
  std::string digits;
  size_t i = 0;
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    if (text[0] == '-') digits += '-';
    i = 1;
  }
  bool previous_was_digit = false;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c >= '0' && c <= '9') {
      digits += c;
      previous_was_digit = true;
    } else if (c == '_' && previous_was_digit && i + 1 < text.size()) {
      previous_was_digit = false;  // "1__0" and "1_" are rejected.
    } else {
      return std::nullopt;
    }
  }
  if (!previous_was_digit) return std::nullopt;
  int64_t value = 0;
  const char* end = digits.data() + digits.size();
  auto [ptr, error] = std::from_chars(digits.data(), end, value);
  if (error != std::errc() || ptr != end) return std::nullopt;
  return value;
}

// ---------------------------------------------------------------------------
// The key registry.

// How a key's value is written and checked.
enum class ValueKind {
  // A TOML integer within [KeySpec::min, KeySpec::max].
  kInteger,
  // A non-empty TOML string.
  kString,
  // A TOML string; "" leaves what the key configures off.
  kOptionalString,
  // A TOML string naming one of KeySpec::choices.
  kEnum,
  // A TOML string: digits and a unit (s, m, h, d), e.g. "30m", "24h" or
  // "7d", within [KeySpec::min, KeySpec::max] seconds; when min is 0, also
  // "0" or "forever", for none. The checked value is in microseconds.
  kDuration,
  // A TOML boolean (--set: true or false).
  kBoolean,
};

// A value that passed its key's checks, in the form the key's setter takes.
// (A plain struct rather than a std::variant: GCC 12 reports a false
// -Wmaybe-uninitialized for variant<..., std::string> in sanitizer builds.)
struct CheckedValue {
  // kInteger: the value. kEnum: the index into KeySpec::choices.
  int64_t integer = 0;
  // kString: the value.
  std::string text;

  static CheckedValue Integer(int64_t value) {
    CheckedValue checked;
    checked.integer = value;
    return checked;
  }
  static CheckedValue Text(std::string_view value) {
    CheckedValue checked;
    checked.text = std::string(value);
    return checked;
  }
};

// One config key.
struct KeySpec {
  std::string_view section;
  std::string_view name;
  ValueKind kind = ValueKind::kInteger;
  // kInteger only: the inclusive range.
  int64_t min = 0;
  int64_t max = 0;
  // kEnum only: the allowed names, in the order the setter indexes them.
  std::vector<std::string_view> choices;
  // Stores a checked value into its Options field.
  void (*set)(Options* options, const CheckedValue& value) = nullptr;
  // The field's current value as a TOML literal.
  std::string (*render)(const Options& options) = nullptr;
  // One line for DescribeOptions; config/spool.toml has the full story.
  std::string_view doc;

  // "section.name", as messages and overrides spell the key.
  std::string FullName() const {
    return std::string(section) + "." + std::string(name);
  }
};

// FieldType<&Options::x> is the type of Options::x.
template <class MemberPointer>
struct MemberPointerTraits;
template <class T>
struct MemberPointerTraits<T Options::*> {
  using Type = T;
};
template <auto kField>
using FieldType = typename MemberPointerTraits<decltype(kField)>::Type;

// Whether `value` fits in the integer type Int without changing.
template <class Int>
constexpr bool FitsIn(int64_t value) {
  if constexpr (std::is_unsigned_v<Int>) {
    return value >= 0 &&
           static_cast<uint64_t>(value) <= std::numeric_limits<Int>::max();
  } else {
    return value >= std::numeric_limits<Int>::min() &&
           value <= std::numeric_limits<Int>::max();
  }
}

// An integer key stored in an integer field. The range is checked against the
// field's type at compile time, so the setter's cast can never wrap (this is
// what keeps a negative value out of a size_t field).
template <auto kField, int64_t kMin, int64_t kMax>
KeySpec IntegerKey(std::string_view section, std::string_view name,
                   std::string_view doc) {
  using Field = FieldType<kField>;
  static_assert(std::is_integral_v<Field> && !std::is_same_v<Field, bool>);
  static_assert(kMin <= kMax, "empty range");
  static_assert(FitsIn<Field>(kMin) && FitsIn<Field>(kMax),
                "the range must fit the field's type");
  KeySpec spec;
  spec.section = section;
  spec.name = name;
  spec.kind = ValueKind::kInteger;
  spec.min = kMin;
  spec.max = kMax;
  spec.set = [](Options* options, const CheckedValue& value) {
    options->*kField = static_cast<Field>(value.integer);
  };
  spec.render = [](const Options& options) {
    return std::to_string(options.*kField);
  };
  spec.doc = doc;
  return spec;
}

// An integer key, in milliseconds, stored in a std::chrono::milliseconds
// field.
template <auto kField, int64_t kMin, int64_t kMax>
KeySpec MillisecondsKey(std::string_view section, std::string_view name,
                        std::string_view doc) {
  using Field = FieldType<kField>;
  static_assert(std::is_same_v<Field, std::chrono::milliseconds>);
  static_assert(kMin <= kMax, "empty range");
  static_assert(
      FitsIn<typename Field::rep>(kMin) && FitsIn<typename Field::rep>(kMax),
      "the range must fit the field's type");
  KeySpec spec;
  spec.section = section;
  spec.name = name;
  spec.kind = ValueKind::kInteger;
  spec.min = kMin;
  spec.max = kMax;
  spec.set = [](Options* options, const CheckedValue& value) {
    options->*kField = Field(value.integer);
  };
  spec.render = [](const Options& options) {
    return std::to_string((options.*kField).count());
  };
  spec.doc = doc;
  return spec;
}

// "forever" for 0, else the largest unit that divides `us` exactly.
std::string FormatDurationText(int64_t us) {
  int64_t seconds = us / 1'000'000;
  if (seconds == 0) return "forever";
  for (auto [unit, size] : {std::pair<const char*, int64_t>{"d", 86'400},
                            {"h", 3'600},
                            {"m", 60}}) {
    if (seconds % size == 0) return std::to_string(seconds / size) + unit;
  }
  return std::to_string(seconds) + "s";
}

// A duration key (ValueKind::kDuration) stored in a Duration field, from
// kMinSeconds to kMaxSeconds; 0 (when allowed) reads "forever".
template <auto kField, int64_t kMinSeconds, int64_t kMaxSeconds>
KeySpec DurationKey(std::string_view section, std::string_view name,
                    std::string_view doc) {
  static_assert(std::is_same_v<FieldType<kField>, Duration>);
  static_assert(0 <= kMinSeconds && kMinSeconds <= kMaxSeconds);
  KeySpec spec;
  spec.section = section;
  spec.name = name;
  spec.kind = ValueKind::kDuration;
  spec.min = kMinSeconds;
  spec.max = kMaxSeconds;
  spec.set = [](Options* options, const CheckedValue& value) {
    options->*kField = Duration(value.integer);
  };
  spec.render = [](const Options& options) {
    return QuoteTomlString(FormatDurationText((options.*kField).count()));
  };
  spec.doc = doc;
  return spec;
}

// A string key stored in a std::string field; non-empty unless kAllowEmpty.
template <auto kField, bool kAllowEmpty = false>
KeySpec StringKey(std::string_view section, std::string_view name,
                  std::string_view doc) {
  static_assert(std::is_same_v<FieldType<kField>, std::string>);
  KeySpec spec;
  spec.section = section;
  spec.name = name;
  spec.kind = kAllowEmpty ? ValueKind::kOptionalString : ValueKind::kString;
  spec.set = [](Options* options, const CheckedValue& value) {
    options->*kField = value.text;
  };
  spec.render = [](const Options& options) {
    return QuoteTomlString(options.*kField);
  };
  spec.doc = doc;
  return spec;
}

// A boolean key stored in a bool field.
template <auto kField>
KeySpec BooleanKey(std::string_view section, std::string_view name,
                   std::string_view doc) {
  static_assert(std::is_same_v<FieldType<kField>, bool>);
  KeySpec spec;
  spec.section = section;
  spec.name = name;
  spec.kind = ValueKind::kBoolean;
  spec.set = [](Options* options, const CheckedValue& value) {
    options->*kField = value.integer != 0;
  };
  spec.render = [](const Options& options) {
    return std::string(options.*kField ? "true" : "false");
  };
  spec.doc = doc;
  return spec;
}

// An enum key: a string naming one of kValues, spelled as kNameOf spells it
// (so the config file and the rest of spool agree on every name).
template <auto kField, auto kNameOf, auto... kValues>
KeySpec EnumKey(std::string_view section, std::string_view name,
                std::string_view doc) {
  using Enum = FieldType<kField>;
  static_assert(std::is_enum_v<Enum>);
  static_assert((std::is_same_v<decltype(kValues), Enum> && ...));
  KeySpec spec;
  spec.section = section;
  spec.name = name;
  spec.kind = ValueKind::kEnum;
  spec.choices = {kNameOf(kValues)...};
  spec.set = [](Options* options, const CheckedValue& value) {
    static constexpr Enum kChoices[] = {kValues...};
    options->*kField = kChoices[value.integer];
  };
  spec.render = [](const Options& options) {
    return QuoteTomlString(kNameOf(options.*kField));
  };
  spec.doc = doc;
  return spec;
}

// Every config key, in the order DescribeOptions prints them. The keys of one
// section must be adjacent. The integer ranges repeat Options::Validate()'s
// (a test holds them together); checking them here lets the error name the
// file and line.
const std::vector<KeySpec>& Registry() {
  static const auto* const kRegistry = new std::vector<KeySpec>{
      StringKey<&Options::path>("storage", "path",
                                "The storage directory; created when missing."),
      EnumKey<&Options::durability, DurabilityName, Durability::kSync,
              Durability::kRelaxed, Durability::kMemory,
              Durability::kReplicated>("storage", "durability",
                                       "When a write counts as stored."),
      IntegerKey<&Options::max_payload_bytes, 1, int64_t{1} << 30>(
          "storage", "max_payload_bytes",
          "The largest payload Enqueue accepts, in bytes."),
      IntegerKey<&Options::max_type_bytes, 1, 4096>(
          "storage", "max_type_bytes", "The longest task type name, in bytes."),
      IntegerKey<&Options::max_result_bytes, 0, int64_t{16} << 20>(
          "storage", "max_result_bytes",
          "The largest result a handler may set, in bytes."),
      IntegerKey<&Options::memtable_bytes, int64_t{1} << 20, int64_t{1} << 30>(
          "storage", "memtable_bytes",
          "The size of each in-memory write buffer of the storage engine."),
      StringKey<&Options::encryption_key_file, /*kAllowEmpty=*/true>(
          "storage", "encryption_key_file",
          "A file of hex encryption keys, current first; \"\": none."),
      EnumKey<&Options::plaintext_records, PlaintextRecordsName,
              PlaintextRecords::kRefuse, PlaintextRecords::kAccept>(
          "storage", "plaintext_records",
          "With a key: refuse or accept records stored in plaintext."),
      IntegerKey<&Options::readers, 1, 256>("runtime", "readers",
                                            "Reader actors answering queries."),
      IntegerKey<&Options::workers, 1, 4096>(
          "runtime", "workers",
          "Worker actors running handlers: the global concurrency limit."),
      IntegerKey<&Options::claim_ahead, 0, 4096>(
          "runtime", "claim_ahead",
          "The most tasks kept claimed ahead of the workers; 0: none."),
      IntegerKey<&Options::scheduler_threads, 1, 256>(
          "runtime", "scheduler_threads",
          "Threads of CAF's shared scheduler, which runs the watcher."),
      IntegerKey<&Options::group_concurrency, 0, 1'000'000>(
          "runtime", "group_concurrency",
          "At most this many tasks of one group run at once; 0: no limit."),
      IntegerKey<&Options::max_snoozes, 0, 1'000'000>(
          "runtime", "max_snoozes",
          "The most snoozes of one task before a snooze fails its attempt."),
      // Capped at a day: longer is surely a mistake, and a huge value would
      // overflow a steady_clock deadline computed from it.
      MillisecondsKey<&Options::close_timeout, 0, 86'400'000>(
          "runtime", "close_timeout_ms",
          "How long Close waits for running handlers, in milliseconds."),
      MillisecondsKey<&Options::gate_recheck_interval, 1, 86'400'000>(
          "runtime", "gate_recheck_interval_ms",
          "How often each registered gate is asked whether it is open."),
      IntegerKey<&Options::writer_max_batch, 1, 1'000'000>(
          "writer", "max_batch",
          "The most commands folded into one write batch and one sync."),
      IntegerKey<&Options::writer_state_cache, 0, 16'777'216>(
          "writer", "state_cache",
          "The most queued tasks whose states the writer keeps in memory."),
      // The upper ends repeat util/options.cc's kMaxPendingTasks and
      // kMaxPendingBytes.
      IntegerKey<&Options::writer_max_pending_tasks, 0, 100'000'000>(
          "writer", "max_pending_tasks",
          "The most enqueued tasks accepted and not yet durable; 0: no "
          "bound."),
      IntegerKey<&Options::writer_max_pending_bytes, 0, int64_t{1} << 40>(
          "writer", "max_pending_bytes",
          "The most payload and type bytes of those tasks; 0: no bound."),
      EnumKey<&Options::on_writer_full, WriterFullName, WriterFull::kFailBusy,
              WriterFull::kWait>(
          "writer", "on_full",
          "Past a bound: \"busy\" refuses the call, \"wait\" queues it."),
      DurationKey<&Options::retention_succeeded, 0, 3650 * 86'400>(
          "retention", "succeeded",
          "Succeeded tasks are deleted once this old; \"forever\": kept."),
      DurationKey<&Options::retention_failed, 0, 3650 * 86'400>(
          "retention", "failed",
          "Failed tasks that had attempts left, deleted once this old."),
      DurationKey<&Options::retention_dead, 0, 3650 * 86'400>(
          "retention", "dead",
          "Failed tasks that used every attempt, deleted once this old."),
      DurationKey<&Options::retention_cancelled, 0, 3650 * 86'400>(
          "retention", "cancelled",
          "Cancelled tasks are deleted once this old; \"forever\": kept."),
      DurationKey<&Options::retention_interval, 1, 86'400>(
          "retention", "interval", "How often retention looks for old tasks."),
      IntegerKey<&Options::retention_batch_size, 1, 1'000'000>(
          "retention", "batch_size",
          "The most index entries one retention step examines."),
      StringKey<&Options::backup_dir, /*kAllowEmpty=*/true>(
          "backup", "dir",
          "Where Backup() and POST /v1/backup put backups; \"\": off."),
      IntegerKey<&Options::backup_keep, 1, 10'000>(
          "backup", "keep", "How many backups to keep; older ones go."),
      EnumKey<&Options::replication_role, ReplicationRoleName,
              ReplicationRole::kPrimary, ReplicationRole::kStandby>(
          "replication", "role", "\"primary\", or \"standby\" of primary."),
      StringKey<&Options::replication_primary, /*kAllowEmpty=*/true>(
          "replication", "primary",
          "A standby's primary: \"http(s)://HOST:PORT\" of its spoold."),
      StringKey<&Options::replication_name, /*kAllowEmpty=*/true>(
          "replication", "name", "This standby's name; \"\": standby-PID."),
      StringKey<&Options::replication_secret_file, /*kAllowEmpty=*/true>(
          "replication", "secret_file",
          "The file of the secret standbys present to the primary."),
      StringKey<&Options::replication_ca_file, /*kAllowEmpty=*/true>(
          "replication", "ca_file",
          "The CA file that verifies an https primary."),
      BooleanKey<&Options::serve_standbys>(
          "replication", "serve_standbys",
          "Keep a log for standbys; durability \"replicated\" implies it."),
      IntegerKey<&Options::replication_min_acks, 1, 16>(
          "replication", "min_acks",
          "Standbys that must acknowledge each \"replicated\" commit."),
      MillisecondsKey<&Options::replication_ack_timeout, 10, 600'000>(
          "replication", "ack_timeout_ms",
          "How long a commit waits for its standbys' acknowledgements."),
      IntegerKey<&Options::replication_log_bytes, 1 << 20, int64_t{16} << 30>(
          "replication", "log_bytes",
          "Commit data kept in memory for standbys; beyond it, a new base."),
      StringKey<&Options::remote_listen, /*kAllowEmpty=*/true>(
          "remote", "listen", "HOST:PORT of the worker gateway; \"\": off."),
      StringKey<&Options::remote_secret_file, /*kAllowEmpty=*/true>(
          "remote", "secret_file",
          "The file of the secret remote workers must present."),
      MillisecondsKey<&Options::remote_lease, 100, 3'600'000>(
          "remote", "lease_ms",
          "How long a remote worker's lease lasts without a heartbeat."),
      MillisecondsKey<&Options::remote_heartbeat, 10, 600'000>(
          "remote", "heartbeat_ms",
          "How often remote workers send heartbeats."),
      IntegerKey<&Options::remote_claim_ahead, 0, 4096>(
          "remote", "claim_ahead",
          "Tasks leased to a remote worker beyond its concurrency."),
      StringKey<&Options::remote_tls_certificate_file, /*kAllowEmpty=*/true>(
          "remote", "tls_certificate_file",
          "The gateway's TLS certificate (PEM); \"\": no TLS."),
      StringKey<&Options::remote_tls_key_file, /*kAllowEmpty=*/true>(
          "remote", "tls_key_file", "The gateway's TLS private key (PEM)."),
      StringKey<&Options::remote_tls_ca_file, /*kAllowEmpty=*/true>(
          "remote", "tls_ca_file",
          "The CA that signed the workers' certificates (PEM)."),
      BooleanKey<&Options::remote_allow_insecure>(
          "remote", "allow_insecure",
          "Let remote.listen be beyond loopback without TLS (a trusted "
          "network only)."),
      EnumKey<&Options::log_level, LogLevelName, LogLevel::kTrace,
              LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn,
              LogLevel::kError, LogLevel::kOff>(
          "log", "level", "The level of spool's spdlog logger \"spool\"."),
  };
  return *kRegistry;
}

const KeySpec* FindKey(std::string_view section, std::string_view name) {
  for (const KeySpec& spec : Registry()) {
    if (spec.section == section && spec.name == name) return &spec;
  }
  return nullptr;
}

bool IsKnownSection(std::string_view section) {
  for (const KeySpec& spec : Registry()) {
    if (spec.section == section) return true;
  }
  return false;
}

// The known sections, in registry order, each once.
std::vector<std::string_view> KnownSections() {
  std::vector<std::string_view> sections;
  for (const KeySpec& spec : Registry()) {
    if (sections.empty() || sections.back() != spec.section) {
      sections.push_back(spec.section);
    }
  }
  return sections;
}

// What a key accepts, for messages: e.g. "an integer in [1, 256]".
std::string ExpectedValues(const KeySpec& spec) {
  switch (spec.kind) {
    case ValueKind::kInteger:
      return "an integer in [" + std::to_string(spec.min) + ", " +
             std::to_string(spec.max) + "]";
    case ValueKind::kString:
      return "a non-empty string";
    case ValueKind::kOptionalString:
      return "a string";
    case ValueKind::kBoolean:
      return "true or false";
    case ValueKind::kDuration:
      return "a duration such as \"30m\", \"24h\" or \"7d\" from " +
             FormatDurationText(spec.min * 1'000'000) + " to " +
             FormatDurationText(spec.max * 1'000'000) +
             (spec.min == 0 ? " (\"forever\" or \"0\": none)" : "");
    case ValueKind::kEnum: {
      std::string out = "one of ";
      for (size_t i = 0; i < spec.choices.size(); ++i) {
        if (i > 0) out += ", ";
        out += QuoteTomlString(spec.choices[i]);
      }
      return out;
    }
  }
  return "nothing";
}

// ---------------------------------------------------------------------------
// Checking values. Each checker returns the value for the key's setter, or
// InvalidArgument carrying only the reason; the caller adds source, key and
// line.

Status Mismatch(const KeySpec& spec, std::string_view got) {
  return Status::InvalidArgument("expected " + ExpectedValues(spec) + ", got " +
                                 std::string(got));
}

Result<CheckedValue> CheckInteger(const KeySpec& spec, int64_t value,
                                  std::string_view shown) {
  if (value < spec.min || value > spec.max) return Mismatch(spec, shown);
  return CheckedValue::Integer(value);
}

// A duration key's text: "<digits><s|m|h|d>", or "0"/"forever" when the
// key allows none; microseconds within the key's range.
Result<CheckedValue> CheckDuration(const KeySpec& spec, std::string_view text) {
  auto mismatch = [&] { return Mismatch(spec, QuoteForMessage(text)); };
  if (text == "0" || text == "forever") {
    if (spec.min > 0) return mismatch();
    return CheckedValue::Integer(0);
  }
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    ++digits;
  }
  // Nine digits of days are beyond every range already.
  if (digits == 0 || digits > 9 || digits + 1 != text.size()) {
    return mismatch();
  }
  static constexpr std::pair<char, int64_t> kUnits[] = {
      {'s', 1}, {'m', 60}, {'h', 3'600}, {'d', 86'400}};
  int64_t unit = 0;
  for (auto [letter, seconds] : kUnits) {
    if (text.back() == letter) unit = seconds;
  }
  if (unit == 0) return mismatch();
  int64_t seconds = std::stoll(std::string(text.substr(0, digits))) * unit;
  if (seconds < spec.min || seconds > spec.max) return mismatch();
  return CheckedValue::Integer(seconds * 1'000'000);
}

Result<CheckedValue> CheckString(const KeySpec& spec, std::string_view text) {
  if (spec.kind == ValueKind::kDuration) return CheckDuration(spec, text);
  if (spec.kind == ValueKind::kEnum) {
    for (size_t i = 0; i < spec.choices.size(); ++i) {
      if (spec.choices[i] == text)
        return CheckedValue::Integer(static_cast<int64_t>(i));
    }
    return Mismatch(spec, QuoteForMessage(text));
  }
  if (text.empty() && spec.kind == ValueKind::kString) {
    return Mismatch(spec, "\"\"");
  }
  return CheckedValue::Text(text);
}

// A TOML value as an error message shows it: strings quoted, other scalars
// with their TOML type, containers by kind alone.
std::string DescribeTomlValue(const toml::node& node) {
  auto printed = [&node](std::string_view type) {
    std::ostringstream out;
    node.visit([&out](const auto& value) { out << value; });
    return out.str() + " (" + std::string(type) + ")";
  };
  switch (node.type()) {
    case toml::node_type::string:
      return QuoteForMessage(node.as_string()->get());
    case toml::node_type::integer:
      return std::to_string(node.as_integer()->get());
    case toml::node_type::floating_point:
      return printed("a float");
    case toml::node_type::boolean:
      return printed("a boolean");
    case toml::node_type::date:
      return printed("a date");
    case toml::node_type::time:
      return printed("a time");
    case toml::node_type::date_time:
      return printed("a date-time");
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

Result<CheckedValue> CheckTomlValue(const KeySpec& spec,
                                    const toml::node& node) {
  if (spec.kind == ValueKind::kBoolean) {
    const toml::value<bool>* boolean = node.as_boolean();
    if (boolean == nullptr) return Mismatch(spec, DescribeTomlValue(node));
    return CheckedValue::Integer(boolean->get() ? 1 : 0);
  }
  if (spec.kind == ValueKind::kInteger) {
    const toml::value<int64_t>* integer = node.as_integer();
    if (integer == nullptr) return Mismatch(spec, DescribeTomlValue(node));
    return CheckInteger(spec, integer->get(), std::to_string(integer->get()));
  }
  const toml::value<std::string>* string = node.as_string();
  if (string == nullptr) return Mismatch(spec, DescribeTomlValue(node));
  return CheckString(spec, string->get());
}

Result<CheckedValue> CheckOverrideText(const KeySpec& spec,
                                       std::string_view text) {
  if (spec.kind == ValueKind::kBoolean) {
    if (text == "true") return CheckedValue::Integer(1);
    if (text == "false") return CheckedValue::Integer(0);
    return Mismatch(spec, QuoteForMessage(text));
  }
  if (spec.kind == ValueKind::kInteger) {
    std::optional<int64_t> integer = ParseIntegerText(text);
    if (!integer) return Mismatch(spec, QuoteForMessage(text));
    return CheckInteger(spec, *integer, text);
  }
  return CheckString(spec, text);
}

// ---------------------------------------------------------------------------
// Error messages.

// The line of `region`, or 0 when toml++ does not know it (e.g. for a table
// that a dotted header like [a.b] created implicitly).
uint32_t LineOf(const toml::source_region& region) { return region.begin.line; }

// "<source>: <subject>: <reason> (line N)", the shape of every config error.
// The line is left out when unknown (0).
Status ConfigError(std::string_view source, std::string_view subject,
                   std::string_view reason, uint32_t line) {
  std::string message(source);
  message += ": ";
  message += subject;
  message += ": ";
  message += reason;
  if (line > 0) message += " (line " + std::to_string(line) + ")";
  return Status::InvalidArgument(message);
}

// The known key a misspelled "section.name" most likely meant, or "" when
// none is close. Also catches a correct key in the wrong section (or in no
// section at all, when `section` is empty).
std::string SuggestKey(std::string_view section, std::string_view name) {
  std::string wanted = section.empty()
                           ? std::string(name)
                           : std::string(section) + "." + std::string(name);
  std::string best;
  size_t best_distance = kMaxSuggestionDistance + 1;
  for (const KeySpec& spec : Registry()) {
    std::string candidate = spec.FullName();
    size_t distance = EditDistance(wanted, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  if (!best.empty()) return best;
  for (const KeySpec& spec : Registry()) {
    if (spec.name == name) return spec.FullName();
  }
  return "";
}

std::string SuggestSection(std::string_view section) {
  std::string_view best;
  size_t best_distance = kMaxSuggestionDistance + 1;
  std::vector<std::string_view> candidates = KnownSections();
  for (std::string_view table :
       {"retry", "types", "groups", "rate_limits", "periodic"}) {
    candidates.push_back(table);
  }
  for (std::string_view candidate : candidates) {
    size_t distance = EditDistance(section, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return std::string(best);
}

// "[storage], [runtime], ...": the known sections, for messages.
std::string SectionList() {
  std::string list;
  for (std::string_view section : KnownSections()) {
    if (!list.empty()) list += ", ";
    list += "[" + std::string(section) + "]";
  }
  return list;
}

// The reason for an unknown key: a suggestion when one is close, else the
// keys its section does have, or the sections when the section is unknown
// too (or absent, for a key at the top of a file).
std::string UnknownKeyReason(std::string_view section, std::string_view name) {
  std::string suggestion = SuggestKey(section, name);
  if (!suggestion.empty())
    return "unknown key; did you mean " + suggestion + "?";
  if (!IsKnownSection(section)) {
    return "unknown key; keys belong in one of the sections " + SectionList();
  }
  std::string keys;
  for (const KeySpec& spec : Registry()) {
    if (spec.section != section) continue;
    if (!keys.empty()) keys += ", ";
    keys += spec.name;
  }
  return "unknown key; [" + std::string(section) + "] has " + keys;
}

std::string UnknownSectionReason(std::string_view section) {
  std::string suggestion = SuggestSection(section);
  if (!suggestion.empty()) {
    return "unknown section; did you mean [" + suggestion + "]?";
  }
  return "unknown section; the sections are " + SectionList();
}

// Collects the errors found in one file and keeps the one nearest its top,
// so that the user fixes problems in reading order whatever order toml++'s
// tables iterate in (they sort by key).
class FirstErrorInFile {
 public:
  void Add(uint32_t line, Status error) {
    // Unknown lines (0) sort after every known one.
    uint64_t rank = line > 0 ? line : uint64_t{1} << 32;
    if (error_.ok() || rank < rank_) {
      rank_ = rank;
      error_ = std::move(error);
    }
  }
  const Status& status() const { return error_; }

 private:
  uint64_t rank_ = 0;
  Status error_;
};

// ---------------------------------------------------------------------------
// Applying a parsed file.

// Parses `text` into *root, turning a toml++ syntax error into
// InvalidArgument with line and column.
Status ParseToml(std::string_view text, std::string_view source,
                 toml::table* root) {
  auto syntax_error = [source](const toml::parse_error& error) {
    const toml::source_position& where = error.source().begin;
    std::string message(source);
    message += ": syntax error: ";
    message += error.description();
    if (where.line > 0) {
      message += " (line " + std::to_string(where.line) + ", column " +
                 std::to_string(where.column) + ")";
    }
    return Status::InvalidArgument(message);
  };
#if TOML_EXCEPTIONS
  try {
    *root = toml::parse(text, source);
  } catch (const toml::parse_error& error) {
    return syntax_error(error);
  }
#else
  toml::parse_result result = toml::parse(text, source);
  if (!result) return syntax_error(result.error());
  *root = std::move(result).table();
#endif
  return Status::OK();
}

// Applies the keys of one known section's table.
void ApplySection(std::string_view section, const toml::table& table,
                  std::string_view source, Options* options,
                  FirstErrorInFile* errors) {
  for (const auto& [key, node] : table) {
    std::string full_name = KeyForMessage(section, key.str());
    const KeySpec* spec = FindKey(section, key.str());
    if (spec == nullptr) {
      errors->Add(
          LineOf(key.source()),
          ConfigError(source, full_name, UnknownKeyReason(section, key.str()),
                      LineOf(key.source())));
      continue;
    }
    Result<CheckedValue> value = CheckTomlValue(*spec, node);
    if (!value.ok()) {
      errors->Add(LineOf(node.source()),
                  ConfigError(source, full_name, value.status().message(),
                              LineOf(node.source())));
      continue;
    }
    spec->set(options, *value);
  }
}

// Reads one [periodic.NAME] table into a PeriodicTask.
void ApplyPeriodic(std::string_view name, const toml::table& table,
                   std::string_view source, Options* options,
                   FirstErrorInFile* errors) {
  PeriodicTask periodic;
  periodic.name = std::string(name);
  std::string prefix = "periodic." + std::string(name);
  // Given at all, and given valid: only a missing key is reported as such.
  bool schedule_given = false;
  bool type_given = false;
  bool has_schedule = false;
  bool has_type = false;
  for (const auto& entry : table) {
    // Not a structured binding: C++17 lambdas (clang) cannot capture one.
    const toml::node& node = entry.second;
    std::string_view field = entry.first.str();
    std::string subject = prefix + "." + std::string(field);
    uint32_t line = LineOf(node.source());
    auto fail = [&](const std::string& reason) {
      errors->Add(line, ConfigError(source, subject, reason, line));
    };
    auto text = [&]() -> std::optional<std::string> {
      if (const auto* s = node.as_string()) return s->get();
      fail("expected a string, got " + DescribeTomlValue(node));
      return std::nullopt;
    };
    if (field == "schedule") {
      schedule_given = true;
      auto value = text();
      if (!value) continue;
      Result<Schedule> schedule = Schedule::Parse(*value);
      if (!schedule.ok()) {
        fail(schedule.status().message());
        continue;
      }
      if (schedule->NeverFires()) {
        fail(QuoteForMessage(*value) + " never fires");
        continue;
      }
      periodic.schedule = *value;
      has_schedule = true;
    } else if (field == "type") {
      type_given = true;
      auto value = text();
      if (!value) continue;
      if (value->empty()) {
        fail("must not be empty");
        continue;
      }
      periodic.task.type = *value;
      has_type = true;
    } else if (field == "payload") {
      if (auto value = text()) periodic.task.payload = *value;
    } else if (field == "group") {
      if (auto value = text()) periodic.task.options.group = *value;
    } else if (field == "priority") {
      const auto* value = node.as_integer();
      if (value == nullptr || value->get() < INT32_MIN ||
          value->get() > INT32_MAX) {
        fail("expected an integer in [" + std::to_string(INT32_MIN) + ", " +
             std::to_string(INT32_MAX) + "], got " + DescribeTomlValue(node));
        continue;
      }
      periodic.task.options.priority = static_cast<int32_t>(value->get());
    } else if (field == "catch_up") {
      const auto* value = node.as_boolean();
      if (value == nullptr) {
        fail("expected true or false, got " + DescribeTomlValue(node));
        continue;
      }
      periodic.catch_up = value->get();
    } else {
      fail(
          "unknown key; a [periodic.NAME] table takes schedule, type, "
          "payload, group, priority and catch_up");
    }
  }
  uint32_t line = LineOf(table.source());
  if (!schedule_given) {
    errors->Add(line, ConfigError(source, prefix, "needs a schedule", line));
  } else if (!type_given) {
    errors->Add(line, ConfigError(source, prefix, "needs a type", line));
  }
  if (!has_schedule || !has_type) return;
  for (PeriodicTask& existing : options->periodic) {
    if (existing.name == periodic.name) {
      existing = std::move(periodic);
      return;
    }
  }
  options->periodic.push_back(std::move(periodic));
}

// ---------------------------------------------------------------------------
// The tables of named things: [retry], [types.NAME] and [groups.NAME]. Their
// keys are checked by one table of fields (TableField), shared by the file
// and by --set, so that both refuse a value for the same reason.

// The longest delay or timeout a config may set, in milliseconds: a year,
// as RetryPolicy and EnqueueOptions cap theirs (Options::Validate agrees).
constexpr int64_t kMaxDelayMs = int64_t{365} * 24 * 3600 * 1000;

enum class FieldKind {
  // A TOML integer within [TableField::min, TableField::max].
  kInteger,
  // A TOML float (or integer) in [0, 1].
  kFraction,
  // A retry policy's name: "none", "fixed" or "exponential".
  kPolicy,
  // An array of non-empty strings; in an override, a comma-separated list.
  kNames,
};

// One key of a [retry], [types.NAME] or [groups.NAME] table. Names of keys
// in sub-tables are dotted: "rate_limit.count", "retry.attempts".
struct TableField {
  std::string_view name;
  FieldKind kind = FieldKind::kInteger;
  int64_t min = 0;
  int64_t max = 0;
};

constexpr std::string_view kPolicyNames[] = {"none", "fixed", "exponential"};
constexpr RetryPolicy::Kind kPolicyKinds[] = {RetryPolicy::Kind::kNone,
                                              RetryPolicy::Kind::kFixed,
                                              RetryPolicy::Kind::kExponential};

std::string_view PolicyName(RetryPolicy::Kind kind) {
  for (size_t i = 0; i < std::size(kPolicyKinds); ++i) {
    if (kPolicyKinds[i] == kind) return kPolicyNames[i];
  }
  return "invalid";
}

const std::vector<TableField>& RetryFields() {
  static const auto* const kFields = new std::vector<TableField>{
      {"policy", FieldKind::kPolicy},
      {"attempts", FieldKind::kInteger, 1, 1'000'000},
      {"base_ms", FieldKind::kInteger, 0, kMaxDelayMs},
      {"max_ms", FieldKind::kInteger, 0, kMaxDelayMs},
      {"jitter", FieldKind::kFraction},
  };
  return *kFields;
}

const std::vector<TableField>& TypeFields() {
  static const auto* const kFields = new std::vector<TableField>{
      {"concurrency", FieldKind::kInteger, 0, 1'000'000},
      {"timeout_ms", FieldKind::kInteger, 0, kMaxDelayMs},
      {"rate_limit.count", FieldKind::kInteger, 0, 1'000'000},
      {"rate_limit.period_ms", FieldKind::kInteger, 1, 86'400'000},
      {"gates", FieldKind::kNames},
      {"retry.policy", FieldKind::kPolicy},
      {"retry.attempts", FieldKind::kInteger, 1, 1'000'000},
      {"retry.base_ms", FieldKind::kInteger, 0, kMaxDelayMs},
      {"retry.max_ms", FieldKind::kInteger, 0, kMaxDelayMs},
      {"retry.jitter", FieldKind::kFraction},
  };
  return *kFields;
}

const std::vector<TableField>& GroupFields() {
  static const auto* const kFields = new std::vector<TableField>{
      {"concurrency", FieldKind::kInteger, 0, 1'000'000},
  };
  return *kFields;
}

const std::vector<TableField>& RateLimitFields() {
  static const auto* const kFields = new std::vector<TableField>{
      {"count", FieldKind::kInteger, 1, 1'000'000},
      {"period_ms", FieldKind::kInteger, 1, 86'400'000},
      {"types", FieldKind::kNames},
  };
  return *kFields;
}

// The fields of the tables under `section`: "retry", "types", "groups" or
// "rate_limits".
const std::vector<TableField>& FieldsOf(std::string_view section) {
  if (section == "retry") return RetryFields();
  if (section == "types") return TypeFields();
  if (section == "groups") return GroupFields();
  return RateLimitFields();
}

const TableField* FindField(const std::vector<TableField>& fields,
                            std::string_view name) {
  for (const TableField& field : fields) {
    if (field.name == name) return &field;
  }
  return nullptr;
}

// "a [types.NAME] table takes concurrency, timeout_ms, ...", for messages.
std::string FieldList(std::string_view table,
                      const std::vector<TableField>& fields) {
  std::string out = "unknown key; " + std::string(table) + " takes ";
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) out += i + 1 == fields.size() ? " and " : ", ";
    out += fields[i].name;
  }
  return out;
}

// A value that passed its TableField's checks.
struct FieldValue {
  int64_t integer = 0;                                         // kInteger
  double fraction = 0;                                         // kFraction
  RetryPolicy::Kind policy = RetryPolicy::Kind::kExponential;  // kPolicy
  std::vector<std::string> names;                              // kNames
};

std::string FieldExpected(const TableField& field) {
  switch (field.kind) {
    case FieldKind::kInteger:
      return "an integer in [" + std::to_string(field.min) + ", " +
             std::to_string(field.max) + "]";
    case FieldKind::kFraction:
      return "a number in [0, 1]";
    case FieldKind::kPolicy:
      return "one of \"none\", \"fixed\", \"exponential\"";
    case FieldKind::kNames:
      return "an array of non-empty strings";
  }
  return "nothing";
}

Status FieldMismatch(const TableField& field, std::string_view got) {
  return Status::InvalidArgument("expected " + FieldExpected(field) + ", got " +
                                 std::string(got));
}

Result<FieldValue> CheckFieldInteger(const TableField& field,
                                     std::optional<int64_t> value,
                                     std::string_view shown) {
  if (!value || *value < field.min || *value > field.max) {
    return FieldMismatch(field, shown);
  }
  FieldValue out;
  out.integer = *value;
  return out;
}

Result<FieldValue> CheckFieldFraction(const TableField& field,
                                      std::optional<double> value,
                                      std::string_view shown) {
  if (!value || !(*value >= 0.0 && *value <= 1.0)) {
    return FieldMismatch(field, shown);
  }
  FieldValue out;
  out.fraction = *value;
  return out;
}

Result<FieldValue> CheckFieldPolicy(const TableField& field,
                                    std::optional<std::string_view> name,
                                    std::string_view shown) {
  for (size_t i = 0; name && i < std::size(kPolicyNames); ++i) {
    if (kPolicyNames[i] == *name) {
      FieldValue out;
      out.policy = kPolicyKinds[i];
      return out;
    }
  }
  return FieldMismatch(field, shown);
}

// The value of `node` for `field`, or InvalidArgument with the reason only.
Result<FieldValue> CheckFieldNode(const TableField& field,
                                  const toml::node& node) {
  std::string shown = DescribeTomlValue(node);
  switch (field.kind) {
    case FieldKind::kInteger: {
      std::optional<int64_t> value;
      if (const auto* integer = node.as_integer()) value = integer->get();
      return CheckFieldInteger(field, value, shown);
    }
    case FieldKind::kFraction: {
      std::optional<double> value;
      if (const auto* number = node.as_floating_point()) value = number->get();
      if (const auto* integer = node.as_integer()) {
        value = static_cast<double>(integer->get());
      }
      return CheckFieldFraction(field, value, shown);
    }
    case FieldKind::kPolicy: {
      std::optional<std::string_view> name;
      if (const auto* text = node.as_string()) name = text->get();
      return CheckFieldPolicy(field, name, shown);
    }
    case FieldKind::kNames: {
      const toml::array* array = node.as_array();
      if (array == nullptr) return FieldMismatch(field, shown);
      FieldValue out;
      for (const toml::node& element : *array) {
        const auto* text = element.as_string();
        if (text == nullptr || text->get().empty()) {
          return FieldMismatch(field,
                               "an element " + DescribeTomlValue(element));
        }
        out.names.push_back(text->get());
      }
      return out;
    }
  }
  return FieldMismatch(field, shown);
}

// The value of an override's `text` for `field`, checked as a file's.
Result<FieldValue> CheckFieldText(const TableField& field,
                                  std::string_view text) {
  std::string shown = QuoteForMessage(text);
  switch (field.kind) {
    case FieldKind::kInteger: {
      std::optional<int64_t> value = ParseIntegerText(text);
      return CheckFieldInteger(field, value, value ? std::string(text) : shown);
    }
    case FieldKind::kFraction: {
      std::optional<double> value;
      double parsed = 0;
      const char* end = text.data() + text.size();
      auto [ptr, error] = std::from_chars(text.data(), end, parsed);
      if (!text.empty() && error == std::errc() && ptr == end) value = parsed;
      return CheckFieldFraction(field, value, shown);
    }
    case FieldKind::kPolicy:
      return CheckFieldPolicy(field, text, shown);
    case FieldKind::kNames: {
      FieldValue out;
      for (size_t start = 0; !text.empty() && start <= text.size();) {
        size_t comma = std::min(text.find(',', start), text.size());
        std::string_view name = text.substr(start, comma - start);
        if (name.empty()) return FieldMismatch(field, shown);
        out.names.emplace_back(name);
        start = comma + 1;
      }
      return out;
    }
  }
  return FieldMismatch(field, shown);
}

Duration Millis(int64_t ms) {
  return std::chrono::duration_cast<Duration>(std::chrono::milliseconds(ms));
}

// Stores a checked retry field ("attempts", ...) into *retry.
void SetRetryField(std::string_view name, const FieldValue& value,
                   RetrySettings* retry) {
  if (name == "policy") retry->kind = value.policy;
  if (name == "attempts") {
    retry->max_attempts = static_cast<uint32_t>(value.integer);
  }
  if (name == "base_ms") retry->initial_delay = Millis(value.integer);
  if (name == "max_ms") retry->max_delay = Millis(value.integer);
  if (name == "jitter") retry->jitter = value.fraction;
}

// Stores a checked [types.NAME] field into *type.
void SetTypeField(std::string_view name, const FieldValue& value,
                  TypeSettings* type) {
  constexpr std::string_view kRetry = "retry.";
  if (name.substr(0, kRetry.size()) == kRetry) {
    SetRetryField(name.substr(kRetry.size()), value, &type->retry);
  } else if (name == "concurrency") {
    type->max_concurrent = static_cast<uint32_t>(value.integer);
  } else if (name == "timeout_ms") {
    type->timeout = Millis(value.integer);
  } else if (name == "rate_limit.count") {
    type->rate_limit_count = static_cast<uint32_t>(value.integer);
  } else if (name == "rate_limit.period_ms") {
    type->rate_limit_period = Millis(value.integer);
  } else if (name == "gates") {
    type->requires_gates.emplace(value.names);
  }
}

void SetRateLimitField(std::string_view name, const FieldValue& value,
                       NamedRateLimitSettings* limit) {
  if (name == "count") {
    limit->count = static_cast<uint32_t>(value.integer);
  } else if (name == "period_ms") {
    limit->period = Millis(value.integer);
  } else if (name == "types") {
    limit->types = value.names;
  }
}

// Applies the keys of a table whose fields are `fields` (sub-tables
// flattened into dotted names: only one level, as TableField names have),
// calling `set` for each valid one. `subject` is the table as messages
// name it ("types.email"), `table_name` as the unknown-key message names
// it ("a [types.NAME] table").
template <class Set>
void ApplyFields(const toml::table& table, const std::string& subject,
                 std::string_view table_name,
                 const std::vector<TableField>& fields, std::string_view source,
                 FirstErrorInFile* errors, const Set& set,
                 std::string_view prefix = "") {
  for (const auto& entry : table) {
    const toml::node& node = entry.second;
    std::string name = std::string(prefix) + std::string(entry.first.str());
    std::string key = subject + "." + KeyForMessage(entry.first.str());
    uint32_t line = LineOf(node.source());
    if (line == 0) line = LineOf(entry.first.source());
    const TableField* field = FindField(fields, name);
    bool has_sub_keys = false;
    for (const TableField& f : fields) {
      has_sub_keys |= f.name.substr(0, name.size() + 1) == name + ".";
    }
    if (has_sub_keys && prefix.empty()) {
      if (const toml::table* sub = node.as_table()) {
        ApplyFields(*sub, key, table_name, fields, source, errors, set,
                    name + ".");
      } else {
        errors->Add(line, ConfigError(source, key,
                                      "expected a table, got " +
                                          DescribeTomlValue(node),
                                      line));
      }
      continue;
    }
    if (field == nullptr) {
      errors->Add(
          line, ConfigError(source, key, FieldList(table_name, fields), line));
      continue;
    }
    Result<FieldValue> value = CheckFieldNode(*field, node);
    if (!value.ok()) {
      errors->Add(line,
                  ConfigError(source, key, value.status().message(), line));
      continue;
    }
    set(name, *value);
  }
}

// The delays of a retry policy are checked against each other here too,
// not only by Options::Validate, so that the error has a line. `base` is
// what the table's fields go over.
void CheckRetryDelays(const RetrySettings& retry, const RetryPolicy& base,
                      const toml::table& table, const std::string& subject,
                      std::string_view source, FirstErrorInFile* errors) {
  RetryPolicy policy = retry.Over(base);
  if (policy.max_delay >= policy.initial_delay) return;
  std::string_view key = retry.max_delay ? "max_ms" : "base_ms";
  const toml::node* node = table.get(key);
  uint32_t line = node != nullptr ? LineOf(node->source()) : 0;
  auto ms = [](Duration d) {
    return std::to_string(
        std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
  };
  errors->Add(line, ConfigError(source, subject + "." + std::string(key),
                                "max_ms (" + ms(policy.max_delay) +
                                    ") must not be below base_ms (" +
                                    ms(policy.initial_delay) + ")",
                                line));
}

// Reads the [retry] table into options->default_retry.
void ApplyRetry(const toml::table& table, std::string_view source,
                Options* options, FirstErrorInFile* errors) {
  RetrySettings retry;
  ApplyFields(table, "retry", "[retry]", RetryFields(), source, errors,
              [&retry](std::string_view name, const FieldValue& value) {
                SetRetryField(name, value, &retry);
              });
  CheckRetryDelays(retry, options->default_retry, table, "retry", source,
                   errors);
  options->default_retry = retry.Over(options->default_retry);
}

// Reads one [types.NAME] table into options->types[NAME], over what it
// held.
void ApplyType(std::string_view name, const toml::table& table,
               std::string_view source, Options* options,
               FirstErrorInFile* errors) {
  std::string subject = "types." + KeyForMessage(name);
  TypeSettings& type = options->types[std::string(name)];
  ApplyFields(table, subject, "a [types.NAME] table", TypeFields(), source,
              errors, [&type](std::string_view field, const FieldValue& value) {
                SetTypeField(field, value, &type);
              });
  if (const toml::table* retry = table.get_as<toml::table>("retry")) {
    CheckRetryDelays(type.retry, options->default_retry, *retry,
                     subject + ".retry", source, errors);
  }
}

// Reads one [groups.NAME] table into options->group_limits[NAME].
void ApplyGroup(std::string_view name, const toml::table& table,
                std::string_view source, Options* options,
                FirstErrorInFile* errors) {
  std::string subject = "groups." + KeyForMessage(name);
  ApplyFields(table, subject, "a [groups.NAME] table", GroupFields(), source,
              errors, [&](std::string_view, const FieldValue& value) {
                options->group_limits[std::string(name)] =
                    static_cast<uint32_t>(value.integer);
              });
}

// Reads one [rate_limits.NAME] table into options->rate_limits[NAME].
void ApplyRateLimit(std::string_view name, const toml::table& table,
                    std::string_view source, Options* options,
                    FirstErrorInFile* errors) {
  std::string subject = "rate_limits." + KeyForMessage(name);
  NamedRateLimitSettings& limit = options->rate_limits[std::string(name)];
  ApplyFields(table, subject, "a [rate_limits.NAME] table", RateLimitFields(),
              source, errors,
              [&limit](std::string_view field, const FieldValue& value) {
                SetRateLimitField(field, value, &limit);
              });
}

// Whether `section` is one of the tables of named things, or [retry].
bool IsTableSection(std::string_view section) {
  return section == "retry" || section == "types" || section == "groups" ||
         section == "rate_limits";
}

// Applies a top-level [retry], or the [types.NAME] / [groups.NAME] tables
// under `section` ("types" or "groups").
void ApplyTableSection(std::string_view section, const toml::node& node,
                       uint32_t line, std::string_view source, Options* options,
                       FirstErrorInFile* errors) {
  const toml::table* tables = node.as_table();
  if (tables == nullptr) {
    std::string shape = section == "retry"
                            ? "a [retry] table"
                            : "[" + std::string(section) + ".NAME] tables";
    errors->Add(line, ConfigError(source, section,
                                  "expected " + shape + ", got " +
                                      DescribeTomlValue(node),
                                  line));
    return;
  }
  if (section == "retry") {
    ApplyRetry(*tables, source, options, errors);
    return;
  }
  for (const auto& [name, entry] : *tables) {
    std::string subject =
        std::string(section) + "." + KeyForMessage(name.str());
    if (const toml::table* table = entry.as_table()) {
      if (section == "types") {
        ApplyType(name.str(), *table, source, options, errors);
      } else if (section == "groups") {
        ApplyGroup(name.str(), *table, source, options, errors);
      } else {
        ApplyRateLimit(name.str(), *table, source, options, errors);
      }
    } else {
      uint32_t entry_line = LineOf(name.source());
      errors->Add(entry_line,
                  ConfigError(source, subject,
                              "expected a table [" + subject + "], got " +
                                  DescribeTomlValue(entry),
                              entry_line));
    }
  }
}

// Applies an override of a [retry], [types.NAME] or [groups.NAME] key:
// `rest` is what follows "section." ("attempts", "email.retry.attempts",
// "http.post.concurrency"; a type or group name may hold dots, the key is
// matched at the end).
Status ApplyTableOverride(std::string_view section, std::string_view rest,
                          std::string_view text, Options* options) {
  const std::vector<TableField>& fields = FieldsOf(section);
  const TableField* field = nullptr;
  std::string_view name;
  if (section == "retry") {
    field = FindField(fields, rest);
  } else {
    for (const TableField& f : fields) {
      if (rest.size() > f.name.size() + 1 &&
          rest.substr(rest.size() - f.name.size()) == f.name &&
          rest[rest.size() - f.name.size() - 1] == '.') {
        field = &f;
        name = rest.substr(0, rest.size() - f.name.size() - 1);
      }
    }
  }
  if (field == nullptr) {
    std::string table = section == "retry"
                            ? "[retry]"
                            : "a [" + std::string(section) + ".NAME] table";
    return ConfigError(kOverrideSource, KeyForMessage(section, rest),
                       FieldList(table, fields), 0);
  }
  std::string subject = std::string(section) + ".";
  if (section != "retry") subject += KeyForMessage(name) + ".";
  subject += std::string(field->name);
  Result<FieldValue> value = CheckFieldText(*field, text);
  if (!value.ok()) {
    return ConfigError(kOverrideSource, subject, value.status().message(), 0);
  }
  if (section == "retry") {
    RetrySettings retry;
    SetRetryField(field->name, *value, &retry);
    options->default_retry = retry.Over(options->default_retry);
  } else if (section == "types") {
    SetTypeField(field->name, *value, &options->types[std::string(name)]);
  } else if (section == "groups") {
    options->group_limits[std::string(name)] =
        static_cast<uint32_t>(value->integer);
  } else {
    SetRateLimitField(field->name, *value,
                      &options->rate_limits[std::string(name)]);
  }
  return Status::OK();
}

// Applies a whole parsed file to *options. On error *options may be partly
// updated; the caller works on a copy.
Status ApplyTable(const toml::table& root, std::string_view source,
                  Options* options,
                  const std::vector<std::string>* app_names = nullptr) {
  FirstErrorInFile errors;
  for (const auto& [key, node] : root) {
    std::string_view name = key.str();
    uint32_t line = LineOf(key.source());
    if (app_names != nullptr && std::find(app_names->begin(), app_names->end(),
                                          name) != app_names->end()) {
      continue;
    }
    if (IsTableSection(name)) {
      ApplyTableSection(name, node, line, source, options, &errors);
      continue;
    }
    if (name == "periodic") {
      const toml::table* tasks = node.as_table();
      if (tasks == nullptr) {
        errors.Add(line, ConfigError(source, "periodic",
                                     "expected [periodic.NAME] tables", line));
        continue;
      }
      for (const auto& [task_name, task_node] : *tasks) {
        if (const toml::table* table = task_node.as_table()) {
          ApplyPeriodic(task_name.str(), *table, source, options, &errors);
        } else {
          uint32_t task_line = LineOf(task_name.source());
          errors.Add(
              task_line,
              ConfigError(source, "periodic." + std::string(task_name.str()),
                          "expected a table [periodic." +
                              std::string(task_name.str()) + "]",
                          task_line));
        }
      }
      continue;
    }
    if (!IsKnownSection(name)) {
      std::string reason = node.is_table() ? UnknownSectionReason(name)
                                           : UnknownKeyReason("", name);
      errors.Add(line, ConfigError(source, KeyForMessage(name), reason, line));
    } else if (const toml::table* table = node.as_table()) {
      ApplySection(name, *table, source, options, &errors);
    } else {
      std::string reason = "expected a table ([" + std::string(name) +
                           "]), got " + DescribeTomlValue(node);
      errors.Add(line, ConfigError(source, KeyForMessage(name), reason, line));
    }
  }
  return errors.status();
}

// Marks in *lines every line that `node` (the value of `key`) spans: the
// key, the value to its last line, and the headers of the tables below.
void MarkLines(const toml::key& key, const toml::node& node,
               std::vector<bool>* lines) {
  auto mark = [lines](uint32_t from, uint32_t to) {
    for (uint32_t l = from; l >= 1 && l <= to && l <= lines->size(); ++l)
      (*lines)[l - 1] = true;
  };
  const toml::table* table = node.as_table();
  if (table != nullptr && !table->is_inline()) {
    mark(LineOf(table->source()), LineOf(table->source()));
    for (const auto& [sub_key, sub_node] : *table)
      MarkLines(sub_key, sub_node, lines);
    return;
  }
  if (const toml::array* array = node.as_array();
      array != nullptr && array->is_array_of_tables()) {
    // [[name]] tables: each header and its keys.
    for (const toml::node& element : *array) {
      if (const toml::table* t = element.as_table(); t && !t->is_inline()) {
        mark(LineOf(t->source()), LineOf(t->source()));
        for (const auto& [sub_key, sub_node] : *t)
          MarkLines(sub_key, sub_node, lines);
      } else {
        mark(LineOf(element.source()), element.source().end.line);
      }
    }
    return;
  }
  mark(LineOf(key.source()),
       std::max(LineOf(key.source()), node.source().end.line));
}

// The lines of `text` that the top-level keys in `names` span, the others
// blanked (AppSections::toml_text).
std::string AppText(std::string_view text, const toml::table& root,
                    const std::vector<std::string>& names) {
  std::vector<std::string_view> lines;
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  std::vector<bool> keep(lines.size(), false);
  bool any = false;
  for (const auto& [key, node] : root) {
    if (std::find(names.begin(), names.end(), key.str()) == names.end())
      continue;
    any = true;
    MarkLines(key, node, &keep);
  }
  std::string out;
  if (!any) return out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (keep[i]) out += lines[i];
    out += '\n';
  }
  return out;
}

// Applies one override without copying *options: the setter runs only after
// every check has passed, so a failure leaves *options untouched.
Status ApplyOverrideInPlace(std::string_view assignment, Options* options) {
  size_t equals = assignment.find('=');
  size_t dot = assignment.substr(0, equals).find('.');
  if (equals == std::string_view::npos || dot == std::string_view::npos) {
    return Status::InvalidArgument(std::string(kOverrideSource) + " " +
                                   QuoteForMessage(assignment) +
                                   ": expected section.key=value");
  }
  std::string_view section = assignment.substr(0, dot);
  std::string_view name = assignment.substr(dot + 1, equals - dot - 1);
  std::string_view text = assignment.substr(equals + 1);
  std::string full_name = KeyForMessage(section, name);
  if (IsTableSection(section)) {
    return ApplyTableOverride(section, name, text, options);
  }

  const KeySpec* spec = FindKey(section, name);
  if (spec == nullptr) {
    return ConfigError(kOverrideSource, full_name,
                       UnknownKeyReason(section, name), 0);
  }
  Result<CheckedValue> value = CheckOverrideText(*spec, text);
  if (!value.ok()) {
    return ConfigError(kOverrideSource, full_name, value.status().message(), 0);
  }
  spec->set(options, *value);
  return Status::OK();
}

// ---------------------------------------------------------------------------
// Reading files.

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};

// Reads the whole file at `path` into *contents.
Status ReadFile(const std::string& path, std::string* contents) {
  if (path.empty()) return Status::InvalidArgument("config file path is empty");
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (file == nullptr) {
    int error = errno;
    if (error == ENOENT || error == ENOTDIR) {
      return Status::NotFound("config file not found: " + path);
    }
    return Status::IOError(path + ": " + std::strerror(error));
  }
  contents->clear();
  char buffer[8192];
  while (true) {
    size_t read = std::fread(buffer, 1, sizeof(buffer), file.get());
    contents->append(buffer, read);
    if (read == sizeof(buffer)) continue;
    if (std::ferror(file.get())) {
      // E.g. EISDIR: fopen succeeds on a directory, the first read fails.
      return Status::IOError(path + ": " + std::strerror(errno));
    }
    return Status::OK();  // End of file.
  }
}

// ---------------------------------------------------------------------------
// Command line.

// What MatchValueFlag found.
struct FlagValue {
  bool matched = false;
  // False when the flag came without a value.
  bool has_value = false;
  std::string value;
};

// Matches argv[*i] against `flag` taking a value, either as "flag=value" or
// as "flag value"; in the second form *i advances past the value. A next
// argument beginning with "--" is another flag, not a value.
FlagValue MatchValueFlag(std::string_view flag, int argc, char** argv, int* i) {
  std::string_view arg = argv[*i];
  FlagValue result;
  if (arg.substr(0, flag.size()) != flag) return result;
  std::string_view tail = arg.substr(flag.size());
  if (tail.empty()) {
    result.matched = true;
    if (*i + 1 < argc && std::string_view(argv[*i + 1]).substr(0, 2) != "--") {
      ++*i;
      result.has_value = true;
      result.value = argv[*i];
    }
  } else if (tail[0] == '=') {
    result.matched = true;
    result.has_value = true;
    result.value = std::string(tail.substr(1));
  }
  return result;  // E.g. "--configuration" is some other flag.
}

// A double as TOML writes it: the shortest text that reads back the same,
// with a point so that it stays a float.
std::string RenderFraction(double value) {
  char buffer[64];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, error == std::errc() ? end : buffer);
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  return text;
}

std::string RenderMillis(Duration d) {
  return std::to_string(
      std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

std::string RenderNames(const std::vector<std::string>& names) {
  std::string out = "[";
  for (size_t i = 0; i < names.size(); ++i) {
    out += (i > 0 ? ", " : "") + QuoteTomlString(names[i]);
  }
  return out + "]";
}

// "  # Source: ...", the trailing comment naming where `key`'s value came
// from; empty without sources.
std::string SourceSuffix(const ConfigSources* sources, const std::string& key) {
  if (sources == nullptr) return "";
  return "  # Source: " + sources->Of(key);
}

// The five retry keys of `policy`, each as "key = value". `given` says
// which fields the table itself gives (each followed by its source, with
// `sources`; `prefix` is the table's dotted name and a dot); the others are
// written as comments naming where their value comes from (`inherited`), so
// that the output reads back to the same given fields.
std::string RenderRetry(const RetryPolicy& policy, const RetrySettings& given,
                        std::string_view inherited,
                        const ConfigSources* sources,
                        const std::string& prefix) {
  auto line = [&](bool is_given, const char* key, const std::string& value) {
    std::string text = std::string(key) + " = " + value;
    if (is_given) return text + SourceSuffix(sources, prefix + key) + "\n";
    return "# " + text + "  (" + std::string(inherited) + ")\n";
  };
  return line(given.kind.has_value(), "policy",
              QuoteTomlString(PolicyName(policy.kind))) +
         line(given.max_attempts.has_value(), "attempts",
              std::to_string(policy.max_attempts)) +
         line(given.initial_delay.has_value(), "base_ms",
              RenderMillis(policy.initial_delay)) +
         line(given.max_delay.has_value(), "max_ms",
              RenderMillis(policy.max_delay)) +
         line(given.jitter.has_value(), "jitter",
              RenderFraction(policy.jitter));
}

// The [retry] section: every key, each with where its value came from (the
// file's line or --set, given sources; else whether it is the default).
std::string DescribeDefaultRetry(const Options& options,
                                 const ConfigSources* sources) {
  const RetryPolicy& retry = options.default_retry;
  const RetryPolicy kBuiltIn;
  auto source = [sources](bool is_default, const char* key) -> std::string {
    if (sources != nullptr) {
      std::string from = sources->Of(std::string("retry.") + key);
      return "# Source: " +
             (from == "default" ? std::string("the built-in default") : from) +
             ".\n";
    }
    return is_default ? "# Source: the built-in default.\n"
                      : "# Source: the config (file or --set).\n";
  };
  std::string out =
      "\n[retry]\n"
      "# The retry policy of task types whose handler sets none in code; a\n"
      "# type's [types.NAME.retry] changes only the fields it gives.\n";
  out +=
      "# The policy's kind. Expected: one of \"none\", \"fixed\", "
      "\"exponential\".\n";
  out += source(retry.kind == kBuiltIn.kind, "policy");
  out += "policy = " + QuoteTomlString(PolicyName(retry.kind)) + "\n";
  out +=
      "# Attempts in all, the first included. Expected: an integer in "
      "[1, 1000000].\n";
  out += source(retry.max_attempts == kBuiltIn.max_attempts, "attempts");
  out += "attempts = " + std::to_string(retry.max_attempts) + "\n";
  out += "# The first retry's delay, in ms. Expected: 0 to max_ms.\n";
  out += source(retry.initial_delay == kBuiltIn.initial_delay, "base_ms");
  out += "base_ms = " + RenderMillis(retry.initial_delay) + "\n";
  out += "# The cap on any delay, in ms. Expected: base_ms to " +
         std::to_string(kMaxDelayMs) + " (365 days).\n";
  out += source(retry.max_delay == kBuiltIn.max_delay, "max_ms");
  out += "max_ms = " + RenderMillis(retry.max_delay) + "\n";
  out +=
      "# Random spread of exponential delays. Expected: a number in "
      "[0, 1].\n";
  out += source(retry.jitter == kBuiltIn.jitter, "jitter");
  out += "jitter = " + RenderFraction(retry.jitter) + "\n";
  return out;
}

// One [types.NAME] table: the fields the config gives, and for the others
// what a handler gets when its code sets none either.
std::string DescribeType(const std::string& name, const TypeSettings& type,
                         const Options& options, const ConfigSources* sources) {
  std::string table = "types." + QuoteTomlString(name);
  const std::string dotted = "types." + name + ".";
  auto from = [&](const char* field) {
    return SourceSuffix(sources, dotted + field);
  };
  std::string out = "\n[" + table + "]\n";
  out +=
      "# What handlers of this type get for each HandlerOptions field their "
      "code\n# leaves unset; a field set in code wins.\n";
  auto unset = [](const char* key, const char* fallback) {
    return "# " + std::string(key) + ": not set here; " + fallback + "\n";
  };
  if (type.max_concurrent) {
    out += "concurrency = " + std::to_string(*type.max_concurrent) +
           from("concurrency") + "\n";
  } else {
    out += unset("concurrency", "default 0 (no limit)");
  }
  if (type.timeout) {
    out += "timeout_ms = " + RenderMillis(*type.timeout) + from("timeout_ms") +
           "\n";
  } else {
    out += unset("timeout_ms", "default 0 (none)");
  }
  if (type.requires_gates) {
    out +=
        "gates = " + RenderNames(*type.requires_gates) + from("gates") + "\n";
  } else {
    out += unset("gates", "default none");
  }
  if (type.rate_limit_count) {
    out += "\n[" + table + ".rate_limit]\n";
    out += "count = " + std::to_string(*type.rate_limit_count) +
           from("rate_limit.count") + "\n";
    out += "period_ms = " + RenderMillis(type.rate_limit_period) +
           from("rate_limit.period_ms") + "\n";
  } else {
    out += unset("rate_limit", "default no limit");
  }
  out += "\n[" + table + ".retry]\n";
  out += RenderRetry(type.retry.Over(options.default_retry), type.retry,
                     "from [retry]", sources, dotted + "retry.");
  return out;
}

// Every [groups.NAME] table.
std::string DescribeGroups(const Options& options,
                           const ConfigSources* sources) {
  std::string out;
  for (const auto& [group, limit] : options.group_limits) {
    out += "\n[groups." + QuoteTomlString(group) + "]\n";
    out +=
        "# Over runtime.group_concurrency; Runtime::SetGroupConcurrency "
        "wins over it.\n";
    out += "concurrency = " + std::to_string(limit) +
           SourceSuffix(sources, "groups." + group + ".concurrency") + "\n";
  }
  return out;
}

// Every [rate_limits.NAME] table.
std::string DescribeRateLimits(const Options& options,
                               const ConfigSources* sources) {
  std::string out;
  for (const auto& [name, limit] : options.rate_limits) {
    std::string key = "rate_limits." + name + ".";
    out += "\n[rate_limits." + QuoteTomlString(name) + "]\n";
    out +=
        "# Added at Start unless code adds this name "
        "(Runtime::AddRateLimit).\n";
    out += "count = " + std::to_string(limit.count) +
           SourceSuffix(sources, key + "count") + "\n";
    out += "period_ms = " +
           std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                              limit.period)
                              .count()) +
           SourceSuffix(sources, key + "period_ms") + "\n";
    out += "types = " + RenderNames(limit.types) +
           SourceSuffix(sources, key + "types") + "\n";
  }
  return out;
}

std::string DescribeOptionsWith(const Options& options,
                                const ConfigSources* sources) {
  std::string out =
      "# The spool options in effect. Every key is documented in "
      "config/spool.toml.\n";
  std::string_view section;
  for (const KeySpec& spec : Registry()) {
    if (spec.section != section) {
      section = spec.section;
      out += "\n[" + std::string(section) + "]\n";
    }
    out += "# " + std::string(spec.doc) + " Expected: " + ExpectedValues(spec) +
           ".\n";
    if (sources != nullptr) {
      out += "# Source: " + sources->Of(spec.FullName()) + ".\n";
    }
    out += std::string(spec.name) + " = " + spec.render(options) + "\n";
  }
  out += DescribeDefaultRetry(options, sources);
  for (const auto& [name, type] : options.types) {
    out += DescribeType(name, type, options, sources);
  }
  out += DescribeGroups(options, sources);
  out += DescribeRateLimits(options, sources);
  for (const PeriodicTask& periodic : options.periodic) {
    out += "\n[periodic." + QuoteTomlString(periodic.name) + "]\n";
    out += "schedule = " + QuoteTomlString(periodic.schedule) + "\n";
    out += "type = " + QuoteTomlString(periodic.task.type) + "\n";
    out += "payload = " + QuoteTomlString(periodic.task.payload) + "\n";
    if (!periodic.task.options.group.empty()) {
      out += "group = " + QuoteTomlString(periodic.task.options.group) + "\n";
    }
    out +=
        "priority = " + std::to_string(periodic.task.options.priority) + "\n";
    out += std::string("catch_up = ") + (periodic.catch_up ? "true" : "false") +
           "\n";
  }
  return out;
}

}  // namespace

Status ParseOptions(std::string_view toml_text, std::string_view source_name,
                    const std::vector<std::string>& overrides,
                    Options* options) {
  toml::table root;
  Status status = ParseToml(toml_text, source_name, &root);
  if (!status.ok()) return status;

  Options candidate = *options;
  status = ApplyTable(root, source_name, &candidate);
  if (!status.ok()) return status;
  for (const std::string& assignment : overrides) {
    status = ApplyOverrideInPlace(assignment, &candidate);
    if (!status.ok()) return status;
  }
  status = candidate.Validate();
  if (!status.ok()) return status.WithContext(source_name);
  *options = std::move(candidate);
  return Status::OK();
}

Status LoadOptions(const std::string& path,
                   const std::vector<std::string>& overrides,
                   Options* options) {
  std::string contents;
  Status status = ReadFile(path, &contents);
  if (!status.ok()) return status;
  return ParseOptions(contents, path, overrides, options);
}

Status ParseOptions(std::string_view toml_text, std::string_view source_name,
                    const std::vector<std::string>& overrides, Options* options,
                    AppSections* app) {
  for (const std::string& name : app->names) {
    if (IsKnownSection(name) || IsTableSection(name) || name == "periodic" ||
        name.empty()) {
      return Status::InvalidArgument(
          "AppSections: \"" + name +
          "\" is one of spool's own sections; an application owns only "
          "others");
    }
  }
  toml::table root;
  Status status = ParseToml(toml_text, source_name, &root);
  if (!status.ok()) return status;

  Options candidate = *options;
  status = ApplyTable(root, source_name, &candidate, &app->names);
  if (!status.ok()) return status;
  std::vector<std::string> app_overrides;
  for (const std::string& assignment : overrides) {
    std::string_view section =
        std::string_view(assignment)
            .substr(0, std::min(assignment.find('.'), assignment.find('=')));
    if (std::find(app->names.begin(), app->names.end(), section) !=
        app->names.end()) {
      app_overrides.push_back(assignment);
      continue;
    }
    status = ApplyOverrideInPlace(assignment, &candidate);
    if (!status.ok()) return status;
  }
  status = candidate.Validate();
  if (!status.ok()) return status.WithContext(source_name);
  app->toml_text = AppText(toml_text, root, app->names);
  app->overrides = std::move(app_overrides);
  *options = std::move(candidate);
  return Status::OK();
}

Status LoadOptions(const std::string& path,
                   const std::vector<std::string>& overrides, Options* options,
                   AppSections* app) {
  std::string contents;
  Status status = ReadFile(path, &contents);
  if (!status.ok()) return status;
  return ParseOptions(contents, path, overrides, options, app);
}

Status ApplyOverride(std::string_view assignment, Options* options) {
  return ApplyOverrideInPlace(assignment, options);
}

std::string ConfigSources::Of(std::string_view key) const {
  auto it = by_key.find(std::string(key));
  return it == by_key.end() ? "default" : it->second;
}

namespace {

// Records the line of every value under `table`, its keys joined by dots
// after `prefix`; a value that is a table is walked, an array is one value.
void RecordSources(const toml::table& table, const std::string& prefix,
                   std::string_view source_name, ConfigSources* sources) {
  for (const auto& [key, node] : table) {
    std::string name = prefix + std::string(key.str());
    if (const toml::table* inner = node.as_table()) {
      RecordSources(*inner, name + ".", source_name, sources);
      continue;
    }
    sources->by_key[name] =
        std::string(source_name) + ":" + std::to_string(LineOf(node.source()));
  }
}

}  // namespace

Status FindConfigSources(std::string_view toml_text,
                         std::string_view source_name,
                         const std::vector<std::string>& overrides,
                         ConfigSources* sources) {
  toml::table root;
  Status status = ParseToml(toml_text, source_name, &root);
  if (!status.ok()) return status;
  ConfigSources found;
  RecordSources(root, "", source_name, &found);
  for (const std::string& assignment : overrides) {
    std::string_view key =
        std::string_view(assignment).substr(0, assignment.find('='));
    while (!key.empty() && key.back() == ' ') key.remove_suffix(1);
    found.by_key[std::string(key)] = "--set";
  }
  *sources = std::move(found);
  return Status::OK();
}

Status LoadConfigSources(const std::string& path,
                         const std::vector<std::string>& overrides,
                         ConfigSources* sources) {
  std::string contents;
  if (!path.empty()) {
    Status status = ReadFile(path, &contents);
    if (!status.ok()) return status;
  }
  return FindConfigSources(contents, path, overrides, sources);
}

std::string DescribeOptions(const Options& options) {
  return DescribeOptionsWith(options, nullptr);
}

std::string DescribeOptions(const Options& options,
                            const ConfigSources& sources) {
  return DescribeOptionsWith(options, &sources);
}

Status ParseCommandLine(int argc, char** argv, CommandLine* out) {
  CommandLine parsed;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") {
      parsed.rest.insert(parsed.rest.end(), argv + i + 1, argv + argc);
      break;
    }
    if (arg == "--help") {
      parsed.help = true;
    } else if (arg == "--print-config") {
      parsed.print_config = true;
    } else if (FlagValue config = MatchValueFlag("--config", argc, argv, &i);
               config.matched) {
      if (!config.has_value || config.value.empty()) {
        return Status::InvalidArgument("--config needs a file name");
      }
      if (!parsed.config_path.empty()) {
        return Status::InvalidArgument("--config given more than once");
      }
      parsed.config_path = std::move(config.value);
    } else if (FlagValue set = MatchValueFlag("--set", argc, argv, &i);
               set.matched) {
      if (!set.has_value || set.value.empty()) {
        return Status::InvalidArgument("--set needs section.key=value");
      }
      parsed.overrides.push_back(std::move(set.value));
    } else {
      parsed.rest.emplace_back(arg);
    }
  }
  *out = std::move(parsed);
  return Status::OK();
}

}  // namespace spool
