// spool::http::ClusterNode over EtcdClient (include/spool/http/cluster.h;
// docs/replication.md, "Failover", has the protocol and its argument).
//
// The node's thread owns every etcd request. Each member key holds JSON:
//   {"name", "url", "state": "candidate"|"standby"|"primary",
//    "epoch", "position", "log_id"}
// where a candidate's epoch and position are those of its store's last
// commit, published only after spoold said it stopped following (Applied),
// and a standby's or primary's epoch is its leader's. The leader key holds
// {"name", "url"}; its create revision is the epoch.

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

#include <spool/http/cluster.h>
#include <spool/http/log_line.h>

#include "server/etcd_client.h"

namespace spool::http {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;
using namespace std::chrono_literals;

// How often a candidate or a standby reads the leader key: a dead leader's
// key is seen gone within this of etcd deleting it.
constexpr auto kPoll = 50ms;
// Taken off the lease's TTL for the fence: etcd counts the TTL from when
// it received the renewal, after we sent it, and clocks drift a little.
constexpr auto kFenceMargin = 100ms;

bool ValidName(const std::string& name) {
  return !name.empty() && name.size() <= 64 &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '.' ||
                  c == '_' || c == '-';
         });
}

bool ValidUrl(const std::string& url) {
  bool http = url.rfind("http://", 0) == 0;
  bool https = url.rfind("https://", 0) == 0;
  size_t host = http ? 7 : 8;
  return (http || https) && url.size() > host &&
         url.find_first_of("?#@ \r\n\"", host) == std::string::npos;
}

Status Bad(const std::string& key, const std::string& why) {
  return Status::InvalidArgument("cluster." + key + ": " + why);
}

struct Member {
  std::string name;
  std::string url;
  std::string state;
  uint64_t epoch = 0;
  uint64_t position = 0;
};

std::optional<Member> ParseMember(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  Member m;
  m.name = j.value("name", std::string());
  m.url = j.value("url", std::string());
  m.state = j.value("state", std::string());
  m.epoch = j.value("epoch", uint64_t{0});
  m.position = j.value("position", uint64_t{0});
  if (m.name.empty()) return std::nullopt;
  return m;
}

class Node final : public ClusterNode {
 public:
  Node(ClusterOptions options, uint32_t min_acks,
       std::function<ReplicationStatus()> status,
       std::unique_ptr<EtcdClient> etcd)
      : options_(std::move(options)),
        quorum_(static_cast<uint32_t>(options_.nodes.size()) - min_acks),
        status_(std::move(status)),
        etcd_(std::move(etcd)),
        leader_key_(options_.prefix + "/leader"),
        member_key_(options_.prefix + "/members/" + options_.name) {
    thread_ = std::thread([this] { Run(); });
  }

