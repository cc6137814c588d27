#include <cctype>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <spool/config.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing.h"

namespace spool {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The source name the rejection tests parse under, so messages read like the
// ones users see.
constexpr char kSource[] = "config/spool.toml";

std::string ShippedConfigPath() {
  return std::string(SPOOL_SOURCE_DIR) + "/config/spool.toml";
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// What config/spool.toml promises: Options' own defaults, plus the path the
// file sets because Options has none.
Options DocumentedDefaults() {
  Options options;
  options.path = "./spool-data";
  return options;
}

// Compares every field a config file can set.
void ExpectSameOptions(const Options& actual, const Options& expected) {
  EXPECT_EQ(actual.path, expected.path);
  EXPECT_EQ(actual.durability, expected.durability);
  EXPECT_EQ(actual.max_payload_bytes, expected.max_payload_bytes);
  EXPECT_EQ(actual.max_type_bytes, expected.max_type_bytes);
  EXPECT_EQ(actual.memtable_bytes, expected.memtable_bytes);
  EXPECT_EQ(actual.encryption_key_file, expected.encryption_key_file);
  EXPECT_EQ(actual.plaintext_records, expected.plaintext_records);
  EXPECT_EQ(actual.readers, expected.readers);
  EXPECT_EQ(actual.workers, expected.workers);
  EXPECT_EQ(actual.scheduler_threads, expected.scheduler_threads);
  EXPECT_EQ(actual.close_timeout, expected.close_timeout);
  EXPECT_EQ(actual.gate_recheck_interval, expected.gate_recheck_interval);
  EXPECT_EQ(actual.writer_max_batch, expected.writer_max_batch);
  EXPECT_EQ(actual.writer_max_pending_tasks, expected.writer_max_pending_tasks);
  EXPECT_EQ(actual.writer_max_pending_bytes, expected.writer_max_pending_bytes);
  EXPECT_EQ(actual.on_writer_full, expected.on_writer_full);
  EXPECT_EQ(actual.group_concurrency, expected.group_concurrency);
  EXPECT_EQ(actual.log_level, expected.log_level);
  EXPECT_EQ(actual.max_result_bytes, expected.max_result_bytes);
  EXPECT_EQ(actual.max_snoozes, expected.max_snoozes);
  EXPECT_EQ(actual.default_retry.kind, expected.default_retry.kind);
  EXPECT_EQ(actual.default_retry.max_attempts,
            expected.default_retry.max_attempts);
  EXPECT_EQ(actual.default_retry.initial_delay,
            expected.default_retry.initial_delay);
  EXPECT_EQ(actual.default_retry.max_delay, expected.default_retry.max_delay);
  EXPECT_EQ(actual.default_retry.jitter, expected.default_retry.jitter);
  EXPECT_EQ(actual.types.size(), expected.types.size());
  EXPECT_EQ(actual.group_limits, expected.group_limits);
  EXPECT_EQ(actual.rate_limits, expected.rate_limits);
  EXPECT_EQ(actual.retention_succeeded, expected.retention_succeeded);
  EXPECT_EQ(actual.retention_failed, expected.retention_failed);
  EXPECT_EQ(actual.retention_dead, expected.retention_dead);
  EXPECT_EQ(actual.retention_cancelled, expected.retention_cancelled);
  EXPECT_EQ(actual.retention_interval, expected.retention_interval);
  EXPECT_EQ(actual.retention_batch_size, expected.retention_batch_size);
}

// Parses `text` on top of valid options, so that only the text can fail.
Status Parse(const std::string& text, Options* options,
             const std::vector<std::string>& overrides = {}) {
  *options = DocumentedDefaults();
  return ParseOptions(text, kSource, overrides, options);
}

// The error `text` produces, as Status::ToString(); "OK" if none.
std::string ParseError(const std::string& text) {
  Options options;
  return Parse(text, &options).ToString();
}

std::string OverrideError(const std::string& assignment) {
  Options options = DocumentedDefaults();
  return ApplyOverride(assignment, &options).ToString();
}

// ---------------------------------------------------------------------------
// The shipped file.

TEST(ShippedConfigTest, LoadsToTheDocumentedDefaults) {
  Options options;
  Status status = LoadOptions(ShippedConfigPath(), {}, &options);
  ASSERT_TRUE(status.ok()) << status.ToString();
  ExpectSameOptions(options, DocumentedDefaults());
  EXPECT_EQ(options.scheduler_threads, 2);
}

// One "name = value" line of a TOML text in the simple layout both
// spool.toml and DescribeOptions use.
struct KeyLine {
  std::string key;      // "section.name"
  std::string value;    // The literal after " = ".
  std::string comment;  // The '#' lines right above it, joined.
};

bool IsBareKey(const std::string& text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

std::vector<KeyLine> KeyLinesIn(const std::string& text) {
  std::vector<KeyLine> keys;
  std::istringstream lines(text);
  std::string section;
  std::string comment;
  std::string line;
  while (std::getline(lines, line)) {
    size_t equals = line.find(" = ");
    if (line.rfind("#", 0) == 0) {
      comment += line + "\n";
      continue;
    }
    if (line.size() > 2 && line.front() == '[' && line.back() == ']') {
      section = line.substr(1, line.size() - 2);
    } else if (equals != std::string::npos &&
               IsBareKey(line.substr(0, equals))) {
      keys.push_back({section + "." + line.substr(0, equals),
                      line.substr(equals + 3), comment});
    }
    comment.clear();
  }
  return keys;
}

std::set<std::string> KeysIn(const std::string& text) {
  std::set<std::string> keys;
  for (const KeyLine& line : KeyLinesIn(text)) keys.insert(line.key);
  return keys;
}

// Every key carries a comment right above it, and that comment states the
// very value the line sets as "Default: <value>".
TEST(ShippedConfigTest, DocumentsEveryKeyAndItsDefault) {
  std::vector<KeyLine> keys = KeyLinesIn(ReadText(ShippedConfigPath()));
  for (const KeyLine& line : keys) {
    EXPECT_THAT(line.comment, HasSubstr("Default: " + line.value))
        << "the comment above " << line.key << " must state its default";
    EXPECT_THAT(line.comment, HasSubstr("Allowed: "))
        << "the comment above " << line.key << " must state what it allows";
  }
  EXPECT_EQ(keys.size(), 53u);
}

// A key added to the registry must also be documented in spool.toml.
TEST(ShippedConfigTest, SetsEveryKeyTheRegistryKnows) {
  std::set<std::string> documented = KeysIn(ReadText(ShippedConfigPath()));
  std::set<std::string> known = KeysIn(DescribeOptions(Options()));
  EXPECT_EQ(documented, known);
  EXPECT_EQ(known.size(), 53u);
}

// ---------------------------------------------------------------------------
// Accepted input.

TEST(ParseOptionsTest, EmptyTextKeepsTheGivenOptions) {
  Options options;
  ASSERT_TRUE(Parse("", &options).ok());
  ExpectSameOptions(options, DocumentedDefaults());
}

TEST(ParseOptionsTest, SetsEveryKey) {
  Options options;
  Status status = Parse(R"(
[storage]
path = "/var/lib/spool"
durability = "relaxed"
max_payload_bytes = 4096
max_type_bytes = 64
memtable_bytes = 8388608
[runtime]
readers = 3
workers = 16
scheduler_threads = 1
close_timeout_ms = 0
[writer]
max_batch = 7
[log]
level = "debug"
)",
                        &options);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(options.path, "/var/lib/spool");
  EXPECT_EQ(options.durability, Durability::kRelaxed);
  EXPECT_EQ(options.max_payload_bytes, 4096u);
  EXPECT_EQ(options.max_type_bytes, 64u);
  EXPECT_EQ(options.memtable_bytes, size_t{8} << 20);
  EXPECT_EQ(options.readers, 3);
  EXPECT_EQ(options.workers, 16);
  EXPECT_EQ(options.scheduler_threads, 1);
  EXPECT_EQ(options.close_timeout, std::chrono::milliseconds(0));
  EXPECT_EQ(options.writer_max_batch, 7u);
  EXPECT_EQ(options.log_level, LogLevel::kDebug);
}

TEST(ParseOptionsTest, KeysLeftOutKeepTheirValue) {
  Options options = DocumentedDefaults();
  options.workers = 9;
  options.log_level = LogLevel::kError;
  ASSERT_TRUE(
      ParseOptions("[runtime]\nreaders = 5\n", kSource, {}, &options).ok());
  EXPECT_EQ(options.readers, 5);
  EXPECT_EQ(options.workers, 9);
  EXPECT_EQ(options.log_level, LogLevel::kError);
}

TEST(ParseOptionsTest, AcceptsEveryTomlIntegerNotation) {
  Options options;
  ASSERT_TRUE(Parse("[storage]\nmax_payload_bytes = 1_048_576\n"
                    "max_type_bytes = 0x40\n[runtime]\nworkers = +8\n",
                    &options)
                  .ok());
  EXPECT_EQ(options.max_payload_bytes, 1048576u);
  EXPECT_EQ(options.max_type_bytes, 64u);
  EXPECT_EQ(options.workers, 8);
}

TEST(ParseOptionsTest, AcceptsEveryEnumName) {
  for (const char* name : {"sync", "relaxed", "memory"}) {
    Options options;
    EXPECT_TRUE(
        Parse(std::string("[storage]\ndurability = \"") + name + "\"", &options)
            .ok());
    EXPECT_STREQ(DurabilityName(options.durability), name);
  }
  for (const char* name : {"trace", "debug", "info", "warn", "error", "off"}) {
    Options options;
    EXPECT_TRUE(
        Parse(std::string("[log]\nlevel = \"") + name + "\"", &options).ok());
    EXPECT_STREQ(LogLevelName(options.log_level), name);
  }
}

// ---------------------------------------------------------------------------
// Rejected input. Each test checks what the message tells the user.

TEST(ParseOptionsTest, ErrorNamesFileKeyReasonAndLine) {
  EXPECT_EQ(ParseError("# spool\n[runtime]\nworkers = \"four\"\n"),
            "InvalidArgument: config/spool.toml: runtime.workers: expected an "
            "integer in [1, 4096], got \"four\" (line 3)");
}

TEST(ParseOptionsTest, RejectsUnknownSectionWithSuggestion) {
  std::string error = ParseError("\n[storag]\npath = \"x\"\n");
  EXPECT_THAT(error, HasSubstr("config/spool.toml: storag: unknown section; "
                               "did you mean [storage]? (line 2)"));
}

TEST(ParseOptionsTest, RejectsUnknownSectionListingTheKnownOnes) {
  EXPECT_THAT(
      ParseError("[database]\nx = 1\n"),
      HasSubstr(
          "database: unknown section; the sections are "
          "[storage], [runtime], [writer], [retention], [backup], [replication], "
          "[remote], "
          "[log] "
          "(line 1)"));
}

TEST(ParseOptionsTest, RejectsUnknownKeyWithSuggestion) {
  EXPECT_THAT(ParseError("[runtime]\nworker = 4\n"),
              HasSubstr("runtime.worker: unknown key; did you mean "
                        "runtime.workers? (line 2)"));
  EXPECT_THAT(ParseError("[runtime]\nclose_timeout_s = 4\n"),
              HasSubstr("did you mean runtime.close_timeout_ms?"));
}

TEST(ParseOptionsTest, RejectsUnknownKeyListingTheSectionsKeys) {
  std::string error = ParseError("[writer]\nbatch_bytes = 4\n");
  EXPECT_THAT(error, HasSubstr("writer.batch_bytes: unknown key; [writer] has "
                               "max_batch, state_cache, max_pending_tasks, "
                               "max_pending_bytes, on_full (line 2)"));
  EXPECT_THAT(error, Not(HasSubstr("did you mean")));
}

TEST(ParseOptionsTest, SuggestsTheSectionAKeyBelongsTo) {
  EXPECT_THAT(ParseError("[runtime]\nmax_batch = 4\n"),
              HasSubstr("runtime.max_batch: unknown key; did you mean "
                        "writer.max_batch?"));
}

TEST(ParseOptionsTest, RejectsKeysOutsideAnySection) {
  EXPECT_THAT(ParseError("workers = 4\n"),
              HasSubstr("config/spool.toml: workers: unknown key; did you "
                        "mean runtime.workers? (line 1)"));
  EXPECT_THAT(ParseError("colour = 4\n"),
              HasSubstr("colour: unknown key; keys belong in one of the "
                        "sections [storage], [runtime]"));
}

TEST(ParseOptionsTest, QuotesKeysThatAreNotBare) {
  EXPECT_THAT(ParseError("[runtime]\n\"two\\nlines\" = 1\n"),
              HasSubstr(": runtime.\"two\\nlines\": unknown key"));
  EXPECT_THAT(OverrideError("runtime.a\"b=1"),
              HasSubstr("override: runtime.\"a\\\"b\": unknown key"));
}

TEST(ParseOptionsTest, RejectsSectionThatIsNotATable) {
  EXPECT_THAT(ParseError("runtime = 4\n"),
              HasSubstr("runtime: expected a table ([runtime]), got 4"));
  EXPECT_THAT(ParseError("[[runtime]]\nworkers = 4\n"),
              HasSubstr("runtime: expected a table ([runtime]), got an array"));
}

TEST(ParseOptionsTest, RejectsNestedTables) {
  EXPECT_THAT(ParseError("[storage.extra]\nx = 1\n"),
              HasSubstr("storage.extra: unknown key"));
}

TEST(ParseOptionsTest, RejectsWrongTypes) {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"[runtime]\nworkers = \"4\"",
       "runtime.workers: expected an integer in [1, 4096], got \"4\""},
      {"[runtime]\nworkers = 4.0",
       "runtime.workers: expected an integer in [1, 4096], got 4.0 (a float)"},
      {"[runtime]\nworkers = true",
       "runtime.workers: expected an integer in [1, 4096], got true (a "
       "boolean)"},
      {"[runtime]\nworkers = [4]",
       "runtime.workers: expected an integer in [1, 4096], got an array"},
      {"[runtime]\nworkers = {n = 4}",
       "runtime.workers: expected an integer in [1, 4096], got a table"},
      {"[runtime]\nworkers = 1979-05-27",
       "runtime.workers: expected an integer in [1, 4096], got 1979-05-27 (a "
       "date)"},
      {"[storage]\npath = 7",
       "storage.path: expected a non-empty string, got 7"},
      {"[storage]\ndurability = 1",
       "storage.durability: expected one of \"sync\", \"relaxed\", "
       "\"memory\", \"replicated\", got 1"},
      {"[log]\nlevel = false",
       "log.level: expected one of \"trace\", \"debug\", \"info\", \"warn\", "
       "\"error\", \"off\", got false (a boolean)"},
  };
  for (const Case& c : cases) {
    std::string error = ParseError(c.text);
    EXPECT_THAT(error, HasSubstr(c.message)) << c.text;
    EXPECT_THAT(error, HasSubstr("(line 2)")) << c.text;
    EXPECT_THAT(error, HasSubstr("InvalidArgument: config/spool.toml: "));
  }
}

