#include "daemon/store/sqlite_host_store.h"

#include <nlohmann/json.hpp>

#include "daemon/store/state_schema.h"

namespace armhive {
namespace {

using nlohmann::json;

// Append-only (Database::migrate): never edit a released step.
const std::vector<std::string> kSchema = {R"sql(
CREATE TABLE hosts (
  n INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL UNIQUE,
  spec TEXT NOT NULL
);
)sql",
                                          R"sql(
CREATE TABLE host_capabilities (
  name TEXT PRIMARY KEY,
  xml TEXT NOT NULL
);
)sql"};

json to_json(const HostSpec& h) {
  json j = {{"name", h.name},
            {"libvirt_uri", h.libvirt_uri},
            {"labels", h.labels},
            {"l2_clusters", h.l2_clusters},
            {"vm_dir", h.vm_dir},
            {"image_dir", h.image_dir},
            {"network_guard", h.network_guard}};
  json cpus = json::object();
  if (h.housekeeping_cpus) cpus["housekeeping"] = *h.housekeeping_cpus;
  if (h.dedicated_cpus) cpus["dedicated"] = *h.dedicated_cpus;
  if (h.shared_cpus) cpus["shared"] = *h.shared_cpus;
  j["cpus"] = cpus;
  return j;
}

// Our own rows: a malformed one is reported, never thrown.
Result<HostSpec> from_json(const std::string& name, const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& why) {
    return Status(ErrorCode::kInternal, "hosts row '" + name + "': " + why);
  };
  if (!j.is_object()) return bad("not a JSON object");
  HostSpec h;
  h.field_prefix.clear();
  auto str = [&](const char* key, std::string& out) -> bool {
    auto it = j.find(key);
    if (it == j.end()) return true;
    if (!it->is_string()) return false;
    out = it->get<std::string>();
    return true;
  };
  if (!str("name", h.name) || !str("libvirt_uri", h.libvirt_uri) || !str("vm_dir", h.vm_dir) ||
      !str("image_dir", h.image_dir) || !str("network_guard", h.network_guard)) {
    return bad("a field is not a string");
  }
  if (auto it = j.find("labels"); it != j.end()) {
    if (!it->is_object()) return bad("labels is not an object");
    for (const auto& [k, v] : it->items()) {
      if (!v.is_string()) return bad("label " + k + " is not a string");
      h.labels[k] = v.get<std::string>();
    }
  }
  if (auto it = j.find("l2_clusters"); it != j.end()) {
    if (!it->is_array()) return bad("l2_clusters is not an array");
    for (const json& c : *it) {
      if (!c.is_string()) return bad("l2_clusters holds a non-string");
      h.l2_clusters.push_back(c.get<std::string>());
    }
  }
  if (auto it = j.find("cpus"); it != j.end()) {
    if (!it->is_object()) return bad("cpus is not an object");
    for (auto [key, out] :
         {std::pair<const char*, std::optional<std::string>*>{"housekeeping", &h.housekeeping_cpus},
          {"dedicated", &h.dedicated_cpus},
          {"shared", &h.shared_cpus}}) {
      auto c = it->find(key);
      if (c == it->end()) continue;
      if (!c->is_string()) return bad(std::string("cpus.") + key + " is not a string");
      *out = c->get<std::string>();
    }
  }
  if (h.name != name) return bad("its spec names '" + h.name + "'");
  return h;
}

}  // namespace

const std::vector<std::string>& host_schema_steps() { return kSchema; }

Result<std::unique_ptr<SqliteHostStore>> SqliteHostStore::open(Database& db) {
  ARMHIVE_RETURN_IF_ERROR(db.migrate("hosts", kSchema));
  return std::unique_ptr<SqliteHostStore>(new SqliteHostStore(db));
}

Result<std::vector<HostSpec>> SqliteHostStore::list() {
  ARMHIVE_ASSIGN_OR_RETURN(std::vector<SqlRow> rows,
                           db_.query("SELECT name, spec FROM hosts ORDER BY n"));
  std::vector<HostSpec> out;
  for (const SqlRow& r : rows) {
    ARMHIVE_ASSIGN_OR_RETURN(HostSpec h, from_json(sql_text(r[0]), sql_text(r[1])));
    out.push_back(std::move(h));
  }
  return out;
}

Status SqliteHostStore::put(const HostSpec& spec) {
  return db_.execute(
      "INSERT INTO hosts (name, spec) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET "
      "spec = excluded.spec",
      {spec.name, to_json(spec).dump()});
}

Status SqliteHostStore::remove(const std::string& name) {
  ARMHIVE_RETURN_IF_ERROR(db_.execute("DELETE FROM hosts WHERE name = ?", {name}));
  return db_.execute("DELETE FROM host_capabilities WHERE name = ?", {name});
}

Result<std::map<std::string, std::string>> SqliteHostStore::capabilities() {
  ARMHIVE_ASSIGN_OR_RETURN(std::vector<SqlRow> rows,
                           db_.query("SELECT name, xml FROM host_capabilities"));
  std::map<std::string, std::string> out;
  for (const SqlRow& r : rows) out[sql_text(r[0])] = sql_text(r[1]);
  return out;
}

Status SqliteHostStore::put_capabilities(const std::string& name, const std::string& xml) {
  return db_.execute(
      "INSERT INTO host_capabilities (name, xml) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET "
      "xml = excluded.xml",
      {name, xml});
}

}  // namespace armhive