  ~Node() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
    // Handing over at once rather than after the lease's TTL.
    if (role_.kind == ClusterRole::Kind::kPrimary) {
      bool deleted = false;
      static_cast<void>(etcd_->Resign(
          leader_key_, static_cast<int64_t>(role_.epoch), &deleted));
    }
    if (lease_ != 0) static_cast<void>(etcd_->RevokeLease(lease_));
  }

  ClusterRole WaitForRole(const ClusterRole& current,
                          std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait_for(lock, timeout, [&] { return role_ != current || stop_; });
    return role_;
  }

  void Applied(const ClusterRole& role) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      applied_ = role;
    }
    wake_.notify_all();
  }

  Clock::time_point lease_deadline() const override {
    return Clock::time_point(Clock::duration(deadline_.load()));
  }

  std::string last_error() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return last_error_;
  }

 private:
  void Run() {
    Clock::time_point next_renewal = Clock::now();
    while (!Stopping()) {
      Status s = Clock::now() >= next_renewal ? Renew() : Status::OK();
      if (s.ok() && lease_ != 0 && Clock::now() >= next_renewal) {
        // A quarter of the TTL (in milliseconds: a 1 s TTL's quarter in
        // whole seconds is 0).
        next_renewal = Clock::now() + std::chrono::milliseconds(ttl_) / 4;
      }
      if (s.ok() && lease_ != 0) s = Step();
      Note(s);
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_for(lock, s.ok() ? kPoll : 200ms, [this] { return stop_; });
    }
  }

  // Grants a lease, or renews the one held; a lease lost makes the node a
  // candidate again, under a new lease.
  Status Renew() {
    Clock::time_point sent = Clock::now();
    if (lease_ == 0) {
      std::chrono::seconds granted{0};
      Status s = etcd_->GrantLease(options_.lease, &lease_, &granted);
      if (!s.ok()) return s;
      ttl_ = granted;
      published_.clear();
      SetDeadline(sent + granted);
      return Status::OK();
    }
    std::chrono::seconds left{0};
    Status s = etcd_->KeepAlive(lease_, &left);
    if (s.ok()) {
      SetDeadline(sent + left);
      return s;
    }
    if (s.IsNotFound() || Clock::now() >= lease_deadline()) {
      // Whatever lived under the lease is gone, the leader key included.
      lease_ = 0;
      deadline_ = 0;
      SetRole(ClusterRole{});
    }
    return s;
  }

  void SetDeadline(Clock::time_point until) {
    deadline_ = (until - kFenceMargin).time_since_epoch().count();
  }

  Status Step() {
    ClusterRole role;
    std::optional<ClusterRole> applied;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      role = role_;
      applied = applied_;
    }
    std::optional<EtcdKeyValue> leader;
    if (Status s = etcd_->Get(leader_key_, &leader); !s.ok()) return s;
    switch (role.kind) {
      case ClusterRole::Kind::kPrimary:
        // Our own key lives as long as our lease: renewals keep us leader.
        return Publish("primary", role.epoch, 0);
      case ClusterRole::Kind::kStandby:
        if (!leader ||
            static_cast<uint64_t>(leader->create_revision) != role.epoch) {
          SetRole(ClusterRole{});
          return Status::OK();
        }
        return Status::OK();
      case ClusterRole::Kind::kCandidate:
        // Until spoold has stopped following (or opened its runtime at
        // all), the position it would publish is not final.
        if (applied != role) return Status::OK();
        if (leader) return Follow(*leader);
        return Elect();
    }
    return Status::OK();
  }

  // A leader exists: the node follows it, once its member key says so (a
  // standby is counted out of elections before it applies anything).
  Status Follow(const EtcdKeyValue& leader) {
    json value = json::parse(leader.value, nullptr, false);
    std::string name =
        value.is_object() ? value.value("name", std::string()) : "";
    std::string url =
        value.is_object() ? value.value("url", std::string()) : "";
    if (name == options_.name) {
      // Our own key from before a restart, under a lease of ours that
      // lapses by itself; revoked so that the cluster need not wait. (Under
      // the lease held now it cannot be: only Elect puts it, and then the
      // node is the primary.)
      if (leader.lease == lease_) return Status::OK();
      return etcd_->RevokeLease(leader.lease);
    }
    if (!ValidUrl(url)) {
      return Status::Corruption(
          "the leader key " + leader_key_ +
          " names no URL: " + leader.value.substr(0, 200));
    }
    uint64_t epoch = static_cast<uint64_t>(leader.create_revision);
    if (Status s = Publish("standby", epoch, 0); !s.ok()) return s;
    ClusterRole next;
    next.kind = ClusterRole::Kind::kStandby;
    next.epoch = epoch;
    next.primary_name = name;
    next.primary_url = url;
    SetRole(std::move(next));
    return Status::OK();
  }

  // No leader: publishes this node's position, and campaigns when a quorum
  // of candidates has published and this node is the most advanced.
  Status Elect() {
    ReplicationStatus status = status_();
    if (Status s = Publish("candidate", status.epoch, status.position); !s.ok())
      return s;
    std::vector<EtcdKeyValue> kvs;
    if (Status s = etcd_->List(options_.prefix + "/members/", &kvs); !s.ok())
      return s;
    std::vector<Member> candidates;
    for (const EtcdKeyValue& kv : kvs) {
      std::optional<Member> m = ParseMember(kv.value);
      if (!m || m->state != "candidate") continue;
      if (std::find(options_.nodes.begin(), options_.nodes.end(), m->name) ==
          options_.nodes.end())
        continue;
      candidates.push_back(*m);
    }
    if (candidates.size() < quorum_) {
      Wait("waiting for " + std::to_string(quorum_) +
           " nodes to publish their positions (" +
           std::to_string(candidates.size()) + " have)");
      return Status::OK();
    }
    auto rank = [](const Member& m) {
      return std::make_tuple(m.epoch, m.position, m.name);
    };
    const Member& best = *std::max_element(
        candidates.begin(), candidates.end(),
        [&](const Member& a, const Member& b) { return rank(a) < rank(b); });
    if (best.name != options_.name) {
      Wait("waiting for " + best.name + ", at epoch " +
           std::to_string(best.epoch) + " position " +
           std::to_string(best.position) + ", to take the lead");
      return Status::OK();
    }
    json value = {{"name", options_.name}, {"url", options_.advertise}};
    EtcdCampaign campaign;
    if (Status s =
            etcd_->Campaign(leader_key_, value.dump(), lease_, &campaign);
        !s.ok())
      return s;
    if (!campaign.won) return Follow(campaign.holder);
    uint64_t epoch = static_cast<uint64_t>(campaign.holder.create_revision);
    LogLine("cluster: " + options_.name + " leads epoch " +
            std::to_string(epoch) + " from position " +
            std::to_string(status.position));
    ClusterRole next;
    next.kind = ClusterRole::Kind::kPrimary;
    next.epoch = epoch;
    next.primary_name = options_.name;
    next.primary_url = options_.advertise;
    SetRole(std::move(next));
    return Publish("primary", epoch, status.position);
  }

  // Puts this node's member key when its content changed.
  Status Publish(const std::string& state, uint64_t epoch, uint64_t position) {
    json value = {{"name", options_.name},
                  {"url", options_.advertise},
                  {"state", state},
                  {"epoch", epoch},
                  {"position", position}};
    std::string text = value.dump();
    if (text == published_) return Status::OK();
    Status s = etcd_->Put(member_key_, text, lease_);
    if (s.ok()) published_ = std::move(text);
    return s;
  }

  void SetRole(ClusterRole role) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (role == role_) return;
      role_ = std::move(role);
    }
    wake_.notify_all();
  }

  void Wait(const std::string& why) {
    if (why == waiting_) return;
    waiting_ = why;
    LogLine("cluster: " + why);
  }

  void Note(const Status& s) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string error = s.ok() ? std::string() : s.ToString();
    if (!error.empty() && error != last_error_) {
      LogLine("cluster: " + error);
    }
    last_error_ = std::move(error);
  }

  bool Stopping() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stop_;
  }

  const ClusterOptions options_;
  // Candidates that must have published before an election: N - K + 1 of
  // N standbys, which is the node count minus K.
  const uint32_t quorum_;
  const std::function<ReplicationStatus()> status_;
  const std::unique_ptr<EtcdClient> etcd_;
  const std::string leader_key_;
  const std::string member_key_;
  // The node's thread's alone (and the destructor's, after the join).
  int64_t lease_ = 0;
  std::chrono::seconds ttl_{1};
  std::string published_;
  std::string waiting_;
  std::atomic<Clock::rep> deadline_{0};
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  ClusterRole role_;  // GUARDED_BY(mutex_)
  // The role spoold last took; none before its runtime is open.
  std::optional<ClusterRole> applied_;  // GUARDED_BY(mutex_)
  std::string last_error_;              // GUARDED_BY(mutex_)
  bool stop_ = false;                   // GUARDED_BY(mutex_)
  std::thread thread_;
};

}  // namespace

