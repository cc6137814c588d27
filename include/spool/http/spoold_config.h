// SpooldConfig: spoold's whole configuration, from the one TOML file that
// holds the runtime's: the runtime's sections ([storage], [runtime],
// [writer], [log], [periodic.*], read by spool::ParseOptions), [server]
// (ServerOptions) and one [handlers.NAME] table per built-in handler
// (BuiltinHandlersOptions). config/spool.toml documents every key.
//
// Loading is as strict as spool's own: an unknown key or handler, a value
// of the wrong type or out of range is InvalidArgument naming the source,
// the key as section.key and the line, e.g.
//   spoold.toml: server.max_conections: unknown key; [server] has listen,
//   threads, ... (line 4)
// Overrides (--set) take "server.KEY=VALUE" and "handlers.NAME.KEY=VALUE"
// (a list as comma-separated values) besides the runtime's keys.
//
// Thread safety: free functions on values; safe to call concurrently.

#ifndef SPOOL_INCLUDE_HTTP_SPOOLD_CONFIG_H_
#define SPOOL_INCLUDE_HTTP_SPOOLD_CONFIG_H_

#include <string>
#include <string_view>
#include <vector>

#include <spool/config.h>
#include <spool/http/builtin_handlers.h>
#include <spool/http/cluster.h>
#include <spool/http/server_options.h>
#include <spool/options.h>
#include <spool/status.h>

namespace spool::http {

struct SpooldConfig {
  Options runtime;
  ServerOptions server;
  BuiltinHandlersOptions handlers;
  // [cluster]: failover through etcd; off unless cluster.etcd is set.
  ClusterOptions cluster;
  // Where each value came from (a file line, --set), for --print-config;
  // filled by ParseSpooldConfig and LoadSpooldConfig.
  ConfigSources sources;
};

// Parses `toml_text` (named `source` in messages), then applies `overrides`
// in order, into *config, whose values on entry are the defaults of keys
// left out. Validates the runtime's options and the server's. On failure
// *config is unchanged.
// REQUIRES: config != nullptr.
Status ParseSpooldConfig(std::string_view toml_text, std::string_view source,
                         const std::vector<std::string>& overrides,
                         SpooldConfig* config);

// Reads the file at `path` and parses it as ParseSpooldConfig does; an empty
// path parses an empty config (defaults and overrides only). NotFound or
// IOError when the file cannot be read.
// REQUIRES: config != nullptr.
Status LoadSpooldConfig(const std::string& path,
                        const std::vector<std::string>& overrides,
                        SpooldConfig* config);

// `config` as TOML, every key with its value (for --print-config); parses
// back to the same values.
std::string DescribeSpooldConfig(const SpooldConfig& config);

}  // namespace spool::http

#endif  // SPOOL_INCLUDE_HTTP_SPOOLD_CONFIG_H_
