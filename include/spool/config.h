// Configuration: TOML files and command-line overrides into spool::Options.
//
// A config file has four sections, [storage], [runtime], [writer] and [log],
// the default retry policy [retry], and tables of named things:
// [types.NAME] (settings per task type), [groups.NAME] (limits per group)
// and [periodic.NAME]; config/spool.toml lists and documents every key. Loading
// is strict: an unknown section or key, a value of the wrong type, an integer
// out of range or an unknown enum name is an error, never silently ignored,
// because a typo in a queue's config should stop it at startup rather than run
// it with a default nobody chose.
//
// Every error is a Status (nothing throws). Messages name the source (file
// path or "override"), the key as section.key, the reason, and the line when
// known, e.g.
//   config/spool.toml: runtime.workers: expected an integer in [1, 4096],
//   got "four" (line 12)
//
// Thread safety: every function here is safe to call concurrently, provided
// no two calls write the same Options or CommandLine object.

#ifndef SPOOL_INCLUDE_CONFIG_H_
#define SPOOL_INCLUDE_CONFIG_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <spool/options.h>
#include <spool/status.h>

namespace spool {

// Reads the TOML file at `path`, then applies `overrides` in order (each a
// "section.key=value" string, see ApplyOverride), then runs
// Options::Validate() on the result.
//
// Keys the file does not set keep the value *options has on entry: pass a
// default-constructed Options to get the documented defaults for them.
//
// On success stores the result in *options and returns OK. On failure
// *options is unchanged and the result is NotFound when the file does not
// exist, IOError when it cannot be read, and InvalidArgument for everything
// else (syntax, unknown keys, bad values, a failed Validate()).
//
// REQUIRES: options != nullptr.
Status LoadOptions(const std::string& path,
                   const std::vector<std::string>& overrides, Options* options);

// Same as LoadOptions, but parses `toml_text` instead of reading a file.
// `source_name` stands for the file in error messages (e.g. its path, or
// "<inline>"). Empty text is a valid config that sets nothing.
//
// REQUIRES: options != nullptr.
Status ParseOptions(std::string_view toml_text, std::string_view source_name,
                    const std::vector<std::string>& overrides,
                    Options* options);

// Sections of the one config file that an embedding application owns, such
// as spoold's [server] and [handlers.NAME]: ParseOptions and LoadOptions
// leave them to it instead of refusing them as unknown.
struct AppSections {
  // In: the top-level names the application owns ("server" covers
  // [server], [server.x] and server.key = ... alike). None may be one of
  // spool's own sections (InvalidArgument otherwise).
  std::vector<std::string> names;

  // Out: the file's text with every line that is not part of an owned
  // section blanked, so that it has the owned tables only and each at its
  // original line number (the application's own TOML parser then reports
  // the file's lines). Empty when the file has none of them.
  std::string toml_text;

