#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>

#include <spool/config.h>
#include <spool/http/spoold_config.h>

#include <toml++/toml.h>

namespace spool::http {
namespace {

// A value from the file or from an override, before it is checked.
struct RawValue {
  const toml::node* node = nullptr;  // from the file
  std::optional<std::string> text;   // from an override
};

enum class Kind { kInteger, kString, kBool, kStringList };

struct Key {
  std::string name;
  Kind kind;
  int64_t min = 0;
  int64_t max = 0;
  // Sets the checked value on the target struct.
  std::function<void(void* target, int64_t, const std::string&, bool,
                     const std::vector<std::string>&)>
      set;
  std::function<std::string(const void* target)> render;
};

std::string Quote(std::string_view text) {
  std::ostringstream out;
  out << toml::value<std::string>(std::string(text));
  return out.str();
}

template <class T, class Field>
Key IntKey(std::string name, Field T::*field, int64_t min, int64_t max) {
  Key key{std::move(name), Kind::kInteger, min, max, nullptr, nullptr};
  key.set = [field](void* target, int64_t v, const std::string&, bool,
                    const std::vector<std::string>&) {
    static_cast<T*>(target)->*field = static_cast<Field>(v);
  };
  key.render = [field](const void* target) {
    return std::to_string(static_cast<const T*>(target)->*field);
  };
  return key;
}

template <class T>
Key MsKey(std::string name, std::chrono::milliseconds T::*field, int64_t min,
          int64_t max) {
  Key key{std::move(name), Kind::kInteger, min, max, nullptr, nullptr};
  key.set = [field](void* target, int64_t v, const std::string&, bool,
                    const std::vector<std::string>&) {
    static_cast<T*>(target)->*field = std::chrono::milliseconds(v);
  };
  key.render = [field](const void* target) {
    return std::to_string((static_cast<const T*>(target)->*field).count());
  };
  return key;
}

template <class T>
Key StrKey(std::string name, std::string T::*field) {
  Key key{std::move(name), Kind::kString, 0, 0, nullptr, nullptr};
  key.set = [field](void* target, int64_t, const std::string& v, bool,
                    const std::vector<std::string>&) {
    static_cast<T*>(target)->*field = v;
  };
  key.render = [field](const void* target) {
    return Quote(static_cast<const T*>(target)->*field);
  };
  return key;
}

template <class T>
Key BoolKey(std::string name, bool T::*field) {
  Key key{std::move(name), Kind::kBool, 0, 0, nullptr, nullptr};
  key.set = [field](void* target, int64_t, const std::string&, bool v,
                    const std::vector<std::string>&) {
    static_cast<T*>(target)->*field = v;
  };
  key.render = [field](const void* target) {
    return std::string(static_cast<const T*>(target)->*field ? "true"
                                                             : "false");
  };
  return key;
}

template <class T>
Key StrListKey(std::string name, std::vector<std::string> T::*field) {
  Key key{std::move(name), Kind::kStringList, 0, 0, nullptr, nullptr};
  key.set = [field](void* target, int64_t, const std::string&, bool,
                    const std::vector<std::string>& list) {
    static_cast<T*>(target)->*field = list;
  };
  key.render = [field](const void* target) {
    std::string out = "[";
    for (const std::string& item : static_cast<const T*>(target)->*field) {
      if (out.size() > 1) out += ", ";
      out += Quote(item);
    }
    return out + "]";
  };
  return key;
}

const std::vector<Key>& ServerKeys() {
  static const auto* const keys = new std::vector<Key>{
      StrKey("listen", &ServerOptions::listen),
      IntKey("threads", &ServerOptions::threads, 1, 64),
      StrKey("token_file", &ServerOptions::token_file),
      StrKey("read_token_file", &ServerOptions::read_token_file),
      StrListKey("allowed_hosts", &ServerOptions::allowed_hosts),
      StrKey("tls_certificate_file", &ServerOptions::tls_certificate_file),
      StrKey("tls_key_file", &ServerOptions::tls_key_file),
      StrKey("tls_client_ca_file", &ServerOptions::tls_client_ca_file),
      BoolKey("allow_insecure", &ServerOptions::allow_insecure),
      IntKey("max_body_bytes", &ServerOptions::max_body_bytes, 1,
             int64_t{1} << 30),
      IntKey("max_connections", &ServerOptions::max_connections, 1, 1'000'000),
      IntKey("max_connections_per_address",
             &ServerOptions::max_connections_per_address, 1, 1'000'000),
      IntKey("max_event_streams", &ServerOptions::max_event_streams, 1,
             1'000'000),
      IntKey("max_live_listings", &ServerOptions::max_live_listings, 0,
             1'000'000),
      MsKey("sse_max_duration_ms", &ServerOptions::sse_max_duration, 1000,
            604'800'000),
      MsKey("header_timeout_ms", &ServerOptions::header_timeout, 1, 86'400'000),
      MsKey("body_timeout_ms", &ServerOptions::body_timeout, 1, 86'400'000),
      MsKey("write_timeout_ms", &ServerOptions::write_timeout, 1, 86'400'000),
      MsKey("sse_keepalive_ms", &ServerOptions::sse_keepalive, 1, 86'400'000),
      IntKey("sse_replay_events", &ServerOptions::sse_replay_events, 0,
             1'000'000),
      IntKey("sse_max_queued_bytes", &ServerOptions::sse_max_queued_bytes, 4096,
             int64_t{1} << 30),
      MsKey("stop_timeout_ms", &ServerOptions::stop_timeout, 0, 86'400'000),
  };
  return *keys;
}

// [cluster], on ClusterOptions (spool/http/cluster.h).
const std::vector<Key>& ClusterKeys() {
  static const auto* const keys = new std::vector<Key>{
      StrListKey("etcd", &ClusterOptions::etcd),
      StrKey("etcd_ca_file", &ClusterOptions::etcd_ca_file),
      StrKey("name", &ClusterOptions::name),
      StrListKey("nodes", &ClusterOptions::nodes),
      StrKey("advertise", &ClusterOptions::advertise),
      MsKey("lease_ms", &ClusterOptions::lease, 1000, 60000),
      StrKey("prefix", &ClusterOptions::prefix),
  };
  return *keys;
}

// Keys every [handlers.NAME] table takes, on HandlerSettings.
const std::vector<Key>& HandlerKeys() {
  static const auto* const keys = [] {
    auto* v = new std::vector<Key>;
    v->push_back(BoolKey("enabled", &HandlerSettings::enabled));
    Key attempts{"max_attempts", Kind::kInteger, 1,
                 1'000'000,      nullptr,        nullptr};
    attempts.set = [](void* t, int64_t i, const std::string&, bool,
                      const std::vector<std::string>&) {
      static_cast<HandlerSettings*>(t)->max_attempts = static_cast<uint32_t>(i);
    };
    attempts.render = [](const void* t) {
      const auto& s = *static_cast<const HandlerSettings*>(t);
      return std::to_string(
          s.max_attempts.value_or(RetryPolicy{}.max_attempts));
    };
    v->push_back(attempts);
    v->push_back(
        IntKey("max_concurrent", &HandlerSettings::max_concurrent, 0, 4096));
    v->push_back(MsKey("timeout_ms", &HandlerSettings::timeout, 0, 86'400'000));
    return v;
  }();
  return *keys;
}

// The extra keys of [handlers."http.post"], on HttpPostOptions.
const std::vector<Key>& HttpPostKeys() {
  static const auto* const keys = [] {
    auto* v = new std::vector<Key>;
    v->push_back(StrListKey("allow", &HttpPostOptions::allow));
    v->push_back(StrKey("url", &HttpPostOptions::url));
    v->push_back(StrKey("content_type", &HttpPostOptions::content_type));
    v->push_back(MsKey("connect_timeout_ms", &HttpPostOptions::connect_timeout,
                       1, 86'400'000));
    v->push_back(IntKey("error_body_bytes", &HttpPostOptions::error_body_bytes,
                        0, 65536));
    v->push_back(IntKey("max_response_bytes",
                        &HttpPostOptions::max_response_bytes, 1,
                        int64_t{1} << 30));
    v->push_back(StrKey("proxy", &HttpPostOptions::proxy));
    v->push_back(IntKey("host_rate_limit", &HttpPostOptions::host_rate_limit, 0,
                        1'000'000));
    v->push_back(MsKey("host_rate_period_ms",
                       &HttpPostOptions::host_rate_period, 1, 86'400'000));
    v->push_back(MsKey("max_retry_after_ms", &HttpPostOptions::max_retry_after,
                       0, 86'400'000));
    return v;
  }();
  return *keys;
}

std::string Names(const std::vector<Key>& keys,
                  const std::vector<Key>* more = nullptr) {
  std::string out;
  for (const auto* list : {&keys, more}) {
    if (list == nullptr) continue;
    for (const Key& k : *list) out += (out.empty() ? "" : ", ") + k.name;
  }
  return out;
}

Status Error(std::string_view source, const std::string& subject,
             const std::string& reason, uint32_t line) {
  std::string message = std::string(source) + ": " + subject + ": " + reason;
  if (line > 0) message += " (line " + std::to_string(line) + ")";
  return Status::InvalidArgument(message);
}

std::string Describe(const toml::node& node) {
  std::ostringstream out;
  if (node.is_table()) return "a table";
  if (node.is_array()) return "an array";
  node.visit([&out](const auto& v) { out << v; });
  return out.str();
}

// Checks `raw` against `key` and sets it on `target`.
Status Apply(const Key& key, const RawValue& raw, void* target,
             std::string_view source, const std::string& subject,
             uint32_t line) {
  int64_t integer = 0;
  std::string text;
  bool flag = false;
  std::vector<std::string> list;
  auto got = [&]() {
    return raw.node ? Describe(*raw.node) : Quote(raw.text.value_or(""));
  };
  switch (key.kind) {
    case Kind::kInteger: {
      bool ok = false;
      if (raw.node) {
        if (const auto* v = raw.node->as_integer()) {
          integer = v->get();
          ok = true;
        }
      } else {
        std::string t;
        for (char c : *raw.text) {
          if (c != '_') t += c;
        }
        char* end = nullptr;
        errno = 0;
        long long v = std::strtoll(t.c_str(), &end, 10);
        ok = !t.empty() && end == t.c_str() + t.size() && errno == 0;
        integer = v;
      }
      if (!ok || integer < key.min || integer > key.max) {
        return Error(source, subject,
                     "expected an integer in [" + std::to_string(key.min) +
                         ", " + std::to_string(key.max) + "], got " + got(),
                     line);
      }
      break;
    }
    case Kind::kString:
      if (raw.node) {
        const auto* v = raw.node->as_string();
        if (v == nullptr)
          return Error(source, subject, "expected a string, got " + got(),
                       line);
        text = v->get();
      } else {
        text = *raw.text;
      }
      break;
    case Kind::kBool:
      if (raw.node) {
        const auto* v = raw.node->as_boolean();
        if (v == nullptr)
          return Error(source, subject, "expected true or false, got " + got(),
                       line);
        flag = v->get();
      } else if (*raw.text == "true" || *raw.text == "false") {
        flag = *raw.text == "true";
      } else {
        return Error(source, subject, "expected true or false, got " + got(),
                     line);
      }
      break;
    case Kind::kStringList:
      if (raw.node) {
        const auto* array = raw.node->as_array();
        if (array == nullptr) {
          return Error(source, subject,
                       "expected an array of strings, got " + got(), line);
        }
        for (const toml::node& item : *array) {
          const auto* s = item.as_string();
          if (s == nullptr) {
            return Error(source, subject,
                         "expected an array of strings, got " + Describe(item),
                         line);
          }
          list.push_back(s->get());
        }
      } else {
        std::string_view rest = *raw.text;
        while (!rest.empty()) {
          size_t comma = rest.find(',');
          list.emplace_back(rest.substr(0, comma));
          rest = comma == std::string_view::npos ? std::string_view()
                                                 : rest.substr(comma + 1);
        }
      }
      break;
  }
  key.set(target, integer, text, flag, list);
  return Status::OK();
}

const Key* Find(const std::vector<Key>& keys, std::string_view name) {
  for (const Key& k : keys) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

// The settings a handler name selects; null for an unknown handler.
HandlerSettings* SettingsOf(BuiltinHandlersOptions* handlers,
                            std::string_view name) {
  if (name == kNoopHandler) return &handlers->noop;
  if (name == kSleepHandler) return &handlers->sleep;
  if (name == kHttpPostHandler) return &handlers->http_post;
  return nullptr;
}

const char* kHandlerList = "noop, sleep and http.post";

// Sets handlers.NAME.FIELD.
Status ApplyHandlerKey(BuiltinHandlersOptions* handlers, std::string_view name,
                       std::string_view field, const RawValue& raw,
                       std::string_view source, uint32_t line) {
  std::string subject = "handlers." + std::string(name);
  if (name.find('.') != std::string_view::npos)
    subject = "handlers.\"" + std::string(name) + "\"";
  HandlerSettings* settings = SettingsOf(handlers, name);
  if (settings == nullptr) {
    return Error(source, subject,
                 std::string("unknown handler; the built-in handlers are ") +
                     kHandlerList,
                 line);
  }
  subject += "." + std::string(field);
  if (const Key* key = Find(HandlerKeys(), field)) {
    return Apply(*key, raw, settings, source, subject, line);
  }
  if (name == kHttpPostHandler) {
    if (const Key* key = Find(HttpPostKeys(), field)) {
      if (Status s = Apply(*key, raw, &handlers->http_post_options, source,
                           subject, line);
          !s.ok()) {
        return s;
      }
      // What the handler would refuse at start (a pattern that matches
      // nothing, a control byte in a header value, a proxy libcurl cannot
      // use), refused here with the line: every value before this one was
      // fine, so the error is this key's.
      Status usable = ValidateHttpPostOptions(handlers->http_post_options);
      if (usable.ok()) return usable;
      std::string message = std::string(source) + ": " + usable.message();
      if (line > 0) message += " (line " + std::to_string(line) + ")";
      return Status::InvalidArgument(message);
    }
  }
  const std::vector<Key>* more =
      name == kHttpPostHandler ? &HttpPostKeys() : nullptr;
  return Error(source, subject,
               "unknown key; a [" + subject.substr(0, subject.rfind('.')) +
                   "] table takes " + Names(HandlerKeys(), more),
               line);
}

uint32_t LineOf(const toml::node& node) { return node.source().begin.line; }

Status ParseTomlText(std::string_view text, std::string_view source,
                     toml::table* root) {
#if TOML_EXCEPTIONS
  try {
    *root = toml::parse(text, source);
  } catch (const toml::parse_error& error) {
    return Status::InvalidArgument(
        std::string(source) +
        ": syntax error: " + std::string(error.description()) + " (line " +
        std::to_string(error.source().begin.line) + ")");
  }
#else
  toml::parse_result result = toml::parse(text, source);
  if (!result) {
    return Status::InvalidArgument(
        std::string(source) +
        ": syntax error: " + std::string(result.error().description()) +
        " (line " + std::to_string(result.error().source().begin.line) + ")");
  }
  *root = std::move(result).table();
#endif
  return Status::OK();
}

// The keys of table [`section`] of `root`, if present, onto *target.
template <class T>
Status ApplySection(const toml::table& root, const std::string& section,
                    const std::vector<Key>& keys, T* target,
                    std::string_view source) {
  const toml::node* node = root.get(section);
  if (node == nullptr) return Status::OK();
  const toml::table* table = node->as_table();
  if (table == nullptr) {
    return Error(source, section, "expected a table [" + section + "]",
                 LineOf(*node));
  }
  for (const auto& [key, value] : *table) {
    std::string subject = section + "." + std::string(key.str());
    uint32_t line = key.source().begin.line;
    const Key* spec = Find(keys, key.str());
    if (spec == nullptr) {
      return Error(source, subject,
                   "unknown key; [" + section + "] has " + Names(keys), line);
    }
    RawValue raw;
    raw.node = &value;
    if (Status s = Apply(*spec, raw, target, source, subject, line); !s.ok())
      return s;
  }
  return Status::OK();
}

// One --set of `path` ("SECTION.KEY") onto *target.
template <class T>
Status ApplyOverride(const std::vector<Key>& keys, const std::string& section,
                     const std::string& path, const RawValue& raw, T* target) {
  const Key* spec = Find(keys, path.substr(section.size() + 1));
  if (spec == nullptr) {
    return Error("override", path,
                 "unknown key; [" + section + "] has " + Names(keys), 0);
  }
  return Apply(*spec, raw, target, "override", path, 0);
}

}  // namespace

Status ParseSpooldConfig(std::string_view toml_text, std::string_view source,
                         const std::vector<std::string>& overrides,
                         SpooldConfig* config) {
  // The runtime's sections go to spool::ParseOptions, which leaves [server]
  // and [handlers.*] (and their overrides) to us: their lines come back at
  // their line numbers, so our messages name the file's lines.
  SpooldConfig candidate = *config;
  AppSections app;
  app.names = {"server", "cluster", "handlers"};
  if (Status s =
          ParseOptions(toml_text, source, overrides, &candidate.runtime, &app);
      !s.ok()) {
    return s;
  }
  toml::table root;
  if (Status s = ParseTomlText(app.toml_text, source, &root); !s.ok()) return s;
  const std::vector<std::string>& own_overrides = app.overrides;

  if (Status s =
          ApplySection(root, "server", ServerKeys(), &candidate.server, source);
      !s.ok())
    return s;
  if (Status s = ApplySection(root, "cluster", ClusterKeys(),
                              &candidate.cluster, source);
      !s.ok())
    return s;
  // [handlers.NAME]
  if (const toml::node* node = root.get("handlers")) {
    const toml::table* table = node->as_table();
    if (table == nullptr) {
      return Error(source, "handlers", "expected [handlers.NAME] tables",
                   LineOf(*node));
    }
    for (const auto& [name, handler] : *table) {
      const toml::table* fields = handler.as_table();
      if (fields == nullptr) {
        return Error(source, "handlers." + std::string(name.str()),
                     "expected a table", name.source().begin.line);
      }
      if (fields->empty() &&
          SettingsOf(&candidate.handlers, name.str()) == nullptr) {
        return Error(
            source, "handlers." + std::string(name.str()),
            std::string("unknown handler; the built-in handlers are ") +
                kHandlerList,
            name.source().begin.line);
      }
      for (const auto& [field, value] : *fields) {
        RawValue raw;
        raw.node = &value;
        if (Status s =
                ApplyHandlerKey(&candidate.handlers, name.str(), field.str(),
                                raw, source, field.source().begin.line);
            !s.ok()) {
          return s;
        }
      }
    }
  }
  // Overrides of our own keys, in order.
  for (const std::string& o : own_overrides) {
    size_t eq = o.find('=');
    if (eq == std::string::npos) {
      return Status::InvalidArgument("override \"" + o +
                                     "\": expected section.key=value");
    }
    std::string path = o.substr(0, eq);
    RawValue raw;
    raw.text = o.substr(eq + 1);
    if (path.rfind("server.", 0) == 0) {
      if (Status s = ApplyOverride(ServerKeys(), "server", path, raw,
                                   &candidate.server);
          !s.ok())
        return s;
    } else if (path.rfind("cluster.", 0) == 0) {
      if (Status s = ApplyOverride(ClusterKeys(), "cluster", path, raw,
                                   &candidate.cluster);
          !s.ok())
        return s;
    } else {
      std::string rest = path.substr(9);
      size_t dot = rest.rfind('.');
      if (dot == std::string::npos) {
        return Error("override", path, "expected handlers.NAME.KEY=VALUE", 0);
      }
      if (Status s = ApplyHandlerKey(&candidate.handlers, rest.substr(0, dot),
                                     rest.substr(dot + 1), raw, "override", 0);
          !s.ok()) {
        return s;
      }
    }
  }
  if (Status s = candidate.server.Validate(); !s.ok())
    return s.WithContext(source);
  if (Status s = candidate.cluster.Validate(); !s.ok())
    return s.WithContext(source);
  if (Status s =
          FindConfigSources(toml_text, source, overrides, &candidate.sources);
      !s.ok())
    return s;
  *config = std::move(candidate);
  return Status::OK();
}

Status LoadSpooldConfig(const std::string& path,
                        const std::vector<std::string>& overrides,
                        SpooldConfig* config) {
  if (path.empty()) return ParseSpooldConfig("", "--set", overrides, config);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT)
      return Status::NotFound("config file not found: " + path);
    return Status::IOError(path + ": " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return ParseSpooldConfig(text.str(), path, overrides, config);
}

std::string DescribeSpooldConfig(const SpooldConfig& config) {
  std::string out = DescribeOptions(config.runtime, config.sources);
  auto from = [&config](const std::string& key) {
    return "  # Source: " + config.sources.Of(key) + "\n";
  };
  out += "\n[server]\n";
  for (const Key& key : ServerKeys()) {
    out += key.name + " = " + key.render(&config.server) +
           from("server." + key.name);
  }
  out += "\n[cluster]\n";
  for (const Key& key : ClusterKeys()) {
    out += key.name + " = " + key.render(&config.cluster) +
           from("cluster." + key.name);
  }
  auto handler = [&](const char* title, const char* name,
                     const HandlerSettings& settings) {
    out += std::string("\n[handlers.") + title + "]\n";
    for (const Key& key : HandlerKeys()) {
      if (key.name == "max_attempts" && !settings.max_attempts) continue;
      out += key.name + " = " + key.render(&settings) +
             from(std::string("handlers.") + name + "." + key.name);
    }
  };
  handler("noop", "noop", config.handlers.noop);
  handler("sleep", "sleep", config.handlers.sleep);
  handler("\"http.post\"", "http.post", config.handlers.http_post);
  for (const Key& key : HttpPostKeys()) {
    out += key.name + " = " + key.render(&config.handlers.http_post_options) +
           from("handlers.http.post." + key.name);
  }
  return out;
}

}  // namespace spool::http
