#include "server/replication_wire.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>

#include "server/api_json.h"
#include "server/json_parse.h"

namespace spool::http {
namespace {

void PutBig(std::string* out, uint64_t value, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) {
    out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  }
}

uint64_t GetBig(std::string_view in, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) {
    value = (value << 8) | static_cast<unsigned char>(in[i]);
  }
  return value;
}

// A decimal u64 parameter; InvalidArgument naming it otherwise.
Status U64Param(std::string_view query, std::string_view name, bool required,
                uint64_t* value) {
  std::optional<std::string> text = QueryParameter(query, name);
  if (!text) {
    if (!required) return Status::OK();
    return Status::InvalidArgument(std::string(name) + ": required");
  }
  if (text->empty() || text->size() > 20 ||
      !std::all_of(text->begin(), text->end(),
                   [](char c) { return c >= '0' && c <= '9'; })) {
    return Status::InvalidArgument(std::string(name) +
                                   ": expected a decimal integer");
  }
  errno = 0;
  unsigned long long parsed = std::strtoull(text->c_str(), nullptr, 10);
  if (errno == ERANGE) {
    return Status::InvalidArgument(std::string(name) + ": out of range");
  }
  *value = parsed;
  return Status::OK();
}

bool PlainRelative(std::string_view name) {
  if (name.empty() || name.size() > 512 || name.front() == '/') return false;
  std::filesystem::path path{std::string(name)};
  for (const auto& part : path) {
    if (part == ".." || part == ".") return false;
  }
  return true;
}

}  // namespace

std::string EncodeCommits(const std::vector<ReplicatedCommit>& commits) {
  size_t size = 0;
  for (const ReplicatedCommit& c : commits) size += 12 + c.data.size();
  std::string out;
  out.reserve(size);
  for (const ReplicatedCommit& c : commits) {
    PutBig(&out, c.position, 8);
    PutBig(&out, c.data.size(), 4);
    out += c.data;
  }
  return out;
}

Status DecodeCommits(std::string_view body,
                     std::vector<ReplicatedCommit>* commits) {
  commits->clear();
  size_t offset = 0;
  while (offset < body.size()) {
    if (body.size() - offset < 12) {
      return Status::Corruption(
          "replication stream: a commit header is cut "
          "off at byte " +
          std::to_string(offset));
    }
    ReplicatedCommit commit;
    commit.position = GetBig(body.substr(offset), 8);
    uint64_t length = GetBig(body.substr(offset + 8), 4);
    offset += 12;
    if (body.size() - offset < length) {
      return Status::Corruption(
          "replication stream: commit " + std::to_string(commit.position) +
          " is cut off at byte " + std::to_string(body.size()));
    }
    commit.data.assign(body.substr(offset, length));
    offset += length;
    commits->push_back(std::move(commit));
  }
  return Status::OK();
}

Status ParseFollowQuery(std::string_view query, FollowRequest* request) {
  std::optional<std::string> standby = QueryParameter(query, "standby");
  if (!standby) return Status::InvalidArgument("standby: required");
  request->standby = *standby;
  uint64_t wait_ms = 0;
  if (Status s = U64Param(query, "log_id", true, &request->log_id); !s.ok())
    return s;
  if (Status s = U64Param(query, "applied", true, &request->applied); !s.ok())
    return s;
  if (Status s = U64Param(query, "epoch", false, &request->epoch); !s.ok())
    return s;
  if (Status s = U64Param(query, "max_bytes", false, &request->max_bytes);
      !s.ok())
    return s;
  if (Status s = U64Param(query, "wait_ms", false, &wait_ms); !s.ok()) return s;
  if (wait_ms > 60'000) {
    return Status::InvalidArgument("wait_ms: must be at most 60000");
  }
  request->wait = std::chrono::milliseconds(wait_ms);
  return Status::OK();
}