  // Out: the overrides whose section is an owned name, in order, as given
  // ("server.listen=..."); the others are applied to the options.
  std::vector<std::string> overrides;
};

// ParseOptions and LoadOptions, with the sections in app->names left to the
// application: they are not checked here, beyond being TOML. On failure
// *options and app's outputs are unchanged.
//
// REQUIRES: options != nullptr, app != nullptr.
Status ParseOptions(std::string_view toml_text, std::string_view source_name,
                    const std::vector<std::string>& overrides, Options* options,
                    AppSections* app);
Status LoadOptions(const std::string& path,
                   const std::vector<std::string>& overrides, Options* options,
                   AppSections* app);

// Sets one key from a "section.key=value" assignment, such as
// "runtime.workers=8" or "storage.path=/var/lib/spool". The value is
// everything after the first '=', taken literally (no quotes needed for
// strings); integers may carry a sign and TOML-style '_' separators. The
// value is checked exactly as a file value for that key would be.
//
// Does not run Options::Validate(): the options may still be incomplete.
// On failure returns InvalidArgument and leaves *options unchanged.
//
// REQUIRES: options != nullptr.
Status ApplyOverride(std::string_view assignment, Options* options);

// Renders `options` as a TOML config, one commented line per key, in the
// order of config/spool.toml (for --print-config). Fields with no config
// key, such as callback_executor, are left out. The output parses back, with
// ParseOptions, to the same values of every configurable field, provided
// options.path and the names in options.types and options.group_limits are
// valid UTF-8 (TOML strings must be).
//
// Where a value comes from is shown for [retry] (the built-in default, or
// the config, for a value that differs from it), and for each
// [types.NAME]: the fields it gives, the default of each it does not, and
// the retry fields it inherits from [retry]. Those are what the type's
// handlers get for each HandlerOptions field their code leaves unset.
std::string DescribeOptions(const Options& options);

// Where each value of a loaded config came from, for --print-config: a line
// of the config file, or a --set override.
struct ConfigSources {
  // Each key a file line or an override sets, spelt as --set spells it
  // ("runtime.workers", "types.email.retry.attempts", "server.listen"), to
  // "FILE:LINE" or "--set". Where both set a key, the override (applied
  // last) is named. A key not here has the value *options had before the
  // load: the documented default, for the executables.
  std::map<std::string, std::string> by_key;

  // The source of `key`: its entry, or "default" when it has none.
  std::string Of(std::string_view key) const;
};

// Fills *sources (replacing what it held) with where each key of the TOML
// text `toml_text` (read from `source_name`) and each assignment of
// `overrides` sets its value. Checks nothing beyond TOML syntax: use it on
// a config that ParseOptions (or LoadOptions) accepted. Keys of the
// sections an application owns are recorded like spool's own.
//
// On a syntax error returns InvalidArgument and leaves *sources unchanged.
// REQUIRES: sources != nullptr.
Status FindConfigSources(std::string_view toml_text,
                         std::string_view source_name,
                         const std::vector<std::string>& overrides,
                         ConfigSources* sources);

// FindConfigSources on the file at `path`; an empty path stands for no
// file (the overrides alone). NotFound or IOError as LoadOptions.
Status LoadConfigSources(const std::string& path,
                         const std::vector<std::string>& overrides,
                         ConfigSources* sources);

// DescribeOptions, with a "# Source: ..." line before every key of spool's
// sections, [retry], [types.NAME] and [groups.NAME] naming where its value
// came from (sources.Of: the file's line, --set, or the default). This is
// what --print-config prints.
std::string DescribeOptions(const Options& options,
                            const ConfigSources& sources);

// What ParseCommandLine found among a spool executable's arguments.
struct CommandLine {
  // The value of --config; empty when it was not given.
  std::string config_path;
  // The values of --set, in command-line order.
  std::vector<std::string> overrides;
  // Every argument ParseCommandLine does not handle, in order: positional
  // arguments, flags the executable defines itself, and everything after
  // "--".
  std::vector<std::string> rest;
  // --help was given.
  bool help = false;
  // --print-config was given.
  bool print_config = false;
};

// Parses the configuration flags shared by spool's executables:
//   --config FILE, --config=FILE   the config file (at most once)
//   --set K=V, --set=K=V           an override, repeatable, applied in order
//   --print-config                 sets print_config
//   --help                         sets help
//   --                             every later argument goes to `rest`
// argv[0] (the program name) is skipped. A flag's value given as the next
// argument must not begin with "--", so "--config --help" is an error rather
// than a config file named "--help". Override syntax is not checked here;
// LoadOptions checks it.
//
// On success fills *out (replacing what it held) and returns OK. On failure
// returns InvalidArgument naming the flag, and *out is unchanged.
//
// REQUIRES: out != nullptr; argv[0..argc) are valid strings.
Status ParseCommandLine(int argc, char** argv, CommandLine* out);

}  // namespace spool

#endif  // SPOOL_INCLUDE_CONFIG_H_
