#include "server/etcd_client.h"

#include <curl/curl.h>
#include <nlohmann/json.hpp>
#include <utility>

#include "server/base64.h"
#include "server/curl_defaults.h"

namespace spool::http {
namespace {

using nlohmann::json;

// etcd's answers here are a header and a few keys; a bigger body is not
// etcd's answer to these requests.
constexpr size_t kMaxReplyBytes = 1 << 20;
constexpr size_t kMaxEndpoints = 16;

struct Reply {
  long code = 0;
  std::string body;
  bool too_big = false;
};

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* reply = static_cast<Reply*>(user);
  size_t n = size * count;
  if (reply->body.size() + n > kMaxReplyBytes) {
    reply->too_big = true;
    return 0;  // aborts the transfer
  }
  reply->body.append(data, n);
  return n;
}

// etcd's JSON gateway writes 64-bit integers as strings and leaves out
// fields that are zero.
int64_t Int(const json& object, const char* field) {
  auto it = object.find(field);
  if (it == object.end()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (!it->is_string()) return 0;
  try {
    return std::stoll(it->get<std::string>());
  } catch (const std::exception&) {
    return 0;
  }
}

std::string Text(const json& object, const char* field) {
  auto it = object.find(field);
  if (it == object.end() || !it->is_string()) return std::string();
  std::string bytes;
  if (!DecodeBase64(it->get<std::string>(), &bytes)) return std::string();
  return bytes;
}

EtcdKeyValue KeyValueOf(const json& kv) {
  EtcdKeyValue out;
  out.key = Text(kv, "key");
  out.value = Text(kv, "value");
  out.create_revision = Int(kv, "create_revision");
  out.mod_revision = Int(kv, "mod_revision");
  out.lease = Int(kv, "lease");
  return out;
}

Status CheckEndpoint(const std::string& endpoint) {
  bool http = endpoint.rfind("http://", 0) == 0;
  bool https = endpoint.rfind("https://", 0) == 0;
  size_t host = http ? 7 : 8;
  if ((!http && !https) || endpoint.size() <= host ||
      endpoint.find_first_of("?#@ \r\n", host) != std::string::npos) {
    return Status::InvalidArgument(
        "EtcdOptions::endpoints: expected \"http://HOST:PORT\" or "
        "\"https://HOST:PORT\" (no user, query or fragment), got \"" +
        endpoint + "\"");
  }
  return Status::OK();
}

}  // namespace

struct EtcdClient::Impl {
  EtcdOptions options;
  size_t current = 0;  // the endpoint that answered last
  CURL* curl = nullptr;

  ~Impl() {
    if (curl != nullptr) curl_easy_cleanup(curl);
  }

  // One POST of `body` to `endpoint` + `path`. An error names the endpoint.
  Status PostTo(const std::string& endpoint, const std::string& path,
                const std::string& body, Reply* reply) {
    if (curl == nullptr) curl = curl_easy_init();
    if (curl == nullptr) return Status::IOError("curl_easy_init failed");
    curl_easy_reset(curl);
    std::string url = endpoint + path;
    curl_slist* headers =
        curl_slist_append(nullptr, "Content-Type: application/json");
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE,
                     static_cast<long>(body.size()));
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    // etcd is named in the config, never reached through the environment.
    ApplyCurlDefaults(curl, options.request_timeout, options.ca_file);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, reply);
    CURLcode code = curl_easy_perform(curl);
    curl_slist_free_all(headers);
    if (reply->too_big) {
      return Status::IOError("etcd at " + endpoint + ": the answer to " + path +
                             " is over " + std::to_string(kMaxReplyBytes) +
                             " bytes");
    }
    if (code != CURLE_OK) {
      return Status::IOError("etcd at " + endpoint + ": " + path + ": " +
                             curl_easy_strerror(code));
    }
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &reply->code);
    return Status::OK();
  }

  // POSTs `request` to the endpoints in turn, from the one that answered
  // last, and parses the answer into *answer. An etcd error (a non-2xx
  // answer) is not retried elsewhere: another member would say the same.
  Status Post(const std::string& path, const json& request, json* answer) {
    std::string body = request.dump();
    std::string errors;
    for (size_t tried = 0; tried < options.endpoints.size(); ++tried) {
      size_t index = (current + tried) % options.endpoints.size();
      const std::string& endpoint = options.endpoints[index];
      Reply reply;
      Status s = PostTo(endpoint, path, body, &reply);
      if (!s.ok()) {
        errors += (errors.empty() ? "" : "; ") + s.message();
        continue;
      }
      current = index;
      *answer = json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
      if (answer->is_discarded() || !answer->is_object()) {
        return Status::IOError("etcd at " + endpoint + ": " + path +
                               " answered " + std::to_string(reply.code) +
                               " with a body that is not a JSON object");
      }
      if (reply.code < 200 || reply.code > 299) {
        std::string message = answer->value("message", std::string());
        if (message.empty()) message = answer->value("error", std::string());
        return Status::IOError("etcd at " + endpoint + ": " + path +
                               " answered " + std::to_string(reply.code) +
                               ": " + message);
      }
      return Status::OK();
    }
    return Status::IOError("no etcd endpoint answered: " + errors);
  }
};