std::string FollowQuery(const FollowRequest& request) {
  return "standby=" + request.standby +
         "&log_id=" + std::to_string(request.log_id) +
         "&applied=" + std::to_string(request.applied) +
         "&epoch=" + std::to_string(request.epoch) +
         "&max_bytes=" + std::to_string(request.max_bytes) + "&wait_ms=" +
         std::to_string(
             std::chrono::duration_cast<std::chrono::milliseconds>(request.wait)
                 .count());
}

Status ListBaseFiles(const std::string& dir, std::vector<BaseFile>* files) {
  files->clear();
  std::error_code error;
  std::filesystem::recursive_directory_iterator it(dir, error), end;
  for (; !error && it != end; it.increment(error)) {
    if (!it->is_regular_file(error)) continue;
    BaseFile file;
    file.name = std::filesystem::relative(it->path(), dir, error).string();
    file.size = it->file_size(error);
    if (error) break;
    files->push_back(std::move(file));
  }
  if (error) {
    return Status::IOError("listing base directory " + dir + ": " +
                           error.message());
  }
  std::sort(
      files->begin(), files->end(),
      [](const BaseFile& a, const BaseFile& b) { return a.name < b.name; });
  return Status::OK();
}

std::string BaseJson(uint32_t id, uint64_t log_id,
                     const std::vector<BaseFile>& files) {
  std::string out = "{\"id\":" + std::to_string(id) + ",\"log_id\":\"" +
                    std::to_string(log_id) + "\",\"files\":[";
  for (size_t i = 0; i < files.size(); ++i) {
    if (i > 0) out += ',';
    out += "{\"name\":" + JsonString(files[i].name) +
           ",\"size\":" + std::to_string(files[i].size) + "}";
  }
  return out + "]}";
}

Status ParseBaseJson(std::string_view text, uint64_t* log_id,
                     std::vector<BaseFile>* files) {
  nlohmann::json json;
  if (Status s = ParseJson(text, "base listing", &json); !s.ok()) return s;
  auto bad = [](const std::string& why) {
    return Status::InvalidArgument("base listing: " + why);
  };
  if (!json.is_object() || !json.contains("log_id") ||
      !json["log_id"].is_string() || !json.contains("files") ||
      !json["files"].is_array()) {
    return bad("expected {\"log_id\": \"N\", \"files\": [...]}");
  }
  const std::string& id = json["log_id"].get_ref<const std::string&>();
  if (id.empty() || id.size() > 20 ||
      !std::all_of(id.begin(), id.end(),
                   [](char c) { return c >= '0' && c <= '9'; })) {
    return bad("log_id is not a decimal integer");
  }
  *log_id = std::strtoull(id.c_str(), nullptr, 10);
  files->clear();
  for (const nlohmann::json& f : json["files"]) {
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() ||
        !f.contains("size") || !f["size"].is_number_unsigned()) {
      return bad("a file is not {\"name\": \"...\", \"size\": N}");
    }
    BaseFile file;
    file.name = f["name"].get<std::string>();
    file.size = f["size"].get<uint64_t>();
    if (!PlainRelative(file.name)) {
      return bad("file name \"" + file.name.substr(0, 100) +
                 "\" is not a plain relative path");
    }
    files->push_back(std::move(file));
  }
  return Status::OK();
}

Status ReadBaseChunk(const std::string& dir, std::string_view name,
                     uint64_t offset, std::string* bytes) {
  std::vector<BaseFile> files;
  if (Status s = ListBaseFiles(dir, &files); !s.ok()) return s;
  auto it = std::find_if(files.begin(), files.end(),
                         [&](const BaseFile& f) { return f.name == name; });
  if (it == files.end()) {
    return Status::NotFound("the base holds no file \"" +
                            std::string(name.substr(0, 100)) + "\"");
  }
  if (offset > it->size) {
    return Status::InvalidArgument("offset " + std::to_string(offset) +
                                   " is beyond the file's " +
                                   std::to_string(it->size) + " bytes");
  }
  std::ifstream in(dir + "/" + it->name, std::ios::binary);
  if (!in) return Status::IOError("opening base file " + it->name);
  in.seekg(static_cast<std::streamoff>(offset));
  uint64_t length = std::min(kBaseChunkBytes, it->size - offset);
  bytes->resize(length);
  in.read(bytes->data(), static_cast<std::streamsize>(length));
  if (static_cast<uint64_t>(in.gcount()) != length) {
    return Status::IOError("reading base file " + it->name);
  }
  return Status::OK();
}

