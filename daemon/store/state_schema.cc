#include "daemon/store/state_schema.h"

#include "daemon/store/sqlite_lease_store.h"

namespace armhive {
namespace {

// Append-only (Database::migrate): never edit a released step.
const std::vector<std::string> kStartupSteps = {R"sql(
CREATE TABLE startups (
  lease_id TEXT PRIMARY KEY,
  state TEXT NOT NULL,
  pid INTEGER NOT NULL,
  status TEXT NOT NULL
);
)sql"};

}  // namespace

const std::vector<std::string>& startup_schema_steps() { return kStartupSteps; }

const std::vector<StateComponent>& state_components() {
  static const std::vector<StateComponent> kComponents = {
      {"leases",
       &SqliteLeaseStore::schema_steps(),
       false,
       {{"leases", "n"},
        {"lease_history", ""},
        {"vms", ""},
        {"host_admin", ""},
        {"lease_usage", ""}}},
      {"tokens",
       &token_schema_steps(),
       false,
       {{"tokens", ""}, {"idempotency_keys", ""}, {"server_secrets", ""}}},
      {"audit", &audit_schema_steps(), false, {{"audit", "id"}}},
      {"hosts", &host_schema_steps(), false, {{"hosts", "n"}, {"host_capabilities", ""}}},
      {"health", &health_schema_steps(), false, {{"health_results", "id"}}},
      {"startups", &kStartupSteps, false, {{"startups", ""}}},
      {"leader",
       &leader_schema_steps(),
       true,
       {{"leader", "", /*copied=*/false}, {"cluster_members", "", /*copied=*/false}}},
  };
  return kComponents;
}

const std::vector<std::string_view>& bookkeeping_tables() {
  static const std::vector<std::string_view> kTables = {"schema_migrations", "armhive_meta"};
  return kTables;
}

Status migrate_state(Database& db) {
  for (const StateComponent& c : state_components()) {
    if (c.postgres_only && db.dialect() != Database::Dialect::kPostgres) continue;
    ARMHIVE_RETURN_IF_ERROR(db.migrate(c.name, *c.steps));
  }
  return Status::ok();
}

}  // namespace armhive
