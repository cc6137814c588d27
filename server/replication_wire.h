// spoold's replication transport (docs/replication.md): what a standby and
// its primary exchange over HTTP(S), beside the code that sends it
// (server/http_server.cc on the primary, server/standby_follower.cc on the
// standby).
//
//   POST /v1/replication/follow?standby=NAME&log_id=N&applied=N
//        &max_bytes=N&wait_ms=N
//     200, application/octet-stream: the commits after `applied`, each as
//         [position: u64 big endian][length: u32 big endian][bytes];
//         headers X-Spool-Log-Id and X-Spool-Primary-Position.
//     410, JSON {"error": {"code": "gone", ...}, "log_id": "N"}: copy a base.
//   POST /v1/replication/base
//     201, JSON {"id", "log_id": "N", "files": [{"name", "size"}]}: a new
//         backup of the primary, made for this standby to copy.
//   GET /v1/replication/base/file?name=NAME&offset=N
//     200: up to kBaseChunkBytes of that file of the base, from `offset`.
//
// Every route needs Authorization: Bearer <replication.secret_file>; no
// other token opens them, and that secret opens nothing else.

#ifndef SPOOL_SERVER_REPLICATION_WIRE_H_
#define SPOOL_SERVER_REPLICATION_WIRE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <spool/replication.h>
#include <spool/status.h>

namespace spool::http {

// The most bytes one base-file request answers.
inline constexpr uint64_t kBaseChunkBytes = uint64_t{4} << 20;

// The body of a follow answer.
std::string EncodeCommits(const std::vector<ReplicatedCommit>& commits);
// Its inverse; Corruption naming the offset for a truncated body.
Status DecodeCommits(std::string_view body,
                     std::vector<ReplicatedCommit>* commits);

// The follow route's query. InvalidArgument naming the parameter.
Status ParseFollowQuery(std::string_view query, FollowRequest* request);
// The query a standby sends.
std::string FollowQuery(const FollowRequest& request);

// One file of a base backup: its name relative to the base directory.
struct BaseFile {
  std::string name;
  uint64_t size = 0;
};
// Every file under `dir`, by name. IOError naming the directory.
Status ListBaseFiles(const std::string& dir, std::vector<BaseFile>* files);
// {"id", "log_id", "files"}.
std::string BaseJson(uint32_t id, uint64_t log_id,
                     const std::vector<BaseFile>& files);
// Parses BaseJson. InvalidArgument when it is not one, or a name is not a
// plain relative path (no "..", no leading '/').
Status ParseBaseJson(std::string_view json, uint64_t* log_id,
                     std::vector<BaseFile>* files);
// Up to kBaseChunkBytes of file `name` of the base in `dir`, from
// `offset`. NotFound unless `name` is one ListBaseFiles lists: the client
// names no path of its own.
Status ReadBaseChunk(const std::string& dir, std::string_view name,
                     uint64_t offset, std::string* bytes);

// GET /v1/cluster: {"role", "epoch", "applied_sequence", "primary",
// "log_id", "oldest_kept", "min_acks", "standbys": [{"name",
// "applied_sequence", "lag_bytes", "connected"}]}. `primary` is the
// standby's primary URL, or null on a primary.
std::string ClusterJson(const ReplicationStatus& status,
                        std::string_view primary_url);

// The replication gauges for /metrics.
std::string ReplicationMetrics(const ReplicationStatus& status);

}  // namespace spool::http

#endif  // SPOOL_SERVER_REPLICATION_WIRE_H_