TEST(ParseOptionsTest, RejectsOutOfRangeIntegers) {
  EXPECT_THAT(ParseError("[runtime]\nworkers = 0"),
              HasSubstr("runtime.workers: expected an integer in [1, 4096], "
                        "got 0 (line 2)"));
  EXPECT_THAT(ParseError("[runtime]\nworkers = 4097"),
              HasSubstr("expected an integer in [1, 4096], got 4097"));
  EXPECT_THAT(ParseError("[writer]\nmax_batch = 1_000_001"),
              HasSubstr("writer.max_batch: expected an integer in [1, "
                        "1000000], got 1000001"));
  EXPECT_THAT(ParseError("[runtime]\nclose_timeout_ms = -1"),
              HasSubstr("runtime.close_timeout_ms: expected an integer in "
                        "[0, 86400000], got -1"));
}

// The bounds on enqueues not yet durable (issue 15): set from the file, and
// refused with the file, key, line and reason.
TEST(ParseOptionsTest, WriterPendingBoundsAndTheirPolicy) {
  Options options;
  Status status = Parse(
      "[writer]\nmax_pending_tasks = 500\nmax_pending_bytes = 1_048_576\n"
      "on_full = \"wait\"\n",
      &options);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(options.writer_max_pending_tasks, 500u);
  EXPECT_EQ(options.writer_max_pending_bytes, size_t{1} << 20);
  EXPECT_EQ(options.on_writer_full, WriterFull::kWait);
  ASSERT_TRUE(
      Parse("[writer]\nmax_pending_tasks = 0\nmax_pending_bytes = 0", &options)
          .ok());
  EXPECT_EQ(options.writer_max_pending_tasks, 0u);

  EXPECT_THAT(ParseError("[writer]\nmax_pending_tasks = 100_000_001"),
              HasSubstr("InvalidArgument: config/spool.toml: "
                        "writer.max_pending_tasks: expected an integer in [0, "
                        "100000000], got 100000001 (line 2)"));
  EXPECT_THAT(ParseError("[writer]\nmax_pending_tasks = -1"),
              HasSubstr("got -1 (line 2)"));
  EXPECT_THAT(ParseError("\n[writer]\nmax_pending_bytes = 1_099_511_627_777"),
              HasSubstr("config/spool.toml: writer.max_pending_bytes: expected "
                        "an integer in [0, 1099511627776], got 1099511627777 "
                        "(line 3)"));
  EXPECT_THAT(ParseError("[writer]\nmax_pending_bytes = \"64MiB\""),
              HasSubstr("writer.max_pending_bytes: expected an integer"));
  EXPECT_THAT(ParseError("[writer]\non_full = \"block\""),
              HasSubstr("config/spool.toml: writer.on_full: expected one of "
                        "\"busy\", \"wait\", got \"block\" (line 2)"));
  EXPECT_THAT(OverrideError("writer.on_full=drop"),
              HasSubstr("writer.on_full: expected one of \"busy\", \"wait\""));

  // Set in code, Validate (which Runtime::Open runs) names the field.
  options = DocumentedDefaults();
  options.on_writer_full = static_cast<WriterFull>(2);
  EXPECT_EQ(options.Validate().ToString(),
            "InvalidArgument: writer.on_full is out of range");
  options = DocumentedDefaults();
  options.writer_max_pending_tasks = 100'000'001;
  EXPECT_EQ(options.Validate().ToString(),
            "InvalidArgument: writer.max_pending_tasks must be in [0, "
            "100000000], got 100000001");
}

