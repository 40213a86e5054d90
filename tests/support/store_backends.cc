#include "tests/support/store_backends.h"

#include <stdlib.h>

#include <filesystem>

#include "daemon/store/pg_database.h"

namespace armhive {

Result<std::unique_ptr<StoreBackend>> StoreBackend::make(const std::string& kind) {
  std::unique_ptr<StoreBackend> b(new StoreBackend(kind));
  if (kind == "sqlite") {
    char tmpl[] = "/tmp/armhive-store-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return unavailable("mkdtemp failed");
    b->sqlite_dir_ = tmpl;
  } else if (kind == "postgresql") {
    ARMHIVE_ASSIGN_OR_RETURN(b->pg_, TestPostgresDatabase::make());
  } else {
    return invalid_argument("kind", "is neither sqlite nor postgresql: " + kind);
  }
  return b;
}

StoreBackend::~StoreBackend() {
  if (!sqlite_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(sqlite_dir_, ec);
  }
}

Result<std::unique_ptr<Database>> StoreBackend::open() const {
  if (pg_) {
    ARMHIVE_ASSIGN_OR_RETURN(auto db, PgDatabase::connect(pg_->url()));
    return std::unique_ptr<Database>(std::move(db));
  }
  return Database::open(sqlite_dir_ + "/state.db");
}

}  // namespace armhive
