// spool::http::StandbyFollower: a standby's loop over libcurl
// (server/replication_wire.h has the routes it speaks).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <curl/curl.h>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <unistd.h>
#include <vector>

#include <spool/http/log_line.h>
#include <spool/http/standby.h>

#include "server/bearer_token.h"
#include "server/curl_defaults.h"
#include "server/replication_wire.h"

namespace spool::http {
namespace {

using namespace std::chrono_literals;

// The wait a follow request asks for: short, so that a stop is prompt and
// a primary that vanished is noticed within about a second.
constexpr auto kFollowWait = 1000ms;
constexpr uint64_t kFollowBytes = uint64_t{16} << 20;
// A follow answer holds at least one commit whatever its size; beyond
// this, it is refused rather than held in memory.
constexpr uint64_t kMaxAnswerBytes = uint64_t{512} << 20;
constexpr auto kMaxBackoff = 2000ms;

struct Reply {
  long code = 0;
  std::string body;
  std::string log_id;  // X-Spool-Log-Id
  std::string epoch;   // X-Spool-Epoch
  std::string error;   // a transport error, or empty
};

struct Transfer {
  Reply* reply;
  const std::atomic<bool>* stop;
  uint64_t limit;
};

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t n = size * count;
  if (t->reply->body.size() + n > t->limit) return 0;  // aborts the transfer
  t->reply->body.append(data, n);
  return n;
}

// The value of header `name` (lower case, with its colon) in `line`, or
// nothing.
std::optional<std::string> HeaderValue(std::string_view line,
                                       std::string_view name) {
  if (line.size() <= name.size()) return std::nullopt;
  std::string lower(line.substr(0, name.size()));
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  if (lower != name) return std::nullopt;
  std::string_view value = line.substr(name.size());
  while (!value.empty() && (value.front() == ' ')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n'))
    value.remove_suffix(1);
  return std::string(value);
}

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t n = size * count;
  std::string_view line(data, n);
  if (auto v = HeaderValue(line, "x-spool-log-id:")) t->reply->log_id = *v;
  if (auto v = HeaderValue(line, "x-spool-epoch:")) t->reply->epoch = *v;
  return n;
}

int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<Transfer*>(user)->stop->load() ? 1 : 0;
}

bool ValidName(const std::string& name) {
  return !name.empty() && name.size() <= 64 &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '.' ||
                  c == '_' || c == '-';
         });
}