// Issue 15's snooze bound and result size: set, and refused out of range
// with the file, the key, the line and the range.
TEST(ParseOptionsTest, SnoozeBoundAndResultSize) {
  Options options;
  ASSERT_TRUE(Parse("[storage]\nmax_result_bytes = 0\n"
                    "[runtime]\nmax_snoozes = 1_000_000\n",
                    &options)
                  .ok());
  EXPECT_EQ(options.max_result_bytes, 0u);
  EXPECT_EQ(options.max_snoozes, 1000000u);
  EXPECT_THAT(ParseError("[storage]\nmax_result_bytes = 16_777_217"),
              HasSubstr("config/spool.toml: storage.max_result_bytes: expected "
                        "an integer in [0, 16777216], got 16777217 (line 2)"));
  EXPECT_THAT(ParseError("[runtime]\n\nmax_snoozes = -1"),
              HasSubstr("config/spool.toml: runtime.max_snoozes: expected an "
                        "integer in [0, 1000000], got -1 (line 3)"));
  EXPECT_THAT(ParseError("[runtime]\nmax_snoozes = \"many\""),
              HasSubstr("runtime.max_snoozes: expected an integer"));
}

// size_t fields must not wrap a negative value into a huge one.
TEST(ParseOptionsTest, RejectsNegativeValuesForUnsignedFields) {
  EXPECT_THAT(ParseError("[storage]\nmax_payload_bytes = -1"),
              HasSubstr("storage.max_payload_bytes: expected an integer in "
                        "[1, 1073741824], got -1"));
  EXPECT_THAT(ParseError("[writer]\nmax_batch = -9223372036854775808"),
              HasSubstr("got -9223372036854775808"));
}

// int fields must not truncate a value beyond int's range.
TEST(ParseOptionsTest, RejectsValuesBeyondIntRange) {
  EXPECT_THAT(ParseError("[runtime]\nreaders = 4294967298"),
              HasSubstr("runtime.readers: expected an integer in [1, 256], "
                        "got 4294967298"));
  EXPECT_THAT(ParseError("[runtime]\nworkers = 9223372036854775807"),
              HasSubstr("got 9223372036854775807"));
}

// TOML integers are 64-bit; toml++ reports anything longer as a syntax error.
TEST(ParseOptionsTest, RejectsValuesBeyondInt64AsSyntaxErrors) {
  std::string error = ParseError("[runtime]\nworkers = 99999999999999999999");
  EXPECT_THAT(error, HasSubstr("config/spool.toml: syntax error: "));
  EXPECT_THAT(error, HasSubstr("(line 2, column"));
}

TEST(ParseOptionsTest, RejectsEmptyPath) {
  EXPECT_THAT(ParseError("[storage]\npath = \"\""),
              HasSubstr("config/spool.toml: storage.path: expected a "
                        "non-empty string, got \"\" (line 2)"));
}

TEST(ParseOptionsTest, RejectsUnknownEnumNamesListingTheAllowedOnes) {
  EXPECT_THAT(ParseError("[storage]\ndurability = \"fast\""),
              HasSubstr("storage.durability: expected one of \"sync\", "
                        "\"relaxed\", \"memory\", \"replicated\", got \"fast\" "
                        "(line 2)"));
  // Names are case-sensitive, as everywhere in TOML.
  EXPECT_THAT(
      ParseError("[log]\nlevel = \"WARN\""),
      HasSubstr("log.level: expected one of \"trace\", \"debug\", "
                "\"info\", \"warn\", \"error\", \"off\", got \"WARN\""));
}

TEST(ParseOptionsTest, QuotesLongBadValuesShortened) {
  std::string error =
      ParseError("[log]\nlevel = \"" + std::string(10000, 'x') + "\"");
  EXPECT_THAT(error, HasSubstr("got \"" + std::string(64, 'x') + "\"..."));
  EXPECT_LT(error.size(), 300u);
}

TEST(ParseOptionsTest, RejectsSyntaxErrorsWithLineAndColumn) {
  for (const char* text : {"[runtime]\nworkers = \n", "[runtime\nworkers = 4",
                           "[runtime]\nworkers = 4\nworkers = 5\n",
                           "[runtime]\n\nworkers 4\n", "\"unterminated\n"}) {
    std::string error = ParseError(text);
    EXPECT_THAT(error,
                HasSubstr("InvalidArgument: config/spool.toml: syntax error: "))
        << text;
    EXPECT_THAT(error, HasSubstr("(line ")) << text;
    EXPECT_THAT(error, HasSubstr(", column ")) << text;
  }
  EXPECT_THAT(ParseError("[runtime]\n\nworkers 4\n"), HasSubstr("(line 3, "));
}

TEST(ParseOptionsTest, ReportsTheErrorNearestTheTopOfTheFile) {
  // toml++ iterates tables sorted by name ("log" before "runtime"); the user
  // should still see the first problem in reading order.
  EXPECT_THAT(ParseError("[runtime]\nworkers = 0\n[log]\nlevel = \"loud\"\n"),
              HasSubstr("runtime.workers"));
  EXPECT_THAT(ParseError("[log]\nlevel = \"loud\"\n[runtime]\nworkers = 0\n"),
              HasSubstr("log.level"));
}

TEST(ParseOptionsTest, RunsValidateAndNamesTheSource) {
  Options options;  // No path: the file must set one.
  Status status =
      ParseOptions("[runtime]\nworkers = 2\n", kSource, {}, &options);
  EXPECT_TRUE(status.IsInvalidArgument());
  EXPECT_EQ(status.ToString(),
            "InvalidArgument: config/spool.toml: storage.path must not be "
            "empty");
}

TEST(ParseOptionsTest, FailureLeavesOptionsUnchanged) {
  Options options = DocumentedDefaults();
  options.readers = 7;
  Status status = ParseOptions("[runtime]\nreaders = 3\nworkers = 0\n", kSource,
                               {}, &options);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(options.readers, 7);

  status = ParseOptions("[runtime]\nreaders = 3\n", kSource,
                        {"runtime.workers=0"}, &options);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(options.readers, 7);
}

// ---------------------------------------------------------------------------
// Files.

TEST(LoadOptionsTest, ReadsTheFileAndAppliesOverrides) {
  testing::TempDir dir;
  std::string path = dir.Sub("spool.toml");
  WriteText(path, "[storage]\npath = \"/q\"\n[runtime]\nworkers = 6\n");
  Options options;
  Status status = LoadOptions(path, {"runtime.readers=4"}, &options);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(options.path, "/q");
  EXPECT_EQ(options.workers, 6);
  EXPECT_EQ(options.readers, 4);
}

// ---------------------------------------------------------------------------
// Sections an embedding application owns (AppSections).

TEST(AppSectionsTest, LeavesOwnedSectionsAndOverridesToTheApplication) {
  const std::string text =
      "[storage]\n"                 // 1
      "path = \"/q\"\n"             // 2
      "[server]\n"                  // 3
      "listen = \"::1:1\" # c\n"    // 4
      "[runtime]\n"                 // 5
      "workers = 6\n"               // 6
      "[handlers.sleep]\n"          // 7
      "allow = [\n"                 // 8
      "  \"a\",\n"                  // 9
      "]\n"                         // 10
      "[handlers.\"http.post\"]\n"  // 11
      "url = \"\"\n";               // 12
  Options options;
  AppSections app;
  app.names = {"server", "handlers"};
  Status status = ParseOptions(
      text, kSource,
      {"server.listen=x", "runtime.readers=4", "handlers.noop.enabled=false"},
      &options, &app);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(options.path, "/q");
  EXPECT_EQ(options.workers, 6);
  EXPECT_EQ(options.readers, 4);
  // The owned lines at their own line numbers, the others blank.
  EXPECT_EQ(app.toml_text,
            "\n\n[server]\nlisten = \"::1:1\" # c\n\n\n[handlers.sleep]\n"
            "allow = [\n  \"a\",\n]\n[handlers.\"http.post\"]\nurl = \"\"\n\n");
  EXPECT_EQ(app.overrides,
            (std::vector<std::string>{"server.listen=x",
                                      "handlers.noop.enabled=false"}));
}

TEST(AppSectionsTest, UnownedSectionsAreStillRefused) {
  Options options;
  AppSections app;
  app.names = {"server"};
  Status status =
      ParseOptions("[storage]\npath = \"/q\"\n[handlers.x]\na = 1\n", kSource,
                   {}, &options, &app);
  EXPECT_THAT(status.ToString(), HasSubstr("handlers: unknown section"));
  status = ParseOptions("[storage]\npath = \"/q\"\n", kSource,
                        {"handlers.x.a=1"}, &options, &app);
  EXPECT_FALSE(status.ok());
}

