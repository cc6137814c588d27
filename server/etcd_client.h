// A small client of etcd 3.4's v3 API in its JSON form (the gRPC gateway at
// /v3/..., docs: etcd.io "gRPC gateway"), over libcurl: the leases, the
// leader key and the reads that spoold's failover builds on (issue 28,
// step 3; docs/replication.md). Election and fencing stay etcd's: this
// only speaks its protocol.
//
// Blocking, with every request bounded by EtcdOptions::request_timeout:
// call it from a thread of its own, never from an I/O or CAF thread. One
// client is not thread-safe (it keeps one curl handle, so requests reuse
// one keep-alive connection); give each thread its own.

#ifndef SPOOL_SERVER_ETCD_CLIENT_H_
#define SPOOL_SERVER_ETCD_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <spool/status.h>

namespace spool::http {

struct EtcdOptions {
  // etcd's client URLs, "http://HOST:PORT" or "https://HOST:PORT"; tried in
  // order from the last one that answered. At least one, at most 16.
  std::vector<std::string> endpoints;
  // The longest one request may take, connection included: [10 ms, 60 s].
  std::chrono::milliseconds request_timeout{1000};
  // With https endpoints: the CA that signed etcd's certificate (PEM);
  // empty means the system's CAs.
  std::string ca_file;
};

// One key as etcd holds it.
struct EtcdKeyValue {
  std::string key;
  std::string value;
  // The revision that created the key: for the leader key, the leader's
  // epoch (it grows with every new leader, so it fences the old one).
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  // The lease the key lives under; 0 for none.
  int64_t lease = 0;
};

// What a campaign for a leader key found.
struct EtcdCampaign {
  // True when this campaign put the key: the caller leads, with epoch
  // holder.create_revision.
  bool won = false;
  // The key's holder: the caller when it won, else whoever leads.
  EtcdKeyValue holder;
};

class EtcdClient {
 public:
  // Checks `options` (InvalidArgument naming the field) and makes a
  // client. No request is sent.
  static Status Create(EtcdOptions options,
                       std::unique_ptr<EtcdClient>* client);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // Grants a lease of `ttl` (whole seconds, rounded up; etcd may raise it
  // to its minimum) and sets *lease to its id and *granted to its TTL.
  Status GrantLease(std::chrono::milliseconds ttl, int64_t* lease,
                    std::chrono::seconds* granted);

  // Renews `lease` once; *ttl_left is its TTL after the renewal. NotFound
  // when the lease has expired or was revoked: whatever lived under it is
  // gone, and a leader that held a key under it no longer leads.
  Status KeepAlive(int64_t lease, std::chrono::seconds* ttl_left);

  // Revokes `lease`, deleting every key under it. OK if it had expired.
  Status RevokeLease(int64_t lease);

  // In one transaction: puts `key` = `value` under `lease` if the key does
  // not exist, else reads who holds it. *result says which.
  Status Campaign(const std::string& key, const std::string& value,
                  int64_t lease, EtcdCampaign* result);

  // Reads `key`; *kv is empty when it does not exist.
  Status Get(const std::string& key, std::optional<EtcdKeyValue>* kv);

  // Puts `key` = `value` under `lease` (0: none).
  Status Put(const std::string& key, const std::string& value, int64_t lease);

  // Reads every key that starts with `prefix` (not empty), in key order;
  // at most 1,000 of them.
  Status List(const std::string& prefix, std::vector<EtcdKeyValue>* kvs);

  // Deletes `key` only if its create_revision is still `epoch`: a leader
  // steps down without deleting the key of a leader after it. *deleted
  // says whether it did.
  Status Resign(const std::string& key, int64_t epoch, bool* deleted);

  // The endpoint that answered last.
  const std::string& endpoint() const;

 private:
  struct Impl;
  explicit EtcdClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace spool::http

#endif  // SPOOL_SERVER_ETCD_CLIENT_H_