class Follower final : public StandbyFollower {
 public:
  Follower(Runtime* runtime, const Options& options, std::string secret,
           std::string name, bool keep_recent)
      : runtime_(runtime),
        primary_(options.replication_primary),
        ca_file_(options.replication_ca_file),
        download_dir_(options.path + ".download"),
        auth_("Authorization: Bearer " + secret),
        name_(std::move(name)),
        recent_limit_(keep_recent ? options.replication_log_bytes : 0) {
    while (!primary_.empty() && primary_.back() == '/') primary_.pop_back();
    thread_ = std::thread([this] { Run(); });
  }
  ~Follower() override {
    Stop();
    if (curl_ != nullptr) curl_easy_cleanup(curl_);
  }
  void Stop() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  bool connected() const override { return connected_; }
  std::string last_error() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return last_error_;
  }
  uint64_t rebases() const override { return rebases_; }
  std::vector<ReplicatedCommit> TakeRecent(uint64_t* log_id) override {
    std::lock_guard<std::mutex> lock(mutex_);
    *log_id = recent_log_;
    std::vector<ReplicatedCommit> out(std::make_move_iterator(recent_.begin()),
                                      std::make_move_iterator(recent_.end()));
    recent_.clear();
    recent_bytes_ = 0;
    return out;
  }

 private:
  Reply Request(const std::string& method, const std::string& path,
                uint64_t limit, std::chrono::milliseconds timeout) {
    Reply reply;
    // One handle for every request: its connection to the primary is kept
    // alive between them, so that a follow costs one round trip, not a
    // TCP (and TLS) handshake too (docs/experiments.md).
    if (curl_ == nullptr) curl_ = curl_easy_init();
    if (curl_ == nullptr) {
      reply.error = "curl_easy_init failed";
      return reply;
    }
    CURL* curl = curl_;
    curl_easy_reset(curl);
    Transfer transfer{&reply, &stop_, limit};
    curl_slist* headers = curl_slist_append(nullptr, auth_.c_str());
    std::string url = primary_ + path;
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    if (method == "POST") {
      curl_easy_setopt(curl, CURLOPT_POST, 1L);
      curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
      curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, 0L);
    }
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    // The primary is named in the config, never through the environment.
    ApplyCurlDefaults(curl, timeout, ca_file_);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
    // A link gone silent (a partition drops packets without a reset) is
    // given up after 5 s without a byte, not after the whole timeout: the
    // primary answers a follow within its 1 s wait.
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 5L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, OnProgress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &transfer);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    CURLcode code = curl_easy_perform(curl);
    if (code != CURLE_OK) {
      reply.error = std::string("request to ") + primary_ +
                    " failed: " + curl_easy_strerror(code);
    } else {
      curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &reply.code);
    }
    curl_slist_free_all(headers);
    return reply;
  }

  void Note(const std::string& error) {
    connected_ = false;
    std::lock_guard<std::mutex> lock(mutex_);
    if (error != last_error_) {
      LogLine("standby: " + error);
    }
    last_error_ = error;
  }

  // Sleeps up to `pause`, or until the follower stops.
  void Pause(std::chrono::milliseconds pause) {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait_for(lock, pause, [this] { return stop_.load(); });
  }

  void Run() {
    std::chrono::milliseconds backoff = 100ms;
    while (!stop_) {
      Status s = FollowOnce();
      if (s.ok()) {
        backoff = 100ms;
        continue;
      }
      if (stop_) break;
      Note(s.ToString());
      Pause(backoff);
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
  }

  Status FollowOnce() {
    ReplicationStatus status = runtime_->GetReplicationStatus();
    FollowRequest request;
    request.standby = name_;
    // A stream this copy could not apply: asking as a standby of no log
    // makes the primary answer gone, and a new base follows.
    request.log_id = force_base_ ? 0 : status.log_id;
    request.applied = status.position;
    request.epoch = status.epoch;
    request.max_bytes = kFollowBytes;
    request.wait = kFollowWait;
    Reply reply =
        Request("POST", "/v1/replication/follow?" + FollowQuery(request),
                kMaxAnswerBytes, kFollowWait + 30s);
    if (!reply.error.empty()) return Status::IOError(reply.error);
    if (reply.code == 410) return CopyBase(reply.body);
    if (reply.code != 200) return HttpError("follow", reply);
    // A deposed primary still serving: nothing of it is applied.
    uint64_t epoch = std::strtoull(reply.epoch.c_str(), nullptr, 10);
    if (epoch < status.epoch) {
      return Status::FailedPrecondition(
          "the primary at " + primary_ + " leads epoch " +
          std::to_string(epoch) + ", older than this standby's epoch " +
          std::to_string(status.epoch) + ": it was deposed");
    }
    if (!connected_) {
      std::lock_guard<std::mutex> lock(mutex_);
      LogLine("standby: following " + primary_ + " at position " +
              std::to_string(status.position));
      last_error_.clear();
    }
    connected_ = true;
    std::vector<ReplicatedCommit> commits;
    if (Status s = DecodeCommits(reply.body, &commits); !s.ok()) return s;
    if (commits.empty()) return Status::OK();
    uint64_t log_id = std::strtoull(reply.log_id.c_str(), nullptr, 10);
    std::vector<ReplicatedCommit> kept;
    if (recent_limit_ > 0) kept = commits;
    Result<uint64_t> applied =
        runtime_->ApplyReplicated(log_id, std::move(commits)).Wait();
    if (applied.status().IsInvalidArgument() ||
        applied.status().IsCorruption()) {
      force_base_ = true;
    }
    if (applied.ok() && recent_limit_ > 0) Remember(log_id, std::move(kept));
    return applied.status();
  }

  // Keeps the commits just applied, for TakeRecent: the newest within
  // log_bytes, and only of one log.
  void Remember(uint64_t log_id, std::vector<ReplicatedCommit> commits) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (log_id != recent_log_) {
      recent_.clear();
      recent_bytes_ = 0;
      recent_log_ = log_id;
    }
    for (ReplicatedCommit& c : commits) {
      recent_bytes_ += c.data.size();
      recent_.push_back(std::move(c));
    }
    while (recent_bytes_ > recent_limit_ && !recent_.empty()) {
      recent_bytes_ -= recent_.front().data.size();
      recent_.pop_front();
    }
  }

  Status HttpError(const char* what, const Reply& reply) {
    return Status::IOError(std::string(what) + " at " + primary_ + ": HTTP " +
                           std::to_string(reply.code) + ": " +
                           reply.body.substr(0, 300));
  }

  // The primary cannot serve this standby from where it is: copies a new
  // base backup and swaps it in.
  Status CopyBase(const std::string& why) {
    LogLine("standby: copying a base from " + primary_ + ": " +
            why.substr(0, 300));
    Reply listing = Request("POST", "/v1/replication/base", 64 << 20, 600s);
    if (!listing.error.empty()) return Status::IOError(listing.error);
    if (listing.code != 201) return HttpError("base", listing);
    uint64_t log_id = 0;
    std::vector<BaseFile> files;
    if (Status s = ParseBaseJson(listing.body, &log_id, &files); !s.ok())
      return s;
    std::error_code error;
    std::filesystem::remove_all(download_dir_, error);
    for (const BaseFile& file : files) {
      if (Status s = Download(file); !s.ok()) return s;
    }
    {
      // What was applied before is not the new copy's history.
      std::lock_guard<std::mutex> lock(mutex_);
      recent_.clear();
      recent_bytes_ = 0;
      recent_log_ = 0;
    }
    Result<uint64_t> at = runtime_->Rebase(download_dir_, log_id).Wait();
    std::filesystem::remove_all(download_dir_, error);
    if (!at.ok()) return at.status();
    force_base_ = false;
    ++rebases_;
    LogLine("standby: base copied, at position " + std::to_string(*at));
    return Status::OK();
  }

  Status Download(const BaseFile& file) {
    std::filesystem::path path =
        std::filesystem::path(download_dir_) / file.name;
    std::error_code error;
    std::filesystem::create_directories(path.parent_path(), error);
    if (error) {
      return Status::IOError("creating " + path.parent_path().string() + ": " +
                             error.message());
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    uint64_t offset = 0;
    while (offset < file.size || (file.size == 0 && offset == 0)) {
      if (stop_) return Status::Aborted("the standby is stopping");
      char* escaped = curl_easy_escape(nullptr, file.name.c_str(),
                                       static_cast<int>(file.name.size()));
      std::string name = escaped == nullptr ? std::string() : escaped;
      curl_free(escaped);
      Reply chunk = Request("GET",
                            "/v1/replication/base/file?name=" + name +
                                "&offset=" + std::to_string(offset),
                            kBaseChunkBytes + 1, 120s);
      if (!chunk.error.empty()) return Status::IOError(chunk.error);
      if (chunk.code != 200) return HttpError("base file", chunk);
      if (chunk.body.empty()) break;
      out.write(chunk.body.data(),
                static_cast<std::streamsize>(chunk.body.size()));
      offset += chunk.body.size();
    }
    out.close();
    if (!out) return Status::IOError("writing " + path.string());
    return Status::OK();
  }

  Runtime* const runtime_;
  std::string primary_;
  const std::string ca_file_;
  const std::string download_dir_;
  const std::string auth_;
  const std::string name_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> connected_{false};
  std::atomic<uint64_t> rebases_{0};
  // The follower thread's alone.
  bool force_base_ = false;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::string last_error_;               // GUARDED_BY(mutex_)
  std::deque<ReplicatedCommit> recent_;  // GUARDED_BY(mutex_)
  uint64_t recent_bytes_ = 0;            // GUARDED_BY(mutex_)
  uint64_t recent_log_ = 0;              // GUARDED_BY(mutex_)
  const uint64_t recent_limit_;
  // The follower thread's alone.
  CURL* curl_ = nullptr;
  std::thread thread_;
};

}  // namespace