TEST(AppSectionsTest, NoOwnedSectionGivesEmptyTextAndSpoolsOwnAreRefused) {
  Options options;
  AppSections app;
  app.names = {"server"};
  ASSERT_TRUE(
      ParseOptions("[storage]\npath = \"/q\"\n", kSource, {}, &options, &app)
          .ok());
  EXPECT_EQ(app.toml_text, "");
  AppSections bad;
  bad.names = {"runtime"};
  EXPECT_THAT(ParseOptions("", kSource, {}, &options, &bad).ToString(),
              HasSubstr("one of spool's own sections"));
}

TEST(AppSectionsTest, ShippedConfigLoadsWithOwnedSections) {
  Options options;
  AppSections app;
  app.names = {"server", "handlers"};
  Status status = LoadOptions(ShippedConfigPath(), {}, &options, &app);
  ASSERT_TRUE(status.ok()) << status.ToString();
  ExpectSameOptions(options, DocumentedDefaults());
}

TEST(LoadOptionsTest, ErrorsNameThePath) {
  testing::TempDir dir;
  std::string path = dir.Sub("bad.toml");
  WriteText(path, "[runtime]\nworkers = -3\n");
  Options options;
  Status status = LoadOptions(path, {}, &options);
  EXPECT_TRUE(status.IsInvalidArgument());
  EXPECT_THAT(status.ToString(),
              HasSubstr(path + ": runtime.workers: expected an integer in "
                               "[1, 4096], got -3 (line 2)"));
}

TEST(LoadOptionsTest, MissingFileIsNotFoundNamingThePath) {
  testing::TempDir dir;
  std::string path = dir.Sub("missing.toml");
  Options options;
  Status status = LoadOptions(path, {}, &options);
  EXPECT_TRUE(status.IsNotFound()) << status.ToString();
  EXPECT_THAT(status.ToString(), HasSubstr(path));

  status = LoadOptions(dir.Sub("missing/dir/spool.toml"), {}, &options);
  EXPECT_TRUE(status.IsNotFound()) << status.ToString();
}

TEST(LoadOptionsTest, DirectoryIsIOError) {
  testing::TempDir dir;
  Options options;
  Status status = LoadOptions(dir.path(), {}, &options);
  EXPECT_TRUE(status.IsIOError()) << status.ToString();
  EXPECT_THAT(status.ToString(), HasSubstr(dir.path()));
}

TEST(LoadOptionsTest, EmptyPathIsInvalidArgument) {
  Options options;
  EXPECT_TRUE(LoadOptions("", {}, &options).IsInvalidArgument());
}

// ---------------------------------------------------------------------------
// Overrides.

TEST(OverrideTest, OverridesWinOverTheFile) {
  Options options;
  Status status = ParseOptions(
      "[storage]\npath = \"/file\"\n[runtime]\nworkers = 6\n", kSource,
      {"runtime.workers=12", "storage.path=/cli", "log.level=off"}, &options);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(options.workers, 12);
  EXPECT_EQ(options.path, "/cli");
  EXPECT_EQ(options.log_level, LogLevel::kOff);
}

TEST(OverrideTest, LaterOverridesWin) {
  Options options;
  ASSERT_TRUE(
      Parse("", &options, {"runtime.workers=2", "runtime.workers=3"}).ok());
  EXPECT_EQ(options.workers, 3);
}

TEST(OverrideTest, OverridesCanSupplyTheRequiredPath) {
  Options options;
  ASSERT_TRUE(
      ParseOptions("", "<inline>", {"storage.path=./data"}, &options).ok());
  EXPECT_EQ(options.path, "./data");
}

TEST(OverrideTest, RejectsAssignmentsWithoutEqualsOrSection) {
  EXPECT_EQ(OverrideError("runtime.workers"),
            "InvalidArgument: override \"runtime.workers\": expected "
            "section.key=value");
  EXPECT_THAT(OverrideError("workers=4"),
              HasSubstr("override \"workers=4\": expected section.key=value"));
  EXPECT_THAT(OverrideError(""), HasSubstr("expected section.key=value"));
}

TEST(OverrideTest, RejectsUnknownKeysWithSuggestion) {
  EXPECT_EQ(OverrideError("runtime.wrokers=4"),
            "InvalidArgument: override: runtime.wrokers: unknown key; did you "
            "mean runtime.workers?");
  EXPECT_THAT(OverrideError("runtme.workers=4"),
              HasSubstr("did you mean runtime.workers?"));
  EXPECT_THAT(OverrideError("cache.size=4"),
              HasSubstr("cache.size: unknown key; keys belong in one of the "
                        "sections"));
}

TEST(OverrideTest, ChecksValuesLikeTheFile) {
  EXPECT_EQ(OverrideError("runtime.workers=four"),
            "InvalidArgument: override: runtime.workers: expected an integer "
            "in [1, 4096], got \"four\"");
  EXPECT_THAT(OverrideError("runtime.workers=0"),
              HasSubstr("expected an integer in [1, 4096], got 0"));
  EXPECT_THAT(OverrideError("runtime.workers=4.5"), HasSubstr("got \"4.5\""));
  EXPECT_THAT(OverrideError("runtime.workers= 4"), HasSubstr("got \" 4\""));
  EXPECT_THAT(OverrideError("runtime.workers="), HasSubstr("got \"\""));
  EXPECT_THAT(OverrideError("storage.max_payload_bytes=-1"),
              HasSubstr("expected an integer in [1, 1073741824], got -1"));
  EXPECT_THAT(OverrideError("runtime.readers=99999999999999999999"),
              HasSubstr("got \"99999999999999999999\""));
  EXPECT_THAT(OverrideError("storage.path="),
              HasSubstr("storage.path: expected a non-empty string, got \"\""));
  EXPECT_THAT(OverrideError("storage.durability=fast"),
              HasSubstr("expected one of \"sync\", \"relaxed\", \"memory\", "
                        "\"replicated\", got \"fast\""));
}

TEST(OverrideTest, AcceptsSignsAndSeparatorsInIntegers) {
  Options options = DocumentedDefaults();
  ASSERT_TRUE(ApplyOverride("runtime.workers=+8", &options).ok());
  EXPECT_EQ(options.workers, 8);
  ASSERT_TRUE(ApplyOverride("writer.max_batch=10_000", &options).ok());
  EXPECT_EQ(options.writer_max_batch, 10000u);
  for (const char* bad : {"1__0", "_1", "1_", "+", "-", "0x10", "1e3"}) {
    EXPECT_FALSE(
        ApplyOverride(std::string("writer.max_batch=") + bad, &options).ok())
        << bad;
  }
  EXPECT_EQ(options.writer_max_batch, 10000u);
}

TEST(OverrideTest, TakesStringValuesLiterally) {
  Options options = DocumentedDefaults();
  ASSERT_TRUE(ApplyOverride("storage.path= /a=b \"c\"", &options).ok());
  EXPECT_EQ(options.path, " /a=b \"c\"");
}

TEST(OverrideTest, FailureLeavesOptionsUnchanged) {
  Options options = DocumentedDefaults();
  EXPECT_FALSE(ApplyOverride("runtime.workers=0", &options).ok());
  EXPECT_FALSE(ApplyOverride("storage.durability=fast", &options).ok());
  ExpectSameOptions(options, DocumentedDefaults());
}

