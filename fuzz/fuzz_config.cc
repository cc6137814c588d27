// fuzz_config: the config layer of include/spool/config.h on arbitrary text.
//
// An input is TOML text, optionally followed by a line "%%" and then one
// override ("section.key=value") per line. The same input, split at '\n',
// is also an argument vector for ParseCommandLine.
//
// Invariants checked on every input:
//   - ParseOptions never throws or crashes. On failure it returns
//     InvalidArgument whose message names the source (or "override"), is
//     of bounded size, is valid UTF-8 when the input is, and leaves the
//     options untouched; on success the options pass Validate().
//   - DescribeOptions of what parsed parses back, on top of different
//     options, to the same value of every configurable field and the same
//     text.
//   - ApplyOverride, alone: on failure it leaves the options untouched; on
//     success it changes at most one key's line of DescribeOptions (and
//     the "# Source:" comment above it), or, for a [types.NAME] or
//     [groups.NAME] key, adds that table; and it agrees with ParseOptions
//     given the same override.
//   - ParseCommandLine agrees with a model written from its contract in
//     config.h: the same result or error, every argument accounted for.

#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <spool/config.h>
#include <spool/options.h>

#include "fuzz/fuzz_support.h"

namespace spool::fuzz {
namespace {

constexpr std::string_view kSource = "<fuzz>";
// The separator between the TOML text and the overrides.
constexpr std::string_view kOverridesMark = "\n%%\n";
// Messages quote at most 64 bytes of a value or key, so this bound leaves
// room for the fixed text; a message near it means something is echoed
// unshortened.
constexpr size_t kMaxMessageBytes = 1024;

bool SameRetry(const RetryPolicy& a, const RetryPolicy& b) {
  return a.kind == b.kind && a.max_attempts == b.max_attempts &&
         a.initial_delay == b.initial_delay && a.max_delay == b.max_delay &&
         a.jitter == b.jitter;
}

bool SameTypes(const std::map<std::string, TypeSettings>& a,
               const std::map<std::string, TypeSettings>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, type] : a) {
    auto it = b.find(name);
    if (it == b.end()) return false;
    const TypeSettings& other = it->second;
    const RetrySettings& r = type.retry;
    const RetrySettings& q = other.retry;
    if (type.max_concurrent != other.max_concurrent ||
        type.timeout != other.timeout ||
        type.requires_gates != other.requires_gates ||
        type.rate_limit_count != other.rate_limit_count ||
        (type.rate_limit_count &&
         type.rate_limit_period != other.rate_limit_period) ||
        r.kind != q.kind || r.max_attempts != q.max_attempts ||
        r.initial_delay != q.initial_delay || r.max_delay != q.max_delay ||
        r.jitter != q.jitter) {
      return false;
    }
  }
  return true;
}

bool SameOptions(const Options& a, const Options& b) {
  return SameRetry(a.default_retry, b.default_retry) &&
         SameTypes(a.types, b.types) && a.group_limits == b.group_limits &&
         a.path == b.path && a.durability == b.durability &&
         a.max_payload_bytes == b.max_payload_bytes &&
         a.max_type_bytes == b.max_type_bytes &&
         a.memtable_bytes == b.memtable_bytes && a.readers == b.readers &&
         a.workers == b.workers && a.scheduler_threads == b.scheduler_threads &&
         a.close_timeout == b.close_timeout &&
         a.writer_max_batch == b.writer_max_batch &&
         a.claim_ahead == b.claim_ahead &&
         a.writer_state_cache == b.writer_state_cache &&
         a.group_concurrency == b.group_concurrency &&
         a.encryption_key_file == b.encryption_key_file &&
         a.plaintext_records == b.plaintext_records &&
         a.log_level == b.log_level;
}

// Valid options that differ from the defaults in every configurable field.
Options Unusual() {
  Options o;
  o.path = "/unusual";
  o.durability = Durability::kRelaxed;
  o.max_payload_bytes = 7;
  o.max_type_bytes = 9;
  o.memtable_bytes = size_t{3} << 20;
  o.readers = 3;
  o.workers = 5;
  o.scheduler_threads = 11;
  o.close_timeout = std::chrono::milliseconds(13);
  o.writer_max_batch = 17;
  o.claim_ahead = 19;
  o.writer_state_cache = 23;
  o.group_concurrency = 29;
  o.encryption_key_file = "/unusual-keys";
  o.plaintext_records = PlaintextRecords::kAccept;
  o.log_level = LogLevel::kError;
  // Not types or group_limits: a parse adds to those maps rather than
  // replacing them, so a round trip on top of these would keep extra ones.
  o.default_retry = RetryPolicy::Fixed(31, std::chrono::milliseconds(37));
  return o;
}