std::string ClusterJson(const ReplicationStatus& status,
                        std::string_view primary_url) {
  std::string out =
      "{\"role\":" + JsonString(status.role) +
      ",\"epoch\":" + std::to_string(status.epoch) +
      ",\"applied_sequence\":" + std::to_string(status.position) +
      ",\"primary\":" +
      (primary_url.empty() ? std::string("null") : JsonString(primary_url)) +
      ",\"log_id\":\"" + std::to_string(status.log_id) +
      "\",\"oldest_kept\":" + std::to_string(status.oldest_kept) +
      ",\"min_acks\":" + std::to_string(status.min_acks) + ",\"standbys\":[";
  for (size_t i = 0; i < status.standbys.size(); ++i) {
    const StandbyInfo& s = status.standbys[i];
    if (i > 0) out += ',';
    out +=
        "{\"name\":" + JsonString(s.name) +
        ",\"applied_sequence\":" + std::to_string(s.applied) +
        ",\"lag_bytes\":" + std::to_string(s.lag_bytes) + ",\"lag_commits\":" +
        std::to_string(status.position > s.applied ? status.position - s.applied
                                                   : 0) +
        ",\"connected\":" + (s.connected ? "true" : "false") + "}";
  }
  return out + "]}";
}

std::string ReplicationMetrics(const ReplicationStatus& status) {
  std::string out =
      "# HELP spool_replication_position The store's last commit position "
      "(committed on a primary, applied on a standby).\n"
      "# TYPE spool_replication_position gauge\n"
      "spool_replication_position{role=\"" +
      status.role + "\"} " + std::to_string(status.position) + "\n";
  if (status.role != "primary") return out;
  uint32_t connected = 0;
  for (const StandbyInfo& s : status.standbys) connected += s.connected;
  out +=
      "# HELP spool_replication_standbys_connected Standbys heard from "
      "within replication.ack_timeout_ms.\n"
      "# TYPE spool_replication_standbys_connected gauge\n"
      "spool_replication_standbys_connected " +
      std::to_string(connected) +
      "\n"
      "# HELP spool_replication_log_bytes Commit data the replication log "
      "keeps.\n"
      "# TYPE spool_replication_log_bytes gauge\n"
      "spool_replication_log_bytes " +
      std::to_string(status.log_bytes) + "\n";
  if (status.standbys.empty()) return out;
  out +=
      "# HELP spool_replication_standby_lag_commits Commits a standby has not "
      "acknowledged.\n"
      "# TYPE spool_replication_standby_lag_commits gauge\n";
  for (const StandbyInfo& s : status.standbys) {
    out +=
        "spool_replication_standby_lag_commits{standby=\"" + s.name + "\"} " +
        std::to_string(status.position > s.applied ? status.position - s.applied
                                                   : 0) +
        "\n";
  }
  out +=
      "# HELP spool_replication_standby_lag_bytes Commit data a standby has "
      "not acknowledged.\n"
      "# TYPE spool_replication_standby_lag_bytes gauge\n";
  for (const StandbyInfo& s : status.standbys) {
    out += "spool_replication_standby_lag_bytes{standby=\"" + s.name + "\"} " +
           std::to_string(s.lag_bytes) + "\n";
  }
  return out;
}

}  // namespace spool::http
