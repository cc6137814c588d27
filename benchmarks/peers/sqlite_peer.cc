// The "sqlite" peer: the design of durable_queue_sqlite on Debian's
// libsqlite3. One tasks table with an index that serves the claim query;
// WAL journal with synchronous=FULL, so every commit syncs the WAL; every
// write is one BEGIN IMMEDIATE transaction, which waits (busy_timeout)
// instead of failing when another connection writes. One connection per
// client.

#include "benchmarks/peers/peers_internal.h"

#if SPOOL_BENCH_HAVE_SQLITE

#include <chrono>
#include <cstdint>
#include <memory>
#include <sqlite3.h>
#include <string>

namespace spool::bench {
namespace {

// How long a write waits for another connection's write lock. SQLite's
// busy handler backs off in sleeps of up to 100 ms, and with 64 writing
// connections an unlucky one was seen waiting 5.6 s; a shorter timeout would
// turn that starvation into spurious Busy errors.
constexpr int kBusyTimeoutMs = 30000;

// Task states in the status column.
constexpr int kPending = 0;
constexpr int kRunning = 1;
constexpr int kCompleted = 2;

constexpr char kSchema[] = R"sql(
CREATE TABLE tasks (
  id INTEGER PRIMARY KEY,
  type TEXT NOT NULL,
  payload BLOB NOT NULL,
  status INTEGER NOT NULL,      -- 0 pending, 1 running, 2 completed
  priority INTEGER NOT NULL,    -- higher runs first
  sequence INTEGER NOT NULL,    -- enqueue order among equal priorities
  attempts INTEGER NOT NULL,
  created_at INTEGER NOT NULL,  -- Unix time, ms
  updated_at INTEGER NOT NULL
);
CREATE INDEX tasks_ready ON tasks (status, priority DESC, sequence);
)sql";

// The sequence is taken inside the write transaction, so it is the commit
// order; it equals the rowid, which SQLite finds at the end of the table.
constexpr char kInsert[] = R"sql(
INSERT INTO tasks (id, type, payload, status, priority, sequence, attempts,
                   created_at, updated_at)
SELECT next, ?1, ?2, 0, 0, next, 0, ?3, ?3
FROM (SELECT IFNULL(MAX(id), 0) + 1 AS next FROM tasks)
)sql";

// The best pending task: highest priority, then oldest.
constexpr char kSelectNext[] =
    "SELECT id FROM tasks WHERE status = 0 "
    "ORDER BY priority DESC, sequence LIMIT 1";

const std::string kClaim =
    "UPDATE tasks SET status = 1, attempts = attempts + 1, updated_at = ?1 "
    "WHERE id = (" +
    std::string(kSelectNext) + ") RETURNING id";

constexpr char kComplete[] =
    "UPDATE tasks SET status = 2, updated_at = ?2 "
    "WHERE id = ?1 AND status = 1";

static_assert(kPending == 0 && kRunning == 1 && kCompleted == 2,
              "the SQL above spells the states out");

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using DbPtr = std::unique_ptr<sqlite3, DbCloser>;

struct StatementFinalizer {
  void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
};
using StatementPtr = std::unique_ptr<sqlite3_stmt, StatementFinalizer>;

// Maps an SQLite result code to a Status naming `what` failed.
Status Error(sqlite3* db, int rc, const std::string& what) {
  std::string message = "sqlite: " + what + ": " + sqlite3_errstr(rc);
  if (db != nullptr && sqlite3_errcode(db) == rc) {
    message += " (" + std::string(sqlite3_errmsg(db)) + ")";
  }
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status::Busy(message);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return Status::Corruption(message);
    default:
      return Status::IOError(message);
  }
}

// One connection, configured for durability: WAL, synchronous=FULL.
Result<DbPtr> OpenConnection(const std::string& path, bool create) {
  sqlite3* raw = nullptr;
  // NOMUTEX: a connection is used by one thread at a time (the client's).
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX |
              (create ? SQLITE_OPEN_CREATE : 0);
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  DbPtr db(raw);
  if (rc != SQLITE_OK) return Error(db.get(), rc, "open " + path);
  // First, so that the pragmas below also wait for a busy database.
  sqlite3_busy_timeout(db.get(), kBusyTimeoutMs);
  sqlite3_extended_result_codes(db.get(), 1);

  // journal_mode answers with the mode in force; insist on WAL.
  sqlite3_stmt* raw_stmt = nullptr;
  rc = sqlite3_prepare_v2(db.get(), "PRAGMA journal_mode=WAL", -1, &raw_stmt,
                          nullptr);
  StatementPtr journal(raw_stmt);
  if (rc != SQLITE_OK) return Error(db.get(), rc, "prepare journal_mode");
  rc = sqlite3_step(journal.get());
  if (rc != SQLITE_ROW) return Error(db.get(), rc, "PRAGMA journal_mode=WAL");
  std::string mode =
      reinterpret_cast<const char*>(sqlite3_column_text(journal.get(), 0));
  if (mode != "wal") {
    return Status::NotSupported(
        "sqlite: " + path + " refused WAL mode (journal_mode=" + mode + ")");
  }
  journal.reset();

  rc = sqlite3_exec(db.get(), "PRAGMA synchronous=FULL", nullptr, nullptr,
                    nullptr);
  if (rc != SQLITE_OK) return Error(db.get(), rc, "PRAGMA synchronous=FULL");
  return db;
}