// The options a parse starts from: the defaults, plus the path Options
// lacks, so that a text setting nothing is valid.
Options Base() {
  Options o;
  o.path = "./fuzz-queue";
  return o;
}

std::vector<std::string> SplitLines(std::string_view text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// `input` is the text the error is about: messages quote parts of it, so
// they are valid UTF-8 whenever it is.
void CheckError(const Status& status, const std::string& what,
                std::string_view input) {
  FUZZ_CHECK(status.IsInvalidArgument(), what + ": " + status.ToString());
  const std::string& message = status.message();
  FUZZ_CHECK(message.rfind(std::string(kSource) + ": ", 0) == 0 ||
                 message.rfind("override", 0) == 0,
             what + " does not name its source: " + Printable(message));
  FUZZ_CHECK(message.size() <= kMaxMessageBytes,
             what + " message of " + std::to_string(message.size()) +
                 " bytes: " + Printable(message, 300));
  if (IsValidUtf8(input)) {
    FUZZ_CHECK(IsValidUtf8(message),
               what + " message is not UTF-8: " + Printable(message, 300));
  }
}

void CheckDescribeRoundTrip(const Options& options) {
  // DescribeOptions promises a round trip only for a UTF-8 path (TOML
  // strings must be); an override can set any bytes.
  if (!IsValidUtf8(options.path)) return;
  // Nor for type and group names that are not (an override may set them).
  for (const auto& [name, type] : options.types) {
    if (!IsValidUtf8(name)) return;
    // Nor gate names, which an override may set to any bytes too.
    for (const std::string& gate :
         type.requires_gates.value_or(std::vector<std::string>{})) {
      if (!IsValidUtf8(gate)) return;
    }
  }
  for (const auto& [name, limit] : options.group_limits) {
    if (!IsValidUtf8(name)) return;
  }
  const std::string text = DescribeOptions(options);
  Options parsed = Unusual();
  const Status status = ParseOptions(text, "<describe>", {}, &parsed);
  FUZZ_CHECK(status.ok(), "DescribeOptions output does not parse: " +
                              status.ToString() + "\n" + Printable(text, 2000));
  FUZZ_CHECK(SameOptions(parsed, options),
             "DescribeOptions does not round-trip:\n" + Printable(text, 2000));
  FUZZ_CHECK(DescribeOptions(parsed) == text, "DescribeOptions is not stable");
}

void CheckParse(std::string_view input, std::string_view toml,
                const std::vector<std::string>& overrides) {
  const Options base = Base();
  Options options = base;
  const Status status = ParseOptions(toml, kSource, overrides, &options);
  if (!status.ok()) {
    CheckError(status, "ParseOptions", input);
    FUZZ_CHECK(SameOptions(options, base),
               "a failed parse changed the options");
    return;
  }
  const Status valid = options.Validate();
  FUZZ_CHECK(valid.ok(), "parsed options fail Validate: " + valid.ToString());
  CheckDescribeRoundTrip(options);
}

void CheckOverride(const std::string& assignment) {
  const Options base = Base();
  Options options = base;
  const Status status = ApplyOverride(assignment, &options);
  Options via_parse = base;
  const Status parsed = ParseOptions("", kSource, {assignment}, &via_parse);
  if (!status.ok()) {
    CheckError(status, "ApplyOverride", assignment);
    FUZZ_CHECK(SameOptions(options, base), "a failed override changed options");
    FUZZ_CHECK(parsed == status, "ParseOptions reports " + parsed.ToString() +
                                     ", ApplyOverride " + status.ToString());
    return;
  }
  // At most one key changed, with the comment saying where it came from;
  // a [types.NAME] or [groups.NAME] key adds its table instead.
  const std::string section = assignment.substr(0, assignment.find('.'));
  if (section != "types" && section != "groups") {
    const std::vector<std::string> before = SplitLines(DescribeOptions(base));
    const std::vector<std::string> after = SplitLines(DescribeOptions(options));
    FUZZ_CHECK(before.size() == after.size(), "DescribeOptions changed shape");
    size_t changed = 0;
    for (size_t i = 0; i < before.size(); ++i) {
      changed += before[i] != after[i] && before[i].rfind("# Source:", 0) != 0;
    }
    FUZZ_CHECK(changed <= 1, "one override changed " + std::to_string(changed) +
                                 " keys: " + Printable(assignment));
  } else {
    FUZZ_CHECK(
        options.types.size() + options.group_limits.size() == 1,
        "one override made more than one table: " + Printable(assignment));
  }
  // ParseOptions applies it the same way, then validates.
  const Status valid = options.Validate();
  if (valid.ok()) {
    FUZZ_CHECK(parsed.ok() && SameOptions(via_parse, options),
               "ParseOptions and ApplyOverride disagree on " +
                   Printable(assignment) + ": " + parsed.ToString());
    CheckDescribeRoundTrip(options);
  } else {
    FUZZ_CHECK(!parsed.ok(), "ParseOptions skipped Validate");
  }
}

// ParseCommandLine as config.h describes it, written independently.
Status ModelCommandLine(const std::vector<std::string>& args,
                        CommandLine* out) {
  CommandLine model;
  auto starts_with = [](std::string_view s, std::string_view prefix) {
    return s.substr(0, prefix.size()) == prefix;
  };
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      model.rest.insert(model.rest.end(), args.begin() + i + 1, args.end());
      break;
    }
    if (arg == "--help") {
      model.help = true;
      continue;
    }
    if (arg == "--print-config") {
      model.print_config = true;
      continue;
    }
    bool handled = false;
    for (std::string_view flag : {"--config", "--set"}) {
      std::string value;
      bool has_value = false;
      if (arg == flag) {
        if (i + 1 < args.size() && !starts_with(args[i + 1], "--")) {
          value = args[++i];
          has_value = true;
        }
      } else if (starts_with(arg, std::string(flag) + "=")) {
        value = arg.substr(flag.size() + 1);
        has_value = true;
      } else {
        continue;
      }
      handled = true;
      if (flag == "--config") {
        if (!has_value || value.empty()) {
          return Status::InvalidArgument("--config needs a file name");
        }
        if (!model.config_path.empty()) {
          return Status::InvalidArgument("--config given more than once");
        }
        model.config_path = value;
      } else {
        if (!has_value || value.empty()) {
          return Status::InvalidArgument("--set needs section.key=value");
        }
        model.overrides.push_back(value);
      }
      break;
    }
    if (!handled) model.rest.push_back(arg);
  }
  *out = model;
  return Status::OK();
}

