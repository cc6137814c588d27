// The "postgres" peer: PostgreSQL 15 from Debian, a throwaway cluster in the
// workdir, with fsync=on and synchronous_commit=on, so every commit flushes
// the WAL before it returns (concurrent commits share flushes). The queue is
// one table with an index serving the claim; each step is one autocommit
// statement: an INSERT to enqueue, an UPDATE ... FOR UPDATE SKIP LOCKED to
// claim, an UPDATE to complete.
//
// PostgreSQL refuses to run as root. When we are root, initdb and postgres
// run as the `postgres` user: the forked child drops to it before exec, so
// that the server stays our direct child, in our process group and tied to
// us by PR_SET_PDEATHSIG (pg_ctl would daemonize it with setsid; runuser
// would stand between us and it). The workdir then gets search permission
// for others (o+x), so that `postgres` can reach its data directory.

#include "benchmarks/peers/peers_internal.h"

#if SPOOL_BENCH_HAVE_LIBPQ

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <libpq-fe.h>
#include <memory>
#include <pwd.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <vector>

#include "benchmarks/peers/server_process.h"

namespace spool::bench {
namespace {

using std::chrono::milliseconds;

constexpr char kSuperuser[] = "postgres";
// Enough for spool-bench's 64 concurrent callers plus set-up connections.
constexpr int kMaxConnections = 200;
// Bounds every statement, so that a stuck server fails a call instead of
// hanging the benchmark.
constexpr int kStatementTimeoutMs = 30000;
constexpr milliseconds kInitdbTimeout{120000};

constexpr char kSchema[] = R"sql(
CREATE TABLE tasks (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- also enqueue order
  type text NOT NULL,
  payload bytea NOT NULL,
  status smallint NOT NULL,     -- 0 pending, 1 running, 2 completed
  priority integer NOT NULL,    -- higher runs first
  attempts integer NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
CREATE INDEX tasks_ready ON tasks (status, priority DESC, id);
)sql";

constexpr char kEnqueue[] =
    "INSERT INTO tasks (type, payload, status, priority, attempts, "
    "created_at, updated_at) VALUES ($1, $2, 0, 0, 0, now(), now())";

constexpr char kPreload[] =
    "INSERT INTO tasks (type, payload, status, priority, attempts, "
    "created_at, updated_at) "
    "SELECT $1, $2, 0, 0, 0, now(), now() FROM generate_series(1, $3)";

constexpr char kClaim[] =
    "UPDATE tasks SET status = 1, attempts = attempts + 1, updated_at = now() "
    "WHERE id = (SELECT id FROM tasks WHERE status = 0 "
    "ORDER BY priority DESC, id LIMIT 1 FOR UPDATE SKIP LOCKED) "
    "RETURNING id";

constexpr char kComplete[] =
    "UPDATE tasks SET status = 2, updated_at = now() "
    "WHERE id = $1 AND status = 1";

std::string ErrnoText(int err) { return std::strerror(err); }

struct ConnFinish {
  void operator()(PGconn* c) const { PQfinish(c); }
};
using ConnPtr = std::unique_ptr<PGconn, ConnFinish>;

struct ResultClear {
  void operator()(PGresult* r) const { PQclear(r); }
};
using ResultPtr = std::unique_ptr<PGresult, ResultClear>;

std::string Trimmed(const char* text) {
  std::string s = text != nullptr ? text : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// The Status of `result` from `what`: OK for the expected kind of success.
Status Check(PGconn* c, const PGresult* result, const std::string& what) {
  ExecStatusType st =
      result != nullptr ? PQresultStatus(result) : PGRES_FATAL_ERROR;
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return Status::OK();
  std::string message = "postgres: " + what + ": " +
                        Trimmed(result != nullptr ? PQresultErrorMessage(result)
                                                  : PQerrorMessage(c));
  if (PQstatus(c) == CONNECTION_BAD) return Status::IOError(message);
  const char* state = result != nullptr
                          ? PQresultErrorField(result, PG_DIAG_SQLSTATE)
                          : nullptr;
  std::string sqlstate = state != nullptr ? state : "";
  if (sqlstate == "57014") return Status::TimedOut(message);  // Cancelled.
  if (sqlstate == "40001" || sqlstate == "40P01" || sqlstate == "55P03") {
    return Status::Busy(message);  // Serialization, deadlock, lock timeout.
  }
  return Status::IOError(message);
}

std::string ConnInfo(uint16_t port, int connect_timeout_s) {
  return "host=127.0.0.1 port=" + std::to_string(port) + " user=" + kSuperuser +
         " dbname=postgres sslmode=disable gssencmode=disable" +
         " connect_timeout=" + std::to_string(connect_timeout_s) +
         " application_name=spool-bench options='-c statement_timeout=" +
         std::to_string(kStatementTimeoutMs) + "'";
}

Result<ConnPtr> ConnectTo(uint16_t port, int connect_timeout_s) {
  ConnPtr c(PQconnectdb(ConnInfo(port, connect_timeout_s).c_str()));
  if (c == nullptr) return Status::IOError("postgres: out of memory");
  if (PQstatus(c.get()) != CONNECTION_OK) {
    return Status::IOError(
        "postgres: connect to 127.0.0.1:" + std::to_string(port) + ": " +
        Trimmed(PQerrorMessage(c.get())));
  }
  return c;
}

// Runs `sql` (no parameters) and returns its result.
Result<ResultPtr> Exec(PGconn* c, const std::string& sql,
                       const std::string& what) {
  ResultPtr r(PQexec(c, sql.c_str()));
  Status s = Check(c, r.get(), what);
  if (!s.ok()) return s;
  return r;
}

// The value SHOW reports for a setting.
Result<std::string> Show(PGconn* c, const std::string& setting) {
  Result<ResultPtr> r = Exec(c, "SHOW " + setting, "SHOW " + setting);
  if (!r.ok()) return r.status();
  if (PQntuples(r->get()) != 1) {
    return Status::IOError("postgres: SHOW " + setting + ": no row");
  }
  return std::string(PQgetvalue(r->get(), 0, 0));
}

class PostgresClient final : public PeerClient {
 public:
  static Result<std::unique_ptr<PostgresClient>> Create(uint16_t port) {
    Result<ConnPtr> c = ConnectTo(port, 5);
    if (!c.ok()) return c.status();
    struct {
      const char* name;
      const char* sql;
      int params;
    } statements[] = {
        {"enqueue", kEnqueue, 2},
        {"preload", kPreload, 3},
        {"claim", kClaim, 0},
        {"complete", kComplete, 1},
    };
    for (const auto& s : statements) {
      ResultPtr r(PQprepare(c->get(), s.name, s.sql, s.params, nullptr));
      Status status =
          Check(c->get(), r.get(), std::string("prepare ") + s.name);
      if (!status.ok()) return status;
    }
    return std::unique_ptr<PostgresClient>(
        new PostgresClient(std::move(c).value()));
  }

  Status Enqueue(std::string_view type, std::string_view payload) override {
    return Insert("enqueue", type, payload, nullptr);
  }

  Status Preload(size_t n, std::string_view type,
                 std::string_view payload) override {
    const std::string count = std::to_string(n);
    return Insert("preload", type, payload, &count);
  }

  Status ClaimAndComplete() override {
    // The claim commits on its own, as a worker's would.
    ResultPtr claimed(
        PQexecPrepared(c_.get(), "claim", 0, nullptr, nullptr, nullptr, 0));
    Status s = Check(c_.get(), claimed.get(), "claim");
    if (!s.ok()) return s;
    if (PQntuples(claimed.get()) == 0) {
      return Status::NotFound("postgres: no pending task");
    }
    const std::string id = PQgetvalue(claimed.get(), 0, 0);

    // The completion: a second commit.
    const char* values[] = {id.c_str()};
    ResultPtr completed(
        PQexecPrepared(c_.get(), "complete", 1, values, nullptr, nullptr, 0));
    s = Check(c_.get(), completed.get(), "complete task " + id);
    if (!s.ok()) return s;
    if (std::strcmp(PQcmdTuples(completed.get()), "1") != 0) {
      return Status::FailedPrecondition("postgres: task " + id +
                                        " was no longer running when it was "
                                        "completed");
    }
    return Status::OK();
  }

 private:
  explicit PostgresClient(ConnPtr c) : c_(std::move(c)) {}

  // Runs the prepared insert `name` with the type (text), the payload
  // (binary bytea) and, if given, a count.
  Status Insert(const char* name, std::string_view type,
                std::string_view payload, const std::string* count) {
    type_.assign(type);  // Text parameters must be NUL-terminated.
    const char* values[] = {type_.c_str(), payload.data(),
                            count != nullptr ? count->c_str() : nullptr};
    const int lengths[] = {0, static_cast<int>(payload.size()), 0};
    const int formats[] = {0, 1, 0};
    const int n_params = count != nullptr ? 3 : 2;
    ResultPtr r(
        PQexecPrepared(c_.get(), name, n_params, values, lengths, formats, 0));
    return Check(c_.get(), r.get(), name);
  }

  ConnPtr c_;
  std::string type_;  // Reused buffer.
};

// Who runs initdb and postgres: `postgres` when we are root, else us.
struct RunAs {
  std::string user;  // Empty: our own user.
  uid_t uid = 0;
  gid_t gid = 0;
};

Result<RunAs> ChooseUser() {
  RunAs run_as;
  if (geteuid() != 0) return run_as;
  std::vector<char> buffer(16384);
  struct passwd pwd;
  struct passwd* found = nullptr;
  getpwnam_r(kSuperuser, &pwd, buffer.data(), buffer.size(), &found);
  if (found == nullptr) {
    return Status::NotSupported(
        "postgres: we run as root and there is no `postgres` user to run the "
        "server as (apt-get install postgresql creates it)");
  }
  run_as.user = kSuperuser;
  run_as.uid = pwd.pw_uid;
  run_as.gid = pwd.pw_gid;
  return run_as;
}

class PostgresPeer final : public Peer {
 public:
  explicit PostgresPeer(const ServerPeerOptions& options) : options_(options) {
    if (options_.binary.empty()) options_.binary = kPostgresBinDir;
  }
  ~PostgresPeer() override { Teardown(); }

  std::string name() const override { return "postgres"; }

  Status Setup(const std::string& workdir) override {
    if (server_ != nullptr) {
      return Status::FailedPrecondition("postgres: Setup called twice");
    }
    const std::string postgres = options_.binary + "/postgres";
    const std::string initdb = options_.binary + "/initdb";
    for (const std::string& program : {postgres, initdb}) {
      if (access(program.c_str(), X_OK) != 0) {
        return Status::NotSupported("postgres: " + program +
                                    " is not installed (" + ErrnoText(errno) +
                                    ")");
      }
    }
    Result<RunAs> run_as = ChooseUser();
    if (!run_as.ok()) return run_as.status();

    Result<std::string> data_dir = MakeDataDir(workdir, *run_as);
    if (!data_dir.ok()) return data_dir.status();
    Status s = InitDb(initdb, workdir, *data_dir, *run_as);
    if (!s.ok()) return s;

    LaunchSpec spec;
    spec.port = options_.port;
    spec.start_timeout = options_.start_timeout;
    spec.command = [&](uint16_t port) {
      ChildCommand command;
      command.argv = {postgres, "-D", *data_dir, "-p", std::to_string(port),
                      "-c", "listen_addresses=127.0.0.1", "-c",
                      "unix_socket_directories=", "-c", "fsync=on", "-c",
                      "synchronous_commit=on", "-c", "full_page_writes=on",
                      "-c",
                      "max_connections=" + std::to_string(kMaxConnections),
                      // Keeps dynamic shared memory in the data directory,
                      // not in /dev/shm, where a killed server would leave it.
                      "-c", "dynamic_shared_memory_type=mmap", "-c",
                      "logging_collector=off"};
      command.working_dir = *data_dir;
      command.log_path = workdir + "/postgres.log";
      command.run_as_user = run_as->user;
      // Fast shutdown: disconnects clients instead of waiting for them.
      command.stop_signal = SIGINT;
      return command;
    };
    // Ready when the server on the port is the one using our data directory.
    std::string canonical_data_dir = *data_dir;
    if (char* real = realpath(data_dir->c_str(), nullptr)) {
      canonical_data_dir = real;
      std::free(real);
    }
    spec.probe = [canonical_data_dir](uint16_t port, pid_t) -> Status {
      Result<ConnPtr> c = ConnectTo(port, 2);
      if (!c.ok())
        return c.status();  // E.g. "the database system is starting up".
      Result<std::string> dir = Show(c->get(), "data_directory");
      if (!dir.ok()) return dir.status();
      if (*dir != canonical_data_dir) {
        return Status::Busy("postgres: 127.0.0.1:" + std::to_string(port) +
                            " serves " + *dir + ", not ours");
      }
      return Status::OK();
    };
    Result<LaunchedServer> launched = LaunchServer(spec);
    if (!launched.ok()) return launched.status().WithContext("postgres");
    server_ = std::move(launched->process);
    port_ = launched->port;

    s = CreateSchemaAndInspect();
    if (!s.ok()) Teardown();
    return s;
  }

  void Teardown() override {
    if (server_ != nullptr) {
      Status s = server_->Stop();
      if (!s.ok()) {
        std::fprintf(stderr, "postgres peer: %s\n", s.ToString().c_str());
      }
      server_.reset();
    }
    port_ = 0;
  }

  Result<std::unique_ptr<PeerClient>> Connect() override {
    if (server_ == nullptr) {
      return Status::FailedPrecondition("postgres: Connect before Setup");
    }
    Result<std::unique_ptr<PostgresClient>> client =
        PostgresClient::Create(port_);
    if (!client.ok()) return client.status();
    return std::unique_ptr<PeerClient>(std::move(client).value());
  }

  std::string Describe() const override {
    std::string settings =
        settings_.empty() ? "fsync=on synchronous_commit=on" : settings_;
    const int libpq = PQlibVersion();  // E.g. 150020 for 15.20.
    return "postgres: " + version_ + " (libpq " +
           std::to_string(libpq / 10000) + "." + std::to_string(libpq % 100) +
           "), " + settings +
           ", max_connections=" + std::to_string(kMaxConnections) +
           "; autocommit statements: INSERT; claim UPDATE ... FOR UPDATE "
           "SKIP LOCKED; completion UPDATE (each commit flushes the WAL)";
  }

 private:
  // Creates workdir/pgdata, owned by the user the server runs as, and lets
  // that user reach it.
  Result<std::string> MakeDataDir(const std::string& workdir,
                                  const RunAs& run_as) {
    const std::string data_dir = workdir + "/pgdata";
    if (mkdir(data_dir.c_str(), 0700) != 0) {
      return Status::IOError("postgres: mkdir " + data_dir + ": " +
                             ErrnoText(errno));
    }
    if (run_as.user.empty()) return data_dir;
    if (chown(data_dir.c_str(), run_as.uid, run_as.gid) != 0) {
      return Status::IOError("postgres: chown " + data_dir + " to " +
                             run_as.user + ": " + ErrnoText(errno));
    }
    struct stat st;
    if (stat(workdir.c_str(), &st) != 0) {
      return Status::IOError("postgres: stat " + workdir + ": " +
                             ErrnoText(errno));
    }
    if ((st.st_mode & S_IXOTH) == 0 &&
        chmod(workdir.c_str(), (st.st_mode & 07777) | S_IXOTH) != 0) {
      return Status::IOError("postgres: chmod o+x " + workdir + ": " +
                             ErrnoText(errno));
    }
    return data_dir;
  }

  // Creates the cluster. --no-sync: the cluster is throwaway, and syncing
  // its template files proves nothing; the commits measured later are
  // synced (fsync=on).
  Status InitDb(const std::string& initdb, const std::string& workdir,
                const std::string& data_dir, const RunAs& run_as) {
    ChildCommand command;
    command.argv = {initdb,     "-D",         data_dir,    "-U",
                    kSuperuser, "-A",         "trust",     "-E",
                    "UTF8",     "--locale=C", "--no-sync", "--no-instructions"};
    command.working_dir = data_dir;
    command.log_path = workdir + "/initdb.log";
    command.run_as_user = run_as.user;
    Result<std::unique_ptr<ChildProcess>> child = ChildProcess::Start(command);
    if (!child.ok()) return child.status().WithContext("postgres: initdb");
    Result<int> exit_status = (*child)->WaitForExit(kInitdbTimeout);
    if (!exit_status.ok() || *exit_status != 0) {
      std::string how = exit_status.ok() ? (*child)->exit_description()
                                         : exit_status.status().message();
      std::string tail = (*child)->LogTail();
      std::string hint = run_as.user.empty()
                             ? ""
                             : " (is every directory above " + workdir +
                                   " searchable by user " + run_as.user + "?)";
      return Status::IOError("postgres: initdb " + how + hint +
                             "; log tail:\n" + tail);
    }
    return Status::OK();
  }

  // Creates the queue table and reads back the settings in force.
  Status CreateSchemaAndInspect() {
    Result<ConnPtr> c = ConnectTo(port_, 5);
    if (!c.ok()) return c.status();
    Result<ResultPtr> created = Exec(c->get(), kSchema, "create schema");
    if (!created.ok()) return created.status();

    Result<std::string> version = Show(c->get(), "server_version");
    if (!version.ok()) return version.status();
    version_ = "PostgreSQL " + *version;
    settings_.clear();
    // The settings that make a commit durable, and the value each needs
    // (empty: any value, reported only).
    const std::pair<const char*, const char*> wanted[] = {
        {"fsync", "on"},
        {"synchronous_commit", "on"},
        {"wal_sync_method", ""},
        {"full_page_writes", "on"}};
    for (const auto& [setting, want] : wanted) {
      Result<std::string> value = Show(c->get(), setting);
      if (!value.ok()) return value.status();
      if (*want != '\0' && *value != want) {
        return Status::FailedPrecondition(
            std::string("postgres: the server runs with ") + setting + "=" +
            *value + ", not " + want);
      }
      settings_ +=
          (settings_.empty() ? "" : " ") + std::string(setting) + "=" + *value;
    }
    return Status::OK();
  }

  ServerPeerOptions options_;
  std::unique_ptr<ChildProcess> server_;  // Null unless set up.
  uint16_t port_ = 0;
  std::string version_ = "PostgreSQL";
  std::string settings_;  // As the server reported them.
};

}  // namespace

std::unique_ptr<Peer> MakePostgresPeer(const ServerPeerOptions& options) {
  return std::make_unique<PostgresPeer>(options);
}

}  // namespace spool::bench

#else  // !SPOOL_BENCH_HAVE_LIBPQ

namespace spool::bench {

std::unique_ptr<Peer> MakePostgresPeer(const ServerPeerOptions&) {
  return MakeUnavailablePeer("postgres", "built without libpq (libpq-dev)");
}

}  // namespace spool::bench

#endif  // SPOOL_BENCH_HAVE_LIBPQ