Result<StatementPtr> Prepare(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v3(db, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT,
                              &raw, nullptr);
  if (rc != SQLITE_OK) return Error(db, rc, "prepare \"" + sql + "\"");
  return StatementPtr(raw);
}

class SqliteClient final : public PeerClient {
 public:
  // Prepares the statements on `db`.
  static Result<std::unique_ptr<SqliteClient>> Create(DbPtr db) {
    std::unique_ptr<SqliteClient> client(new SqliteClient(std::move(db)));
    sqlite3* raw = client->db_.get();
    struct {
      StatementPtr* slot;
      std::string sql;
    } statements[] = {
        {&client->begin_, "BEGIN IMMEDIATE"},
        {&client->commit_, "COMMIT"},
        {&client->rollback_, "ROLLBACK"},
        {&client->insert_, kInsert},
        {&client->claim_, kClaim},
        {&client->complete_, kComplete},
    };
    for (auto& s : statements) {
      Result<StatementPtr> prepared = Prepare(raw, s.sql);
      if (!prepared.ok()) return prepared.status();
      *s.slot = std::move(prepared).value();
    }
    return client;
  }

  Status Enqueue(std::string_view type, std::string_view payload) override {
    Status s = Begin();
    if (!s.ok()) return s;
    s = Insert(type, payload, NowMs());
    if (!s.ok()) return Abort(s);
    return Commit();
  }

  Status Preload(size_t n, std::string_view type,
                 std::string_view payload) override {
    // One transaction, one sync.
    Status s = Begin();
    if (!s.ok()) return s;
    const int64_t now = NowMs();
    for (size_t i = 0; i < n; ++i) {
      s = Insert(type, payload, now);
      if (!s.ok()) return Abort(s);
    }
    return Commit();
  }

  Status ClaimAndComplete() override {
    // The claim: its own durable transaction, as a worker's would be.
    Status s = Begin();
    if (!s.ok()) return s;
    sqlite3_stmt* claim = claim_.get();
    sqlite3_bind_int64(claim, 1, NowMs());
    int rc = sqlite3_step(claim);
    if (rc == SQLITE_DONE) {  // Nothing pending; nothing written.
      sqlite3_reset(claim);
      return Abort(Status::NotFound("sqlite: no pending task"));
    }
    if (rc != SQLITE_ROW) {
      sqlite3_reset(claim);
      return Abort(Error(db_.get(), rc, "claim"));
    }
    const int64_t id = sqlite3_column_int64(claim, 0);
    rc = sqlite3_step(claim);  // Finishes the statement.
    sqlite3_reset(claim);
    if (rc != SQLITE_DONE) return Abort(Error(db_.get(), rc, "claim"));
    s = Commit();
    if (!s.ok()) return s;

    // The completion: a second durable transaction.
    s = Begin();
    if (!s.ok()) return s;
    sqlite3_stmt* complete = complete_.get();
    sqlite3_bind_int64(complete, 1, id);
    sqlite3_bind_int64(complete, 2, NowMs());
    rc = sqlite3_step(complete);
    sqlite3_reset(complete);
    if (rc != SQLITE_DONE) {
      return Abort(Error(db_.get(), rc, "complete task " + std::to_string(id)));
    }
    if (sqlite3_changes(db_.get()) != 1) {
      return Abort(Status::FailedPrecondition(
          "sqlite: task " + std::to_string(id) +
          " was no longer running when it was completed"));
    }
    return Commit();
  }

 private:
  explicit SqliteClient(DbPtr db) : db_(std::move(db)) {}