// The registry repeats Options::Validate()'s ranges so that errors can name
// the line. Every integer key's range, as DescribeOptions states it, must
// therefore be accepted by Validate at both ends and rejected just outside.
TEST(OverrideTest, EveryIntegerRangeAgreesWithValidate) {
  const std::string kRange = "Expected: an integer in [";
  int checked = 0;
  for (const KeyLine& line : KeyLinesIn(DescribeOptions(Options()))) {
    size_t range = line.comment.find(kRange);
    if (range == std::string::npos) continue;
    // "[min, max]"
    size_t min_at = range + kRange.size();
    size_t max_at = line.comment.find(", ", min_at) + 2;
    int64_t min = std::stoll(line.comment.substr(min_at));
    int64_t max = std::stoll(line.comment.substr(max_at));
    const std::string& key = line.key;
    for (int64_t inside : {min, max}) {
      Options options = DocumentedDefaults();
      std::string assignment = key + "=" + std::to_string(inside);
      ASSERT_TRUE(ApplyOverride(assignment, &options).ok()) << assignment;
      EXPECT_TRUE(options.Validate().ok()) << assignment;
    }
    for (int64_t outside : {min - 1, max + 1}) {
      std::string assignment = key + "=" + std::to_string(outside);
      EXPECT_THAT(OverrideError(assignment),
                  HasSubstr("[" + std::to_string(min) + ", " +
                            std::to_string(max) + "]"))
          << assignment;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 25);
}

// ---------------------------------------------------------------------------
// DescribeOptions.

void ExpectRoundTrip(const Options& original) {
  std::string text = DescribeOptions(original);
  Options parsed;
  Status status = ParseOptions(text, "<describe>", {}, &parsed);
  ASSERT_TRUE(status.ok()) << status.ToString() << "\n" << text;
  ExpectSameOptions(parsed, original);
}

TEST(DescribeOptionsTest, RoundTripsTheDefaults) {
  ExpectRoundTrip(DocumentedDefaults());
}

TEST(DescribeOptionsTest, RoundTripsNonDefaultValues) {
  Options options;
  options.path = "/tmp/q \"quoted\" \\ back\\slash\ttab\nnewline\x01 \xC3\xA9";
  options.durability = Durability::kMemory;
  options.max_payload_bytes = size_t{1} << 30;
  options.max_type_bytes = 1;
  options.readers = 256;
  options.workers = 4096;
  options.scheduler_threads = 1;
  options.close_timeout = std::chrono::milliseconds(0);
  options.writer_max_batch = 1'000'000;
  options.log_level = LogLevel::kOff;
  ExpectRoundTrip(options);
}

TEST(DescribeOptionsTest, RoundTripsEveryEnumValue) {
  for (Durability durability :
       {Durability::kSync, Durability::kRelaxed, Durability::kMemory}) {
    Options options = DocumentedDefaults();
    options.durability = durability;
    ExpectRoundTrip(options);
  }
  for (LogLevel level : {LogLevel::kTrace, LogLevel::kDebug, LogLevel::kInfo,
                         LogLevel::kWarn, LogLevel::kError, LogLevel::kOff}) {
    Options options = DocumentedDefaults();
    options.log_level = level;
    ExpectRoundTrip(options);
  }
}

TEST(DescribeOptionsTest, ShowsSectionsKeysAndDocs) {
  std::string text = DescribeOptions(DocumentedDefaults());
  EXPECT_THAT(text, HasSubstr("[storage]\n"));
  EXPECT_THAT(text, HasSubstr("path = \"./spool-data\"\n"));
  EXPECT_THAT(text, HasSubstr("[runtime]\n"));
  EXPECT_THAT(text, HasSubstr("workers = 4\n"));
  EXPECT_THAT(text, HasSubstr("close_timeout_ms = 30000\n"));
  EXPECT_THAT(text, HasSubstr("[writer]\n# "));
  EXPECT_THAT(text, HasSubstr("max_batch = 1024\n"));
  EXPECT_THAT(text, HasSubstr("level = \"warn\"\n"));
  EXPECT_THAT(text, HasSubstr("Expected: one of \"sync\", \"relaxed\", "
                              "\"memory\", \"replicated\".\ndurability = "
                              "\"sync\"\n"));
}

// ---------------------------------------------------------------------------
// Command line.

// Runs ParseCommandLine on {"spool", args...}.
Status ParseArgs(std::vector<std::string> args, CommandLine* out) {
  args.insert(args.begin(), "spool");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  return ParseCommandLine(static_cast<int>(args.size()), argv.data(), out);
}

TEST(CommandLineTest, NoArgumentsGiveAnEmptyCommandLine) {
  CommandLine line;
  ASSERT_TRUE(ParseArgs({}, &line).ok());
  EXPECT_EQ(line.config_path, "");
  EXPECT_TRUE(line.overrides.empty());
  EXPECT_TRUE(line.rest.empty());
  EXPECT_FALSE(line.help);
  EXPECT_FALSE(line.print_config);
}

TEST(CommandLineTest, ParsesBothFormsOfConfig) {
  CommandLine line;
  ASSERT_TRUE(ParseArgs({"--config", "a.toml"}, &line).ok());
  EXPECT_EQ(line.config_path, "a.toml");
  ASSERT_TRUE(ParseArgs({"--config=b=c.toml"}, &line).ok());
  EXPECT_EQ(line.config_path, "b=c.toml");
}

TEST(CommandLineTest, CollectsRepeatedSetInOrder) {
  CommandLine line;
  ASSERT_TRUE(ParseArgs({"--set", "runtime.workers=8", "--set=log.level=info",
                         "--set", "runtime.workers=9"},
                        &line)
                  .ok());
  EXPECT_EQ(line.overrides,
            (std::vector<std::string>{"runtime.workers=8", "log.level=info",
                                      "runtime.workers=9"}));
}

TEST(CommandLineTest, SetsHelpAndPrintConfig) {
  CommandLine line;
  ASSERT_TRUE(ParseArgs({"--print-config"}, &line).ok());
  EXPECT_TRUE(line.print_config);
  EXPECT_FALSE(line.help);
  ASSERT_TRUE(ParseArgs({"--help"}, &line).ok());
  EXPECT_TRUE(line.help);
  EXPECT_FALSE(line.print_config);
}

TEST(CommandLineTest, PassesEverythingElseThroughInOrder) {
  CommandLine line;
  ASSERT_TRUE(ParseArgs({"serve", "--port", "80", "--config", "s.toml", "-v",
                         "--configuration=x", "--set", "runtime.readers=1",
                         "--help=no", "last"},
                        &line)
                  .ok());
  EXPECT_EQ(line.config_path, "s.toml");
  EXPECT_EQ(line.overrides, std::vector<std::string>{"runtime.readers=1"});
  EXPECT_EQ(line.rest, (std::vector<std::string>{"serve", "--port", "80", "-v",
                                                 "--configuration=x",
                                                 "--help=no", "last"}));
  EXPECT_FALSE(line.help);
}

TEST(CommandLineTest, DoubleDashEndsTheFlags) {
  CommandLine line;
  ASSERT_TRUE(
      ParseArgs({"--help", "--", "--config", "x", "--set", "y"}, &line).ok());
  EXPECT_TRUE(line.help);
  EXPECT_EQ(line.config_path, "");
  EXPECT_EQ(line.rest,
            (std::vector<std::string>{"--config", "x", "--set", "y"}));
}

TEST(CommandLineTest, RejectsMissingValues) {
  CommandLine line;
  EXPECT_EQ(ParseArgs({"--config"}, &line).ToString(),
            "InvalidArgument: --config needs a file name");
  EXPECT_THAT(ParseArgs({"--config="}, &line).ToString(),
              HasSubstr("--config needs a file name"));
  EXPECT_THAT(ParseArgs({"--config", "--help"}, &line).ToString(),
              HasSubstr("--config needs a file name"));
  EXPECT_EQ(ParseArgs({"--set"}, &line).ToString(),
            "InvalidArgument: --set needs section.key=value");
  EXPECT_THAT(ParseArgs({"--set="}, &line).ToString(),
              HasSubstr("--set needs section.key=value"));
}

TEST(CommandLineTest, RejectsConfigGivenTwice) {
  CommandLine line;
  EXPECT_THAT(ParseArgs({"--config", "a", "--config=b"}, &line).ToString(),
              HasSubstr("--config given more than once"));
}

TEST(CommandLineTest, FailureLeavesTheOutputUnchanged) {
  CommandLine line;
  line.config_path = "kept";
  line.rest = {"kept"};
  EXPECT_FALSE(ParseArgs({"x", "--set"}, &line).ok());
  EXPECT_EQ(line.config_path, "kept");
  EXPECT_EQ(line.rest, std::vector<std::string>{"kept"});
}

TEST(CommandLineTest, FeedsLoadOptions) {
  CommandLine line;
  ASSERT_TRUE(
      ParseArgs({"--config", ShippedConfigPath(), "--set", "runtime.workers=3"},
                &line)
          .ok());
  Options options;
  Status status = LoadOptions(line.config_path, line.overrides, &options);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(options.workers, 3);
}

// ---------------------------------------------------------------------------
// Robustness.

// Damages `text` in one of several ways chosen by `rng`.
std::string Mutate(std::string text, std::mt19937_64* rng) {
  // Includes NUL and a byte that is never valid UTF-8.
  static const char kTomlBytes[] = "[]=\"'#\n.{},_-+0123456789\\\x00\xff";
  constexpr size_t kTomlByteCount = sizeof(kTomlBytes) - 1;
  auto position = [&](size_t size) {
    return size == 0 ? 0 : static_cast<size_t>((*rng)() % size);
  };
  int edits = 1 + static_cast<int>((*rng)() % 4);
  for (int i = 0; i < edits; ++i) {
    switch ((*rng)() % 5) {
      case 0:  // Flip one bit.
        if (!text.empty()) text[position(text.size())] ^= 1 << ((*rng)() % 8);
        break;
      case 1:  // Overwrite a byte with any byte.
        if (!text.empty()) {
          text[position(text.size())] = static_cast<char>((*rng)() & 0xff);
        }
        break;
      case 2:  // Truncate.
        text.resize(position(text.size() + 1));
        break;
      case 3:  // Insert a byte that matters to TOML.
        text.insert(position(text.size() + 1), 1,
                    kTomlBytes[position(kTomlByteCount)]);
        break;
      case 4: {  // Delete a run of bytes.
        size_t start = position(text.size() + 1);
        text.erase(start, (*rng)() % 16);
        break;
      }
    }
  }
  return text;
}

TEST(RobustnessTest, DamagedShippedFileNeverCrashes) {
  const std::string original = ReadText(ShippedConfigPath());
  ASSERT_FALSE(original.empty());
  std::mt19937_64 rng(20240611);
  int accepted = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string damaged = Mutate(original, &rng);
    Options options;
    Status status = ParseOptions(damaged, "fuzz.toml", {}, &options);
    if (status.ok()) {
      ++accepted;
      EXPECT_TRUE(options.Validate().ok());
      ExpectRoundTrip(options);
    } else {
      EXPECT_TRUE(status.IsInvalidArgument()) << status.ToString();
      EXPECT_THAT(status.message(), HasSubstr("fuzz.toml: "));
    }
  }
  // Damage inside comments is harmless, so some inputs must still load.
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace spool

namespace spool {
namespace {

TEST(PeriodicConfigTest, TablesBecomePeriodicTasks) {
  Options options;
  Status s = ParseOptions(
      "[storage]\npath = \"q\"\n"
      "[periodic.nightly]\nschedule = \"0 2 * * *\"\ntype = \"report\"\n"
      "payload = \"x\"\npriority = 3\ngroup = \"ops\"\ncatch_up = false\n"
      "[periodic.often]\nschedule = \"every 5m\"\ntype = \"ping\"\n",
      "test.toml", {}, &options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(options.periodic.size(), 2u);
  const PeriodicTask* nightly = nullptr;
  for (const auto& p : options.periodic) {
    if (p.name == "nightly") nightly = &p;
  }
  ASSERT_NE(nightly, nullptr);
  EXPECT_EQ(nightly->schedule, "0 2 * * *");
  EXPECT_EQ(nightly->task.type, "report");
  EXPECT_EQ(nightly->task.payload, "x");
  EXPECT_EQ(nightly->task.options.priority, 3);
  EXPECT_EQ(nightly->task.options.group, "ops");
  EXPECT_FALSE(nightly->catch_up);
  // The rendering reads back the same.
  Options again;
  ASSERT_TRUE(
      ParseOptions(DescribeOptions(options), "round trip", {}, &again).ok());
  EXPECT_EQ(again.periodic.size(), 2u);
}

TEST(PeriodicConfigTest, BadTablesNameTheKeyAndTheReason) {
  Options options;
  Status s =
      ParseOptions("[periodic.x]\nschedule = \"61 * * * *\"\ntype = \"t\"\n",
                   "test.toml", {}, &options);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("periodic.x.schedule"), std::string::npos)
      << s.ToString();
  s = ParseOptions("[periodic.x]\ntype = \"t\"\n", "test.toml", {}, &options);
  EXPECT_NE(s.message().find("needs a schedule"), std::string::npos)
      << s.ToString();
  s = ParseOptions(
      "[periodic.x]\nschedule = \"@daily\"\ntype = \"t\"\nspeed = 1\n",
      "test.toml", {}, &options);
  EXPECT_NE(s.message().find("unknown key"), std::string::npos) << s.ToString();
  s = ParseOptions("[periodic.x]\nschedule = \"0 0 30 2 *\"\ntype = \"t\"\n",
                   "test.toml", {}, &options);
  EXPECT_NE(s.message().find("never fires"), std::string::npos) << s.ToString();
}

// ---------------------------------------------------------------------------
// [retention] (issue 15).

TEST(RetentionConfigTest, DurationsInEveryUnitAndForever) {
  Options options;
  Status status = Parse(R"([retention]
succeeded = "90s"
failed = "30m"
dead = "forever"
cancelled = "2d"
interval = "1h"
batch_size = 50
)",
                        &options);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(options.retention_succeeded, std::chrono::seconds(90));
  EXPECT_EQ(options.retention_failed, std::chrono::minutes(30));
  EXPECT_EQ(options.retention_dead, Duration(0));
  EXPECT_EQ(options.retention_cancelled, std::chrono::hours(48));
  EXPECT_EQ(options.retention_interval, std::chrono::hours(1));
  EXPECT_EQ(options.retention_batch_size, 50u);
  ASSERT_TRUE(ApplyOverride("retention.succeeded=0", &options).ok());
  EXPECT_EQ(options.retention_succeeded, Duration(0));
  // DescribeOptions writes what parses back to the same value.
  EXPECT_THAT(DescribeOptions(options), HasSubstr("dead = \"forever\""));
  EXPECT_THAT(DescribeOptions(options), HasSubstr("cancelled = \"2d\""));
}

TEST(RetentionConfigTest, BadDurationsNameFileKeyLineAndReason) {
  EXPECT_EQ(ParseError("[retention]\n\nsucceeded = \"24\"\n"),
            "InvalidArgument: config/spool.toml: retention.succeeded: "
            "expected a duration such as \"30m\", \"24h\" or \"7d\" from "
            "forever to 3650d (\"forever\" or \"0\": none), got \"24\" "
            "(line 3)");
  EXPECT_THAT(ParseError("[retention]\nfailed = \"3651d\"\n"),
              HasSubstr("retention.failed: expected a duration"));
  EXPECT_THAT(ParseError("[retention]\ndead = \"-1h\"\n"),
              HasSubstr("retention.dead: expected a duration"));
  EXPECT_THAT(ParseError("[retention]\ncancelled = 86400\n"),
              HasSubstr("retention.cancelled: expected a duration"));
  EXPECT_THAT(ParseError("[retention]\ninterval = \"forever\"\n"),
              HasSubstr("retention.interval: expected a duration such as "
                        "\"30m\", \"24h\" or \"7d\" from 1s to 1d, got "
                        "\"forever\" (line 2)"));
  EXPECT_THAT(ParseError("[retention]\ninterval = \"2d\"\n"),
              HasSubstr("retention.interval"));
  EXPECT_THAT(ParseError("[retention]\nbatch_size = 0\n"),
              HasSubstr("retention.batch_size: expected an integer in [1, "
                        "1000000], got 0 (line 2)"));
  EXPECT_THAT(OverrideError("retention.succeeded=1w"),
              HasSubstr("retention.succeeded"));
  EXPECT_THAT(ParseError("[retention]\nkeep = \"1d\"\n"),
              HasSubstr("unknown key"));
}

TEST(RetentionConfigTest, ValidateNamesTheField) {
  Options options = DocumentedDefaults();
  options.retention_dead = Duration(-1);
  EXPECT_THAT(options.Validate().ToString(), HasSubstr("retention.dead"));
  options = DocumentedDefaults();
  options.retention_interval = std::chrono::milliseconds(10);
  EXPECT_THAT(options.Validate().ToString(), HasSubstr("retention.interval"));
  options = DocumentedDefaults();
  options.retention_batch_size = 0;
  EXPECT_THAT(options.Validate().ToString(), HasSubstr("retention.batch_size"));
}

}  // namespace
}  // namespace spool