Status StandbyFollower::Start(Runtime* runtime, const Options& options,
                              std::unique_ptr<StandbyFollower>* follower,
                              bool keep_recent) {
  const std::string& primary = options.replication_primary;
  if (primary.rfind("http://", 0) != 0 && primary.rfind("https://", 0) != 0) {
    return Status::InvalidArgument(
        "replication.primary: expected \"http://HOST:PORT\" or "
        "\"https://HOST:PORT\" of the primary's spoold, got \"" +
        primary.substr(0, 200) + "\"");
  }
  std::string name = options.replication_name;
  if (name.empty()) name = "standby-" + std::to_string(::getpid());
  if (!ValidName(name)) {
    return Status::InvalidArgument(
        "replication.name: expected 1 to 64 of [A-Za-z0-9._-], got \"" +
        name.substr(0, 100) + "\"");
  }
  if (options.replication_secret_file.empty()) {
    return Status::InvalidArgument(
        "replication.secret_file is required on a standby: the primary "
        "refuses standbys without its secret");
  }
  std::string secret;
  if (Status s = LoadBearerToken(options.replication_secret_file, &secret);
      !s.ok()) {
    return s.WithContext("replication.secret_file");
  }
  *follower = std::make_unique<Follower>(runtime, options, std::move(secret),
                                         std::move(name), keep_recent);
  return Status::OK();
}

}  // namespace spool::http
