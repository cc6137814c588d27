// A standby spoold's side of replication (docs/replication.md): a thread
// that follows the primary's log over HTTP(S) and applies its commits to
// the standby's runtime, and copies a base backup from the primary when it
// cannot follow from where it is (a new standby, a primary that restarted,
// a standby further behind than the primary's log).
//
//   std::unique_ptr<spool::Runtime> runtime;   // replication.role standby
//   spool::Runtime::Open(options, &runtime);
//   std::unique_ptr<spool::http::StandbyFollower> follower;
//   spool::http::StandbyFollower::Start(runtime.get(), options, &follower);
//   ... serve reads ...
//   follower.reset();                          // stops it, within a second
//   runtime->Close().Wait();

#ifndef SPOOL_INCLUDE_HTTP_STANDBY_H_
#define SPOOL_INCLUDE_HTTP_STANDBY_H_

#include <memory>
#include <string>
#include <vector>

#include <spool/options.h>
#include <spool/replication.h>
#include <spool/runtime.h>
#include <spool/status.h>

namespace spool::http {

class StandbyFollower {
 public:
  // Starts following options.replication_primary with the secret of
  // options.replication_secret_file (LoadBearerToken's rules), as
  // options.replication_name. `runtime` must be a standby and outlive the
  // follower. InvalidArgument for a missing or malformed primary URL or
  // name, or a bad secret file.
  // REQUIRES: follower != nullptr.
  // `keep_recent`: keep the commits applied last for TakeRecent (a
  // cluster node that may be promoted); a copy of each chunk and up to
  // options.replication_log_bytes of memory, so off otherwise.
  static Status Start(Runtime* runtime, const Options& options,
                      std::unique_ptr<StandbyFollower>* follower,
                      bool keep_recent = false);

  // Stops following: ends the request in flight (a base copy too) and
  // joins the thread. Bounded: about a second.
  virtual ~StandbyFollower() = default;

  // Stops following as the destructor does; idempotent.
  virtual void Stop() = 0;

  // Whether the last request to the primary succeeded.
  virtual bool connected() const = 0;
  // The last error met, or empty.
  virtual std::string last_error() const = 0;
  // How many base copies were taken.
  virtual uint64_t rebases() const = 0;

  // The commits applied last (at most options.replication_log_bytes of
  // them, oldest first) and their log in *log_id; empty after a base copy,
  // and always without keep_recent.
  // For Runtime::SeedReplicationLog when this standby is promoted: call it
  // once the follower has stopped (it moves them out).
  virtual std::vector<ReplicatedCommit> TakeRecent(uint64_t* log_id) = 0;

 protected:
  StandbyFollower() = default;
};

}  // namespace spool::http

#endif  // SPOOL_INCLUDE_HTTP_STANDBY_H_
