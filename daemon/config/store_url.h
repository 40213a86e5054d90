#pragma once

#include <string>

#include "base/status.h"

namespace armhive {

// [store] url: empty (SQLite) or a postgresql:// (or postgres://) connection URI without a
// password and without blanks; kInvalidArgument with field "store.url" otherwise. `armhived
// migrate --to` checks its URL with it too. Pure: any thread.
Status check_store_url(const std::string& url);

}  // namespace armhive