namespace spool {
namespace {

// ---------------------------------------------------------------------------
// [retry], [types.NAME] and [groups.NAME] (issue 15).

constexpr char kTypesText[] = R"(
[retry]
policy = "fixed"
attempts = 5
base_ms = 2000

[types.email]
concurrency = 3
timeout_ms = 1500
gates = ["smtp", "dns"]

[types.email.rate_limit]
count = 10
period_ms = 60000

[types.email.retry]
attempts = 7

[types."http.post"]
retry = { policy = "exponential", jitter = 0.25, max_ms = 9000 }

[groups.customer-42]
concurrency = 1

[groups.bulk]
concurrency = 0
)";

TEST(PerTypeConfigTest, TablesSetEveryPerTypeRetryAndGroupKey) {
  Options options;
  Status s = Parse(kTypesText, &options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(options.default_retry.kind, RetryPolicy::Kind::kFixed);
  EXPECT_EQ(options.default_retry.max_attempts, 5u);
  EXPECT_EQ(options.default_retry.initial_delay, std::chrono::seconds(2));
  EXPECT_EQ(options.default_retry.max_delay, std::chrono::hours(1));

  ASSERT_EQ(options.types.size(), 2u);
  const TypeSettings& email = options.types.at("email");
  EXPECT_EQ(email.max_concurrent, 3u);
  EXPECT_EQ(email.timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(email.requires_gates, (std::vector<std::string>{"smtp", "dns"}));
  EXPECT_EQ(email.rate_limit_count, 10u);
  EXPECT_EQ(email.rate_limit_period, std::chrono::minutes(1));
  EXPECT_EQ(email.retry.max_attempts, 7u);
  EXPECT_FALSE(email.retry.kind.has_value());
  // The type's retry goes over [retry], field by field.
  RetryPolicy email_retry = options.RetryPolicyFor("email");
  EXPECT_EQ(email_retry.kind, RetryPolicy::Kind::kFixed);
  EXPECT_EQ(email_retry.max_attempts, 7u);
  EXPECT_EQ(email_retry.initial_delay, std::chrono::seconds(2));

  const TypeSettings& post = options.types.at("http.post");
  EXPECT_FALSE(post.max_concurrent.has_value());
  EXPECT_FALSE(post.timeout.has_value());
  EXPECT_FALSE(post.requires_gates.has_value());
  EXPECT_FALSE(post.rate_limit_count.has_value());
  RetryPolicy post_retry = options.RetryPolicyFor("http.post");
  EXPECT_EQ(post_retry.kind, RetryPolicy::Kind::kExponential);
  EXPECT_EQ(post_retry.max_attempts, 5u);
  EXPECT_EQ(post_retry.max_delay, std::chrono::seconds(9));
  EXPECT_DOUBLE_EQ(post_retry.jitter, 0.25);
  // A type without a table gets [retry] itself.
  EXPECT_EQ(options.RetryPolicyFor("other").max_attempts, 5u);

  EXPECT_EQ(options.group_limits,
            (std::map<std::string, uint32_t>{{"bulk", 0}, {"customer-42", 1}}));
}

TEST(PerTypeConfigTest, NoTablesLeaveTheBuiltInDefaults) {
  Options options;
  ASSERT_TRUE(Parse("[runtime]\nworkers = 2\n", &options).ok());
  EXPECT_TRUE(options.types.empty());
  EXPECT_TRUE(options.group_limits.empty());
  RetryPolicy builtin;
  EXPECT_EQ(options.default_retry.kind, builtin.kind);
  EXPECT_EQ(options.default_retry.max_attempts, builtin.max_attempts);
  EXPECT_EQ(options.default_retry.initial_delay, builtin.initial_delay);
  EXPECT_EQ(options.default_retry.max_delay, builtin.max_delay);
  EXPECT_EQ(options.default_retry.jitter, builtin.jitter);
}

// Every bad input is refused with the file, the key, the reason and the
// line.
TEST(PerTypeConfigTest, BadInputNamesFileKeyReasonAndLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[types.email]\nconcurency = 3\n",
       "config/spool.toml: types.email.concurency: unknown key; a "
       "[types.NAME] table takes concurrency, timeout_ms, rate_limit.count, "
       "rate_limit.period_ms, gates, retry.policy, retry.attempts, "
       "retry.base_ms, retry.max_ms and retry.jitter (line 2)"},
      {"[types.email]\nconcurrency = \"3\"\n",
       "config/spool.toml: types.email.concurrency: expected an integer in "
       "[0, 1000000], got \"3\" (line 2)"},
      {"[types.email]\nconcurrency = 1_000_001\n",
       "types.email.concurrency: expected an integer in [0, 1000000], got "
       "1000001 (line 2)"},
      {"[types.email]\ntimeout_ms = -1\n",
       "types.email.timeout_ms: expected an integer in [0, 31536000000], got "
       "-1 (line 2)"},
      {"[types.email]\ntimeout_ms = 1.5\n",
       "types.email.timeout_ms: expected an integer in [0, 31536000000], got "
       "1.5 (a float) (line 2)"},
      {"[types.email]\ngates = \"smtp\"\n",
       "types.email.gates: expected an array of non-empty strings, got "
       "\"smtp\" (line 2)"},
      {"[types.email]\ngates = [\"smtp\", \"\"]\n",
       "types.email.gates: expected an array of non-empty strings, got an "
       "element \"\" (line 2)"},
      {"[types.email]\nrate_limit = 5\n",
       "types.email.rate_limit: expected a table, got 5 (line 2)"},
      {"[types.email.rate_limit]\ncount = 5\nperiod_ms = 0\n",
       "types.email.rate_limit.period_ms: expected an integer in [1, "
       "86400000], got 0 (line 3)"},
      {"[types.email.rate_limit]\nburst = 5\n",
       "types.email.rate_limit.burst: unknown key; a [types.NAME] table takes"},
      {"[types.email.retry]\npolicy = \"linear\"\n",
       "types.email.retry.policy: expected one of \"none\", \"fixed\", "
       "\"exponential\", got \"linear\" (line 2)"},
      {"[types.email.retry]\nattempts = 0\n",
       "types.email.retry.attempts: expected an integer in [1, 1000000], got "
       "0 (line 2)"},
      {"[types.email.retry]\njitter = 1.5\n",
       "types.email.retry.jitter: expected a number in [0, 1], got 1.5 (a "
       "float) (line 2)"},
      {"[types.email.retry]\nmax_ms = 500\n",
       "types.email.retry.max_ms: max_ms (500) must not be below base_ms "
       "(1000) (line 2)"},
      {"[types.email.retry.x]\nattempts = 1\n",
       "types.email.retry.x: unknown key"},
      {"types = 5\n", "types: expected [types.NAME] tables, got 5 (line 1)"},
      {"[types]\nemail = 3\n",
       "types.email: expected a table [types.email], got 3 (line 2)"},
      {"[retry]\ntries = 4\n",
       "config/spool.toml: retry.tries: unknown key; [retry] takes policy, "
       "attempts, base_ms, max_ms and jitter (line 2)"},
      {"[retry]\nbase_ms = 7200000\n",
       "retry.base_ms: max_ms (3600000) must not be below base_ms (7200000) "
       "(line 2)"},
      {"retry = \"none\"\n",
       "retry: expected a [retry] table, got \"none\" (line 1)"},
      {"[groups.bulk]\nconcurrency = -1\n",
       "groups.bulk.concurrency: expected an integer in [0, 1000000], got -1 "
       "(line 2)"},
      {"[groups.bulk]\nlimit = 2\n",
       "groups.bulk.limit: unknown key; a [groups.NAME] table takes "
       "concurrency (line 2)"},
      {"[typs.email]\nconcurrency = 3\n",
       "typs: unknown section; did you mean [types]? (line 1)"},
  };
  for (const auto& [text, expected] : cases) {
    EXPECT_THAT(ParseError(text), HasSubstr(expected)) << text;
  }
}

// [rate_limits.NAME]: named limits from the file and from --set, printed
// back as they load, refused naming the key.
TEST(RateLimitConfigTest, TablesAndOverridesSetNamedLimits) {
  Options options;
  Status s = Parse(R"(
[rate_limits.mail-api]
count = 100
period_ms = 60000
types = ["email", "digest"]
)",
                   &options,
                   {"rate_limits.sms.count=5", "rate_limits.sms.types=sms",
                    "rate_limits.mail-api.count=50"});
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(options.Validate().ok()) << options.Validate().ToString();
  const NamedRateLimitSettings& mail = options.rate_limits.at("mail-api");
  EXPECT_EQ(mail.count, 50u) << "the override wins over the file";
  EXPECT_EQ(mail.period, std::chrono::minutes(1));
  EXPECT_EQ(mail.types, (std::vector<std::string>{"email", "digest"}));
  const NamedRateLimitSettings& sms = options.rate_limits.at("sms");
  EXPECT_EQ(sms.count, 5u);
  EXPECT_EQ(sms.period, std::chrono::seconds(1));
  EXPECT_EQ(sms.types, std::vector<std::string>{"sms"});
  ExpectRoundTrip(options);
}

