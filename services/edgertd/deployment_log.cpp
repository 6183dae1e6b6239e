#include "deployment_log.h"

#include <sqlite3.h>

#include <stdexcept>

namespace edgert::daemon {
namespace {

struct Stmt {
  sqlite3* db;
  sqlite3_stmt* s = nullptr;
  Stmt(sqlite3* d, const char* sql) : db(d) {
    if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK)
      throw std::runtime_error(std::string("deployments: ") + sqlite3_errmsg(db));
  }
  ~Stmt() { sqlite3_finalize(s); }
  Stmt& text(int i, const std::string& v) {
    sqlite3_bind_text(s, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& text_or_null(int i, const std::string& v) {
    if (v.empty()) sqlite3_bind_null(s, i);
    else text(i, v);
    return *this;
  }
  Stmt& integer(int i, int64_t v) {
    sqlite3_bind_int64(s, i, v);
    return *this;
  }
  void run() {
    if (sqlite3_step(s) != SQLITE_DONE) throw std::runtime_error(std::string("deployments: ") + sqlite3_errmsg(db));
  }
  bool row() {
    int r = sqlite3_step(s);
    if (r == SQLITE_ROW) return true;
    if (r != SQLITE_DONE) throw std::runtime_error(std::string("deployments: ") + sqlite3_errmsg(db));
    return false;
  }
  std::string col_text(int i) {
    const unsigned char* t = sqlite3_column_text(s, i);
    return t ? reinterpret_cast<const char*>(t) : "";
  }
  nlohmann::json col(int i) {
    switch (sqlite3_column_type(s, i)) {
      case SQLITE_NULL: return nullptr;
      case SQLITE_INTEGER: return sqlite3_column_int64(s, i);
      default: return col_text(i);
    }
  }
};

}  // namespace

void DeploymentLog::add_engine(const InstalledEngine& e) {
  Stmt(store_.handle(),
       "INSERT INTO engines (sha256, path, board, size, signer, installed_at) VALUES (?, ?, ?, ?, ?, ?) "
       "ON CONFLICT(sha256) DO UPDATE SET path = excluded.path, signer = excluded.signer")
      .text(1, e.sha256).text(2, e.path).text(3, e.board).integer(4, static_cast<int64_t>(e.size))
      .text_or_null(5, e.signer).integer(6, static_cast<int64_t>(realtime_now_ns())).run();
}

nlohmann::json DeploymentLog::engines() const {
  Stmt q(store_.handle(), "SELECT sha256, path, board, size, signer, installed_at FROM engines ORDER BY installed_at DESC");
  nlohmann::json out = nlohmann::json::array();
  while (q.row())
    out.push_back({{"sha256", q.col(0)}, {"path", q.col(1)}, {"board", q.col(2)}, {"size", q.col(3)},
                   {"signer", q.col(4)}, {"installed_at_ns", q.col(5)}});
  return out;
}

int64_t DeploymentLog::begin(const std::string& pipeline, const std::string& sha256, const std::string& previous,
                             const std::string& kind) {
  Stmt(store_.handle(),
       "INSERT INTO deployments (pipeline, sha256, previous_sha256, state, step, message, started_at) "
       "VALUES (?, ?, ?, 'in_progress', ?, NULL, ?)")
      .text(1, pipeline).text(2, sha256).text_or_null(3, previous).text(4, kind)
      .integer(5, static_cast<int64_t>(realtime_now_ns())).run();
  return sqlite3_last_insert_rowid(store_.handle());
}

void DeploymentLog::step(int64_t id, const std::string& step, const std::string& message) {
  Stmt(store_.handle(), "UPDATE deployments SET step = ?, message = ? WHERE id = ?")
      .text(1, step).text(2, message).integer(3, id).run();
}

void DeploymentLog::finish(int64_t id, const std::string& state, const std::string& step, const std::string& message) {
  Stmt(store_.handle(), "UPDATE deployments SET state = ?, step = ?, message = ?, finished_at = ? WHERE id = ?")
      .text(1, state).text(2, step).text(3, message).integer(4, static_cast<int64_t>(realtime_now_ns()))
      .integer(5, id).run();
}

void DeploymentLog::supersede_active(const std::string& pipeline, int64_t except_id) {
  Stmt(store_.handle(), "UPDATE deployments SET state = 'superseded' WHERE pipeline = ? AND state = 'active' AND id != ?")
      .text(1, pipeline).integer(2, except_id).run();
}

int DeploymentLog::close_interrupted() {
  Stmt(store_.handle(),
       "UPDATE deployments SET state = 'interrupted', message = 'edgertd stopped during step ' || "
       "coalesce(step, '?') || '; the running engine stayed as recorded', finished_at = ? WHERE state = 'in_progress'")
      .integer(1, static_cast<int64_t>(realtime_now_ns())).run();
  return sqlite3_changes(store_.handle());
}

nlohmann::json DeploymentLog::history(const std::string& pipeline, int limit) const {
  Stmt q(store_.handle(),
         "SELECT id, sha256, previous_sha256, state, step, message, started_at, finished_at FROM deployments "
         "WHERE pipeline = ? ORDER BY id DESC LIMIT ?");
  q.text(1, pipeline).integer(2, limit);
  nlohmann::json out = nlohmann::json::array();
  while (q.row())
    out.push_back({{"id", q.col(0)}, {"sha256", q.col(1)}, {"previous_sha256", q.col(2)}, {"state", q.col(3)},
                   {"step", q.col(4)}, {"message", q.col(5)}, {"started_at_ns", q.col(6)}, {"finished_at_ns", q.col(7)}});
  return out;
}

}  // namespace edgert::daemon
