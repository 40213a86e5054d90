#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "daemon/store/database.h"

namespace armhive {

// One table of armhived's state, as `armhived migrate` (daemon/store/state_migration.h) treats
// it.
struct StateTable {
  std::string_view name;
  // Its AUTOINCREMENT key (a BIGSERIAL on PostgreSQL), whose sequence must move past the ids a
  // copy brings; empty: none.
  std::string_view serial_column;
  // False for what a new database must not inherit: the leader lease (the new cluster elects
  // its own leader).
  bool copied = true;
};

// One schema component (Database::migrate's `component`): the very steps its store migrates
// with, and the tables those steps create.
struct StateComponent {
  std::string_view name;
  const std::vector<std::string>* steps;
  // The component exists only on PostgreSQL (the leader lease); SQLite never creates it.
  bool postgres_only = false;
  // In an order that satisfies the foreign keys: a table comes after those it references.
  std::vector<StateTable> tables;
};

// Every component of armhived's state, each store's, in an order that satisfies the foreign
// keys between components. This is the one list: the daemon migrates through it at start and
// `armhived migrate` creates and copies through it, so a store whose component is missing here
// is caught by the test that compares a freshly started armhived's tables with it
// (tests/daemon/service_itest.cc). A new store adds its component here.
const std::vector<StateComponent>& state_components();

// The tables every Database makes for its own bookkeeping (Database::migrate's
// schema_migrations, armhive_meta): recreated by migrating, never copied.
const std::vector<std::string_view>& bookkeeping_tables();

// Applies every component's steps not yet applied to `db` (those of its dialect), as each
// store's open() would; a database written by a newer armhived is refused (kConflict).
Status migrate_state(Database& db);

// Each component's steps, in order, defined beside the store that migrates with them (the
// leases' are SqliteLeaseStore::schema_steps()). Append-only: never edit a released step.
const std::vector<std::string>& token_schema_steps();   // token_store.cc, "tokens"
const std::vector<std::string>& audit_schema_steps();   // audit_log.cc, "audit"
const std::vector<std::string>& host_schema_steps();    // sqlite_host_store.cc, "hosts"
const std::vector<std::string>& health_schema_steps();  // sqlite_health_store.cc, "health"
const std::vector<std::string>& leader_schema_steps();  // pg_leader_lease.cc, "leader"
// "startups", daemon/startup's StartupRunner (which migrates with it): defined in
// state_schema.cc, because daemon/store may not include daemon/startup (CONTRIBUTING.md).
const std::vector<std::string>& startup_schema_steps();

}  // namespace armhive