Status EtcdClient::Create(EtcdOptions options,
                          std::unique_ptr<EtcdClient>* client) {
  if (client == nullptr) return Status::InvalidArgument("client is null");
  if (options.endpoints.empty() || options.endpoints.size() > kMaxEndpoints) {
    return Status::InvalidArgument(
        "EtcdOptions::endpoints: give 1 to " + std::to_string(kMaxEndpoints) +
        " etcd client URLs, got " + std::to_string(options.endpoints.size()));
  }
  for (const std::string& endpoint : options.endpoints) {
    if (Status s = CheckEndpoint(endpoint); !s.ok()) return s;
  }
  auto timeout = options.request_timeout.count();
  if (timeout < 10 || timeout > 60000) {
    return Status::InvalidArgument(
        "EtcdOptions::request_timeout must be in [10 ms, 60000 ms], got " +
        std::to_string(timeout) + " ms");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  client->reset(new EtcdClient(std::move(impl)));
  return Status::OK();
}

EtcdClient::EtcdClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EtcdClient::~EtcdClient() = default;

const std::string& EtcdClient::endpoint() const {
  return impl_->options.endpoints[impl_->current];
}

Status EtcdClient::GrantLease(std::chrono::milliseconds ttl, int64_t* lease,
                              std::chrono::seconds* granted) {
  if (ttl.count() <= 0 || ttl > std::chrono::hours(24)) {
    return Status::InvalidArgument(
        "GrantLease: the TTL must be in (0, 24 h], got " +
        std::to_string(ttl.count()) + " ms");
  }
  int64_t seconds = (ttl.count() + 999) / 1000;
  json answer;
  Status s = impl_->Post("/v3/lease/grant", {{"TTL", std::to_string(seconds)}},
                         &answer);
  if (!s.ok()) return s;
  *lease = Int(answer, "ID");
  *granted = std::chrono::seconds(Int(answer, "TTL"));
  if (*lease == 0) {
    return Status::IOError("etcd granted no lease: " +
                           answer.value("error", std::string("no ID")));
  }
  return Status::OK();
}

Status EtcdClient::KeepAlive(int64_t lease, std::chrono::seconds* ttl_left) {
  json answer;
  Status s = impl_->Post("/v3/lease/keepalive", {{"ID", std::to_string(lease)}},
                         &answer);
  if (!s.ok()) return s;
  // A stream in gRPC: the gateway wraps each of its messages in "result".
  const json& result = answer.contains("result") ? answer["result"] : answer;
  int64_t ttl = Int(result, "TTL");
  if (ttl <= 0) {
    return Status::NotFound("etcd lease " + std::to_string(lease) +
                            " has expired or was revoked");
  }
  *ttl_left = std::chrono::seconds(ttl);
  return Status::OK();
}

Status EtcdClient::RevokeLease(int64_t lease) {
  json answer;
  Status s =
      impl_->Post("/v3/lease/revoke", {{"ID", std::to_string(lease)}}, &answer);
  // An expired lease is as revoked as can be.
  if (!s.ok() &&
      s.message().find("requested lease not found") != std::string::npos) {
    return Status::OK();
  }
  return s;
}

Status EtcdClient::Campaign(const std::string& key, const std::string& value,
                            int64_t lease, EtcdCampaign* result) {
  std::string k = EncodeBase64(key);
  json request = {{"compare",
                   {{{"key", k},
                     {"result", "EQUAL"},
                     {"target", "CREATE"},
                     {"create_revision", "0"}}}},
                  {"success",
                   {{{"request_put",
                      {{"key", k},
                       {"value", EncodeBase64(value)},
                       {"lease", std::to_string(lease)}}}}}},
                  {"failure", {{{"request_range", {{"key", k}}}}}}};
  json answer;
  Status s = impl_->Post("/v3/kv/txn", request, &answer);
  if (!s.ok()) return s;
  *result = EtcdCampaign();
  result->won = answer.value("succeeded", false);
  if (result->won) {
    // The put's revision is the key's create_revision.
    int64_t revision =
        answer.contains("header") ? Int(answer["header"], "revision") : 0;
    result->holder = {key, value, revision, revision, lease};
    return Status::OK();
  }
  const json* kvs = nullptr;
  if (answer.contains("responses") && answer["responses"].is_array() &&
      !answer["responses"].empty()) {
    const json& range = answer["responses"][0];
    if (range.contains("response_range") &&
        range["response_range"].contains("kvs")) {
      kvs = &range["response_range"]["kvs"];
    }
  }
  if (kvs == nullptr || !kvs->is_array() || kvs->empty()) {
    // Deleted between the compare and the read cannot happen in one
    // transaction; an answer without the key is not etcd's.
    return Status::IOError("etcd's campaign answer for " + key +
                           " lost and names no holder");
  }
  result->holder = KeyValueOf((*kvs)[0]);
  return Status::OK();
}

Status EtcdClient::Get(const std::string& key,
                       std::optional<EtcdKeyValue>* kv) {
  json answer;
  Status s = impl_->Post("/v3/kv/range", {{"key", EncodeBase64(key)}}, &answer);
  if (!s.ok()) return s;
  kv->reset();
  auto kvs = answer.find("kvs");
  if (kvs != answer.end() && kvs->is_array() && !kvs->empty()) {
    *kv = KeyValueOf((*kvs)[0]);
  }
  return Status::OK();
}

Status EtcdClient::Put(const std::string& key, const std::string& value,
                       int64_t lease) {
  json request = {{"key", EncodeBase64(key)}, {"value", EncodeBase64(value)}};
  if (lease != 0) request["lease"] = std::to_string(lease);
  json answer;
  return impl_->Post("/v3/kv/put", request, &answer);
}

Status EtcdClient::List(const std::string& prefix,
                        std::vector<EtcdKeyValue>* kvs) {
  kvs->clear();
  if (prefix.empty()) {
    return Status::InvalidArgument("EtcdClient::List: the prefix is empty");
  }
  // etcd's range end for a prefix: the prefix with its last byte + 1.
  std::string end = prefix;
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) {
    end.pop_back();
  }
  if (end.empty())
    end.assign(1, '\0');  // every key from the prefix on
  else
    end.back() = static_cast<char>(end.back() + 1);
  json answer;
  Status s = impl_->Post("/v3/kv/range",
                         {{"key", EncodeBase64(prefix)},
                          {"range_end", EncodeBase64(end)},
                          {"limit", "1000"}},
                         &answer);
  if (!s.ok()) return s;
  auto found = answer.find("kvs");
  if (found == answer.end() || !found->is_array()) return Status::OK();
  for (const json& kv : *found) kvs->push_back(KeyValueOf(kv));
  return Status::OK();
}

Status EtcdClient::Resign(const std::string& key, int64_t epoch,
                          bool* deleted) {
  std::string k = EncodeBase64(key);
  json request = {{"compare",
                   {{{"key", k},
                     {"result", "EQUAL"},
                     {"target", "CREATE"},
                     {"create_revision", std::to_string(epoch)}}}},
                  {"success", {{{"request_delete_range", {{"key", k}}}}}}};
  json answer;
  Status s = impl_->Post("/v3/kv/txn", request, &answer);
  if (!s.ok()) return s;
  *deleted = answer.value("succeeded", false);
  return Status::OK();
}

}  // namespace spool::http