TEST(RateLimitConfigTest, BadTablesAreRefusedNamingTheKey) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[rate_limits.api]\ncount = 0\ntypes = [\"t\"]\n",
       "rate_limits.api.count: expected an integer in [1, 1000000], got 0 "
       "(line 2)"},
      {"[rate_limits.api]\ncount = 1\nburst = 2\n",
       "rate_limits.api.burst: unknown key; a [rate_limits.NAME] table takes "
       "count, period_ms and types (line 3)"},
      {"[rate_limits.api]\ncount = 1\ntypes = \"t\"\n",
       "rate_limits.api.types: expected an array of non-empty strings"},
      {"rate_limits = 5\n",
       "rate_limits: expected [rate_limits.NAME] tables, got 5 (line 1)"},
  };
  for (const auto& [text, expected] : cases) {
    EXPECT_THAT(ParseError(text), HasSubstr(expected)) << text;
  }
  Options options = DocumentedDefaults();
  options.rate_limits["api"].types = {"t"};
  EXPECT_THAT(
      options.Validate().ToString(),
      HasSubstr("rate_limits.api.count must be in [1, 1000000], got 0"));
  options.rate_limits["api"].count = 1;
  options.rate_limits["api"].types.clear();
  EXPECT_THAT(options.Validate().ToString(),
              HasSubstr("rate_limits.api.types must name at least one type"));
}

// What only the whole Options can judge is refused by Validate, naming the
// key.
TEST(PerTypeConfigTest, ValidateNamesThePerTypeKey) {
  Options options = DocumentedDefaults();
  options.types["email"].retry.max_attempts = 0;
  EXPECT_THAT(options.Validate().ToString(),
              HasSubstr("types.email.retry.attempts must be in [1, 1000000], "
                        "got 0"));
  options = DocumentedDefaults();
  options.default_retry.jitter = 2;
  EXPECT_THAT(options.Validate().ToString(),
              HasSubstr("retry.jitter must be in [0, 1], got 2"));
  options = DocumentedDefaults();
  options.types[std::string(200, 't')].max_concurrent = 1;
  EXPECT_THAT(options.Validate().ToString(),
              HasSubstr("the type name is 200 bytes; storage.max_type_bytes "
                        "is 128"));
  options = DocumentedDefaults();
  options.types["email"].rate_limit_period = Duration(0);
  EXPECT_THAT(options.Validate().ToString(),
              HasSubstr("types.email.rate_limit.period_ms must be in [1, "
                        "86400000], got 0"));
  options = DocumentedDefaults();
  options.group_limits[""] = 1;
  EXPECT_THAT(options.Validate().ToString(),
              HasSubstr("groups: a group name must not be empty"));
  options = DocumentedDefaults();
  options.group_limits["g"] = 2'000'000;
  EXPECT_THAT(options.Validate().ToString(),
              HasSubstr("groups.g.concurrency must be in [0, 1000000]"));
  // A long type name in a file is refused with the file's name.
  EXPECT_THAT(
      ParseError("[types." + std::string(200, 't') + "]\nconcurrency = 1\n"),
      HasSubstr("config/spool.toml: types.ttt"));
}

