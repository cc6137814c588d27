#include "benchmarks/peers/peer.h"

#include <utility>

#include "benchmarks/peers/peers_internal.h"

namespace spool::bench {
namespace {

// Stands in for a peer whose client library this build lacks.
class UnavailablePeer final : public Peer {
 public:
  UnavailablePeer(std::string name, std::string reason)
      : name_(std::move(name)), reason_(std::move(reason)) {}

  std::string name() const override { return name_; }
  Status Setup(const std::string&) override {
    return Status::NotSupported(reason_);
  }
  void Teardown() override {}
  Result<std::unique_ptr<PeerClient>> Connect() override {
    return Status::NotSupported(reason_);
  }
  std::string Describe() const override {
    return name_ + ": unavailable (" + reason_ + ")";
  }

 private:
  std::string name_;
  std::string reason_;
};

}  // namespace

std::unique_ptr<Peer> MakeUnavailablePeer(std::string name,
                                          std::string reason) {
  return std::make_unique<UnavailablePeer>(std::move(name), std::move(reason));
}

std::vector<std::unique_ptr<Peer>> MakeAllPeers() {
  std::vector<std::unique_ptr<Peer>> peers;
  peers.push_back(MakeFsyncPeer());
  peers.push_back(MakeRocksDbRawPeer());
  peers.push_back(MakeSqlitePeer());
  peers.push_back(MakeRedisPeer());
  peers.push_back(MakeRedisPlainPeer());
  peers.push_back(MakeBeanstalkdPeer());
  peers.push_back(MakePostgresPeer());
  return peers;
}

std::unique_ptr<Peer> MakePeer(std::string_view name) {
  if (name == "fsync") return MakeFsyncPeer();
  if (name == "rocksdb_raw") return MakeRocksDbRawPeer();
  if (name == "sqlite") return MakeSqlitePeer();
  if (name == "redis") return MakeRedisPeer();
  if (name == "redis_plain") return MakeRedisPlainPeer();
  if (name == "beanstalkd") return MakeBeanstalkdPeer();
  if (name == "postgres") return MakePostgresPeer();
  return nullptr;
}

}  // namespace spool::bench