  Status Insert(std::string_view type, std::string_view payload, int64_t now) {
    sqlite3_stmt* insert = insert_.get();
    sqlite3_bind_text(insert, 1, type.data(), static_cast<int>(type.size()),
                      SQLITE_STATIC);
    sqlite3_bind_blob(insert, 2, payload.data(),
                      static_cast<int>(payload.size()), SQLITE_STATIC);
    sqlite3_bind_int64(insert, 3, now);
    int rc = sqlite3_step(insert);
    sqlite3_reset(insert);
    sqlite3_clear_bindings(insert);
    return rc == SQLITE_DONE ? Status::OK() : Error(db_.get(), rc, "insert");
  }

  Status Begin() { return Run(begin_.get(), "BEGIN IMMEDIATE"); }
  Status Commit() {
    Status s = Run(commit_.get(), "COMMIT");
    return s.ok() ? s : Abort(s);
  }
  // Rolls back the open transaction, if any, and returns `cause`.
  Status Abort(const Status& cause) {
    if (!sqlite3_get_autocommit(db_.get())) {
      sqlite3_step(rollback_.get());
      sqlite3_reset(rollback_.get());
    }
    return cause;
  }
  Status Run(sqlite3_stmt* stmt, const char* what) {
    int rc = sqlite3_step(stmt);
    sqlite3_reset(stmt);
    return rc == SQLITE_DONE ? Status::OK() : Error(db_.get(), rc, what);
  }

  DbPtr db_;
  // Declared after db_, so finalized before the connection closes.
  StatementPtr begin_, commit_, rollback_, insert_, claim_, complete_;
};

// Fails unless the claim query walks the tasks_ready index, without sorting:
// a claim must not scan the backlog. durable_queue_sqlite asserts the same.
Status CheckClaimPlan(sqlite3* db) {
  Result<StatementPtr> plan =
      Prepare(db, std::string("EXPLAIN QUERY PLAN ") + kSelectNext);
  if (!plan.ok()) return plan.status();
  std::string details;
  int rc;
  while ((rc = sqlite3_step(plan->get())) == SQLITE_ROW) {
    const unsigned char* detail = sqlite3_column_text(plan->get(), 3);
    if (detail != nullptr) {
      details += (details.empty() ? "" : "; ") +
                 std::string(reinterpret_cast<const char*>(detail));
    }
  }
  if (rc != SQLITE_DONE) return Error(db, rc, "EXPLAIN QUERY PLAN");
  if (details.find("INDEX tasks_ready") == std::string::npos ||
      details.find("TEMP B-TREE") != std::string::npos) {
    return Status::FailedPrecondition(
        "sqlite: the claim query does not use the tasks_ready index: " +
        details);
  }
  return Status::OK();
}

class SqlitePeer final : public Peer {
 public:
  std::string name() const override { return "sqlite"; }

  Status Setup(const std::string& workdir) override {
    if (!path_.empty()) {
      return Status::FailedPrecondition("sqlite: Setup called twice");
    }
    const std::string path = workdir + "/queue.db";
    Result<DbPtr> db = OpenConnection(path, /*create=*/true);
    if (!db.ok()) return db.status();
    int rc = sqlite3_exec(db->get(), kSchema, nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return Error(db->get(), rc, "create schema");
    Status s = CheckClaimPlan(db->get());
    if (!s.ok()) return s;
    path_ = path;
    return Status::OK();
  }

  void Teardown() override { path_.clear(); }

  Result<std::unique_ptr<PeerClient>> Connect() override {
    if (path_.empty()) {
      return Status::FailedPrecondition("sqlite: Connect before Setup");
    }
    Result<DbPtr> db = OpenConnection(path_, /*create=*/false);
    if (!db.ok()) return db.status();
    Result<std::unique_ptr<SqliteClient>> client =
        SqliteClient::Create(std::move(db).value());
    if (!client.ok()) return client.status();
    return std::unique_ptr<PeerClient>(std::move(client).value());
  }

  std::string Describe() const override {
    return std::string("sqlite: SQLite ") + sqlite3_libversion() +
           ", journal_mode=WAL, synchronous=FULL (WAL synced per commit), "
           "BEGIN IMMEDIATE per write, busy_timeout=" +
           std::to_string(kBusyTimeoutMs) +
           " ms, one connection per client; claim and completion are one "
           "transaction each";
  }

 private:
  std::string path_;  // The database file; empty unless set up.
};

}  // namespace

std::unique_ptr<Peer> MakeSqlitePeer() {
  return std::make_unique<SqlitePeer>();
}

}  // namespace spool::bench

#else  // !SPOOL_BENCH_HAVE_SQLITE

namespace spool::bench {

std::unique_ptr<Peer> MakeSqlitePeer() {
  return MakeUnavailablePeer("sqlite", "built without SQLite (libsqlite3-dev)");
}

}  // namespace spool::bench

#endif  // SPOOL_BENCH_HAVE_SQLITE