TEST(PerTypeConfigTest, OverridesSetTheSameKeysAndWinOverTheFile) {
  Options options;
  Status s = Parse(kTypesText, &options,
                   {"types.email.concurrency=5", "types.http.post.timeout_ms=7",
                    "types.email.gates=net", "types.new.retry.jitter=0.5",
                    "types.new.rate_limit.count=3", "retry.attempts=9",
                    "groups.a.b.concurrency=2"});
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(options.types.at("email").max_concurrent, 5u);
  EXPECT_EQ(options.types.at("email").requires_gates,
            (std::vector<std::string>{"net"}));
  EXPECT_EQ(options.types.at("http.post").timeout,
            std::chrono::milliseconds(7));
  EXPECT_EQ(options.types.at("new").retry.jitter, 0.5);
  EXPECT_EQ(options.types.at("new").rate_limit_count, 3u);
  EXPECT_EQ(options.default_retry.max_attempts, 9u);
  EXPECT_EQ(options.group_limits.at("a.b"), 2u);

  EXPECT_EQ(OverrideError("types.email.speed=1"),
            "InvalidArgument: override: types.\"email.speed\": unknown key; a "
            "[types.NAME] table takes concurrency, timeout_ms, "
            "rate_limit.count, rate_limit.period_ms, gates, retry.policy, "
            "retry.attempts, retry.base_ms, retry.max_ms and retry.jitter");
  EXPECT_EQ(OverrideError("retry.jitter=2"),
            "InvalidArgument: override: retry.jitter: expected a number in "
            "[0, 1], got \"2\"");
  EXPECT_THAT(OverrideError("types.email.retry.policy=linear"),
              HasSubstr("types.email.retry.policy: expected one of"));
  EXPECT_THAT(OverrideError("types.email.gates=a,,b"),
              HasSubstr("types.email.gates: expected an array of non-empty "
                        "strings, got \"a,,b\""));
  EXPECT_THAT(OverrideError("groups.bulk.concurrency=x"),
              HasSubstr("groups.bulk.concurrency: expected an integer in [0, "
                        "1000000], got \"x\""));
  EXPECT_THAT(OverrideError("types.concurrency=1"),
              HasSubstr("types.concurrency: unknown key"));
  // A failed override changes nothing.
  Options unchanged = DocumentedDefaults();
  EXPECT_FALSE(ApplyOverride("types.email.concurrency=-1", &unchanged).ok());
  EXPECT_TRUE(unchanged.types.empty());
}

bool SameRetry(const RetryPolicy& a, const RetryPolicy& b) {
  return a.kind == b.kind && a.max_attempts == b.max_attempts &&
         a.initial_delay == b.initial_delay && a.max_delay == b.max_delay &&
         a.jitter == b.jitter;
}

bool SameRetrySettings(const RetrySettings& a, const RetrySettings& b) {
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
    if (type.max_concurrent != other.max_concurrent ||
        type.timeout != other.timeout ||
        type.requires_gates != other.requires_gates ||
        type.rate_limit_count != other.rate_limit_count ||
        (type.rate_limit_count &&
         type.rate_limit_period != other.rate_limit_period) ||
        !SameRetrySettings(type.retry, other.retry)) {
      return false;
    }
  }
  return true;
}

TEST(PerTypeConfigTest,
     PrintConfigShowsEffectiveValuesAndSourcesAndRoundTrips) {
  Options options;
  ASSERT_TRUE(Parse(kTypesText, &options).ok());
  std::string text = DescribeOptions(options);
  EXPECT_THAT(text, HasSubstr("[retry]\n"));
  EXPECT_THAT(text, HasSubstr("# Source: the config (file or --set).\n"
                              "attempts = 5\n"));
  EXPECT_THAT(text, HasSubstr("# Source: the built-in default.\n"
                              "max_ms = 3600000\n"));
  EXPECT_THAT(text, HasSubstr("jitter = 0.0\n"));
  EXPECT_THAT(text, HasSubstr("[types.\"email\"]\n# What handlers of this "
                              "type get for each HandlerOptions field their "
                              "code\n# leaves unset; a field set in code "
                              "wins.\nconcurrency = 3\ntimeout_ms = 1500\n"
                              "gates = [\"smtp\", \"dns\"]\n"));
  EXPECT_THAT(text, HasSubstr("[types.\"email\".rate_limit]\ncount = 10\n"
                              "period_ms = 60000\n"));
  // The effective retry policy: the table's own fields as keys, the rest
  // shown with where they come from.
  EXPECT_THAT(text, HasSubstr("[types.\"email\".retry]\n"
                              "# policy = \"fixed\"  (from [retry])\n"
                              "attempts = 7\n"
                              "# base_ms = 2000  (from [retry])\n"));
  EXPECT_THAT(text, HasSubstr("[types.\"http.post\"]\n"));
  EXPECT_THAT(text, HasSubstr("# concurrency: not set here; default 0 (no "
                              "limit)\n"));
  EXPECT_THAT(text, HasSubstr("jitter = 0.25\n"));
  EXPECT_THAT(text, HasSubstr("[groups.\"customer-42\"]\n"));

  Options again;
  Status s = ParseOptions(text, "<describe>", {}, &again);
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << text;
  EXPECT_TRUE(SameRetry(again.default_retry, options.default_retry));
  EXPECT_TRUE(SameTypes(again.types, options.types)) << text;
  EXPECT_EQ(again.group_limits, options.group_limits);
  EXPECT_EQ(DescribeOptions(again), text);
}

// --print-config names each value's source: the file's line, --set (which
// wins over the file), or the default; and still parses back.
TEST(PerTypeConfigTest, PrintConfigNamesTheFileLineOrTheOverride) {
  const std::string text = std::string(kTypesText) +
                           "\n[runtime]\nworkers = 8\n"
                           "[writer]\nmax_batch = 64\n";
  const std::vector<std::string> overrides = {
      "writer.max_batch=32", "types.email.concurrency=4", "retry.jitter=0.5"};
  Options options = DocumentedDefaults();
  Status parsed = ParseOptions(text, "q.toml", overrides, &options);
  ASSERT_TRUE(parsed.ok()) << parsed.ToString();
  ConfigSources sources;
  ASSERT_TRUE(FindConfigSources(text, "q.toml", overrides, &sources).ok());
  EXPECT_EQ(sources.Of("runtime.workers"), "q.toml:29");
  EXPECT_EQ(sources.Of("writer.max_batch"), "--set");
  EXPECT_EQ(sources.Of("runtime.readers"), "default");
  EXPECT_EQ(sources.Of("types.email.rate_limit.count"), "q.toml:13");
  EXPECT_EQ(sources.Of("types.http.post.retry.jitter"), "q.toml:20");

  std::string described = DescribeOptions(options, sources);
  EXPECT_THAT(described, HasSubstr("# Source: q.toml:29.\nworkers = 8\n"));
  EXPECT_THAT(described, HasSubstr("# Source: --set.\nmax_batch = 32\n"));
  EXPECT_THAT(described, HasSubstr("# Source: default.\nreaders = "));
  EXPECT_THAT(described, HasSubstr("# Source: q.toml:4.\nattempts = 5\n"));
  EXPECT_THAT(described, HasSubstr("# Source: --set.\njitter = 0.5\n"));
  EXPECT_THAT(described,
              HasSubstr("# Source: the built-in default.\nmax_ms = 3600000\n"));
  EXPECT_THAT(described, HasSubstr("concurrency = 4  # Source: --set\n"
                                   "timeout_ms = 1500  # Source: q.toml:9\n"));
  EXPECT_THAT(described, HasSubstr("count = 10  # Source: q.toml:13\n"));
  EXPECT_THAT(described, HasSubstr("attempts = 7  # Source: q.toml:17\n"));
  EXPECT_THAT(described, HasSubstr("concurrency = 1  # Source: q.toml:23\n"));

  Options again;
  Status s = ParseOptions(described, "<describe>", {}, &again);
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << described;
  EXPECT_TRUE(SameTypes(again.types, options.types)) << described;
  EXPECT_EQ(again.workers, 8u);
  EXPECT_EQ(again.writer_max_batch, 32u);

  EXPECT_TRUE(FindConfigSources("[runtime\n", "bad.toml", {}, &sources)
                  .IsInvalidArgument());
  EXPECT_EQ(sources.Of("runtime.workers"), "q.toml:29") << "unchanged";
}

}  // namespace
}  // namespace spool