const char* RoleName(ClusterRole::Kind kind) {
  switch (kind) {
    case ClusterRole::Kind::kCandidate:
      return "candidate";
    case ClusterRole::Kind::kPrimary:
      return "primary";
    case ClusterRole::Kind::kStandby:
      return "standby";
  }
  return "candidate";
}

Status ClusterOptions::Validate() const {
  if (!enabled()) return Status::OK();
  if (etcd.size() > 16) return Bad("etcd", "at most 16 URLs");
  for (const std::string& url : etcd) {
    if (!ValidUrl(url)) {
      return Bad("etcd", "expected \"http(s)://HOST:PORT\", got \"" +
                             url.substr(0, 200) + "\"");
    }
  }
  if (!ValidName(name)) {
    return Bad("name", "expected 1 to 64 of [A-Za-z0-9._-], got \"" +
                           name.substr(0, 100) + "\"");
  }
  if (nodes.size() < 2 || nodes.size() > 16) {
    return Bad("nodes", "list every node's name, 2 to 16 of them; got " +
                            std::to_string(nodes.size()));
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!ValidName(nodes[i])) {
      return Bad("nodes", "\"" + nodes[i].substr(0, 100) +
                              "\" is not 1 to 64 of [A-Za-z0-9._-]");
    }
    if (std::find(nodes.begin(), nodes.begin() + i, nodes[i]) !=
        nodes.begin() + i) {
      return Bad("nodes", "\"" + nodes[i] + "\" is listed twice");
    }
  }
  if (std::find(nodes.begin(), nodes.end(), name) == nodes.end()) {
    return Bad("nodes", "does not list this node's name \"" + name + "\"");
  }
  if (!ValidUrl(advertise)) {
    return Bad("advertise",
               "expected the \"http(s)://HOST:PORT\" other nodes reach this "
               "spoold at, got \"" +
                   advertise.substr(0, 200) + "\"");
  }
  if (lease < 1000ms || lease > 60000ms || lease.count() % 1000 != 0) {
    return Bad("lease_ms", "expected whole seconds in [1000, 60000], got " +
                               std::to_string(lease.count()));
  }
  if (prefix.size() < 2 || prefix[0] != '/' || prefix.back() == '/' ||
      prefix.size() > 200) {
    return Bad("prefix",
               "expected \"/NAME[/NAME...]\" without a trailing "
               "slash, got \"" +
                   prefix.substr(0, 200) + "\"");
  }
  return Status::OK();
}

Status ClusterNode::Start(ClusterOptions options, uint32_t min_acks,
                          std::function<ReplicationStatus()> status,
                          std::unique_ptr<ClusterNode>* node) {
  if (Status s = options.Validate(); !s.ok()) return s;
  if (!options.enabled()) {
    return Status::InvalidArgument("cluster.etcd: no etcd URL given");
  }
  if (min_acks < 1 || min_acks >= options.nodes.size()) {
    return Status::InvalidArgument(
        "replication.min_acks: a cluster of " +
        std::to_string(options.nodes.size()) + " nodes needs 1 to " +
        std::to_string(options.nodes.size() - 1) +
        " standby acknowledgements per commit, got " +
        std::to_string(min_acks));
  }
  EtcdOptions etcd;
  etcd.endpoints = options.etcd;
  etcd.ca_file = options.etcd_ca_file;
  // A renewal must come back well within the lease.
  etcd.request_timeout = options.lease / 4;
  std::unique_ptr<EtcdClient> client;
  if (Status s = EtcdClient::Create(std::move(etcd), &client); !s.ok())
    return s;
  *node = std::make_unique<Node>(std::move(options), min_acks,
                                 std::move(status), std::move(client));
  return Status::OK();
}

}  // namespace spool::http