void CheckCommandLine(std::string_view input) {
  std::vector<std::string> args = SplitLines(input);
  args.insert(args.begin(), "spool");
  // A real argument is a C string: it ends at its first NUL.
  for (std::string& arg : args) arg.resize(std::strlen(arg.c_str()));
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  CommandLine sentinel;
  sentinel.config_path = "sentinel";
  sentinel.rest = {"sentinel"};
  CommandLine line = sentinel;
  const Status status =
      ParseCommandLine(static_cast<int>(args.size()), argv.data(), &line);
  CommandLine model;
  const Status expected = ModelCommandLine(args, &model);
  FUZZ_CHECK(status == expected, "ParseCommandLine says " + status.ToString() +
                                     ", the model " + expected.ToString());
  if (!status.ok()) {
    FUZZ_CHECK(line.config_path == "sentinel" && line.rest == sentinel.rest,
               "a failed ParseCommandLine changed its output");
    return;
  }
  FUZZ_CHECK(line.config_path == model.config_path &&
                 line.overrides == model.overrides && line.rest == model.rest &&
                 line.help == model.help &&
                 line.print_config == model.print_config,
             "ParseCommandLine differs from the model");
}

}  // namespace
}  // namespace spool::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spool::fuzz;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string_view toml = input;
  std::vector<std::string> overrides;
  if (size_t mark = input.find(kOverridesMark);
      mark != std::string_view::npos) {
    toml = input.substr(0, mark);
    overrides = SplitLines(input.substr(mark + kOverridesMark.size()));
  }
  CheckParse(input, toml, overrides);
  for (const std::string& assignment : overrides) CheckOverride(assignment);
  CheckCommandLine(input);
  return 0;
}
