// EtcdClient against a real etcd 3.4 (Debian's etcd-server, which
// scripts/install-deps installs) on loopback, with a data directory of the
// test's own. Every wait is bounded.

#include "server/etcd_client.h"

#include <chrono>
#include <memory>
#include <netinet/in.h>
#include <optional>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/child_process.h"
#include "tests/testing.h"

namespace spool::http {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

// A port the kernel had free a moment ago.
int UnusedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(address);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), size) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  return port;
}

class EtcdClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(access(kEtcd, X_OK), 0)
        << kEtcd << " is missing: scripts/install-deps installs etcd-server";
    int client_port = UnusedPort();
    int peer_port = UnusedPort();
    endpoint_ = "http://127.0.0.1:" + std::to_string(client_port);
    std::string peer = "http://127.0.0.1:" + std::to_string(peer_port);
    etcd_ = std::make_unique<testing::ChildProcess>(std::vector<std::string>{
        kEtcd, "--name", "test", "--data-dir", dir_.Sub("etcd"),
        "--listen-client-urls", endpoint_, "--advertise-client-urls", endpoint_,
        "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
        "--initial-cluster", "test=" + peer, "--logger", "zap", "--log-level",
        "error"});
    client_ = Client({endpoint_});
    ASSERT_NE(client_, nullptr);
    std::optional<EtcdKeyValue> kv;
    ASSERT_TRUE(testing::WaitUntil(
        [&] { return client_->Get("ready", &kv).ok(); }, seconds(20)))
        << "etcd did not answer at " << endpoint_;
  }

  std::unique_ptr<EtcdClient> Client(std::vector<std::string> endpoints) {
    EtcdOptions options;
    options.endpoints = std::move(endpoints);
    options.request_timeout = milliseconds(2000);
    std::unique_ptr<EtcdClient> client;
    Status s = EtcdClient::Create(options, &client);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return client;
  }

  int64_t Lease(EtcdClient& client, milliseconds ttl) {
    int64_t lease = 0;
    seconds granted{0};
    Status s = client.GrantLease(ttl, &lease, &granted);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_GE(granted.count(), 1);
    return lease;
  }

  static constexpr const char* kEtcd = "/usr/bin/etcd";
  testing::TempDir dir_;
  std::string endpoint_;
  std::unique_ptr<testing::ChildProcess> etcd_;
  std::unique_ptr<EtcdClient> client_;
};

TEST_F(EtcdClientTest, OneCampaignWinsAndTheOtherLearnsTheLeader) {
  auto other = Client({endpoint_});
  int64_t mine = Lease(*client_, seconds(5));
  int64_t theirs = Lease(*other, seconds(5));

  EtcdCampaign won;
  ASSERT_TRUE(client_->Campaign("/spool/leader", "node-a", mine, &won).ok());
  EXPECT_TRUE(won.won);
  EXPECT_GT(won.holder.create_revision, 0);

  EtcdCampaign lost;
  ASSERT_TRUE(other->Campaign("/spool/leader", "node-b", theirs, &lost).ok());
  EXPECT_FALSE(lost.won);
  EXPECT_EQ(lost.holder.value, "node-a");
  EXPECT_EQ(lost.holder.create_revision, won.holder.create_revision);
  EXPECT_EQ(lost.holder.lease, mine);

  std::optional<EtcdKeyValue> kv;
  ASSERT_TRUE(other->Get("/spool/leader", &kv).ok());
  ASSERT_TRUE(kv.has_value());
  EXPECT_EQ(kv->value, "node-a");
  ASSERT_TRUE(other->Get("/spool/nobody", &kv).ok());
  EXPECT_FALSE(kv.has_value());
}

// The fencing the failover relies on: when the leader's lease lapses its
// key goes, the next leader's epoch is higher, the old leader learns from
// its keep-alive that it no longer leads, and its resignation cannot
// delete the new leader's key.
TEST_F(EtcdClientTest, ALapsedLeaseEndsTheLeadershipAndTheEpochGrows) {
  auto other = Client({endpoint_});
  int64_t mine = Lease(*client_, seconds(1));
  EtcdCampaign first;
  ASSERT_TRUE(client_->Campaign("/spool/leader", "node-a", mine, &first).ok());
  ASSERT_TRUE(first.won);
  seconds ttl{0};
  ASSERT_TRUE(client_->KeepAlive(mine, &ttl).ok());
  EXPECT_GE(ttl.count(), 1);

  int64_t theirs = Lease(*other, seconds(5));
  EtcdCampaign second;
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        return other->Campaign("/spool/leader", "node-b", theirs, &second)
                   .ok() &&
               second.won;
      },
      seconds(15)));
  EXPECT_GT(second.holder.create_revision, first.holder.create_revision);

  Status renewed = client_->KeepAlive(mine, &ttl);
  EXPECT_TRUE(renewed.IsNotFound()) << renewed.ToString();
  bool deleted = true;
  ASSERT_TRUE(
      client_->Resign("/spool/leader", first.holder.create_revision, &deleted)
          .ok());
  EXPECT_FALSE(deleted);
  std::optional<EtcdKeyValue> kv;
  ASSERT_TRUE(client_->Get("/spool/leader", &kv).ok());
  ASSERT_TRUE(kv.has_value());
  EXPECT_EQ(kv->value, "node-b");

  ASSERT_TRUE(
      other->Resign("/spool/leader", second.holder.create_revision, &deleted)
          .ok());
  EXPECT_TRUE(deleted);
  EXPECT_TRUE(other->RevokeLease(theirs).ok());
  EXPECT_TRUE(client_->RevokeLease(mine).ok());  // long expired: still OK
}

TEST_F(EtcdClientTest, RevokingTheLeaseDeletesTheKeyAtOnce) {
  int64_t lease = Lease(*client_, seconds(30));
  EtcdCampaign campaign;
  ASSERT_TRUE(client_->Campaign("/spool/leader", "a", lease, &campaign).ok());
  ASSERT_TRUE(client_->RevokeLease(lease).ok());
  std::optional<EtcdKeyValue> kv;
  ASSERT_TRUE(client_->Get("/spool/leader", &kv).ok());
  EXPECT_FALSE(kv.has_value());
}

// Member keys: put under a lease, listed by prefix in key order, gone with
// the lease.
TEST_F(EtcdClientTest, KeysUnderALeaseAreListedByPrefixAndGoWithIt) {
  int64_t lease = Lease(*client_, seconds(5));
  ASSERT_TRUE(client_->Put("/c/members/b", "{\"n\":2}", lease).ok());
  ASSERT_TRUE(client_->Put("/c/members/a", "{\"n\":1}", lease).ok());
  ASSERT_TRUE(client_->Put("/c/membersX", "outside", 0).ok());
  std::vector<EtcdKeyValue> kvs;
  ASSERT_TRUE(client_->List("/c/members/", &kvs).ok());
  ASSERT_EQ(kvs.size(), 2u);
  EXPECT_EQ(kvs[0].key, "/c/members/a");
  EXPECT_EQ(kvs[1].value, "{\"n\":2}");
  EXPECT_EQ(kvs[1].lease, lease);
  EXPECT_TRUE(client_->List("", &kvs).IsInvalidArgument());
  ASSERT_TRUE(client_->RevokeLease(lease).ok());
  ASSERT_TRUE(client_->List("/c/members/", &kvs).ok());
  EXPECT_TRUE(kvs.empty());
}

TEST_F(EtcdClientTest, ADeadEndpointIsSkippedAndNamedWhenAllAreDead) {
  std::string dead = "http://127.0.0.1:" + std::to_string(UnusedPort());
  auto client = Client({dead, endpoint_});
  std::optional<EtcdKeyValue> kv;
  Status s = client->Get("/spool/leader", &kv);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(client->endpoint(), endpoint_);

  auto lost = Client({dead});
  s = lost->Get("/spool/leader", &kv);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr(dead));
}

TEST_F(EtcdClientTest, EtcdsOwnErrorsComeBackWithItsMessage) {
  int64_t lease = 0;
  seconds granted{0};
  Status s = client_->KeepAlive(123456789, &granted);
  EXPECT_FALSE(s.ok());
  EtcdCampaign campaign;
  s = client_->Campaign("/spool/leader", "a", 987654321, &campaign);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("lease not found"));
  EXPECT_TRUE(client_->GrantLease(milliseconds(0), &lease, &granted)
                  .IsInvalidArgument());
}

TEST(EtcdOptionsTest, BadOptionsAreRefusedNamingTheField) {
  std::unique_ptr<EtcdClient> client;
  EtcdOptions options;
  Status s = EtcdClient::Create(options, &client);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_THAT(s.message(), HasSubstr("endpoints"));
  for (const char* bad : {"127.0.0.1:2379", "ftp://h:1", "http://",
                          "http://user@h:1", "http://h:1/?x"}) {
    options.endpoints = {bad};
    s = EtcdClient::Create(options, &client);
    EXPECT_TRUE(s.IsInvalidArgument()) << bad;
    EXPECT_THAT(s.message(), HasSubstr(bad));
  }
  options.endpoints = {"http://127.0.0.1:2379"};
  options.request_timeout = milliseconds(1);
  s = EtcdClient::Create(options, &client);
  EXPECT_THAT(s.message(), HasSubstr("request_timeout"));
  EXPECT_TRUE(EtcdClient::Create(options, nullptr).IsInvalidArgument());
}

}  // namespace
}  // namespace spool::http
