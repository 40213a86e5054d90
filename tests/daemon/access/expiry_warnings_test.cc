// When a developer lease's guest is told it is about to go (pure timing, no guest).
#include "daemon/access/expiry_warnings.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

TEST_CASE("expiry warnings come at 15 and 2 minutes, once each per expiry", "[access][dev]") {
  const TimePoint expiry = from_unix_ms(1'800'000'000'000);
  ExpiryWarningState st;
  CHECK(due_expiry_warning(st, expiry, expiry - minutes(16)) == 0);
  CHECK(due_expiry_warning(st, expiry, expiry - minutes(15)) == 15);
  CHECK(due_expiry_warning(st, expiry, expiry - minutes(14)) == 0);
  CHECK(due_expiry_warning(st, expiry, expiry - seconds(119)) == 2);
  CHECK(due_expiry_warning(st, expiry, expiry - seconds(30)) == 0);
  CHECK(due_expiry_warning(st, expiry, expiry) == 0);  // over: nothing more to say

  // First seen a minute before the end: one message, the nearer mark.
  ExpiryWarningState late;
  CHECK(due_expiry_warning(late, expiry, expiry - minutes(1)) == 2);
  CHECK(due_expiry_warning(late, expiry, expiry - seconds(50)) == 0);

  // A renew moves the expiry: the marks count again.
  const TimePoint renewed = expiry + minutes(60);
  CHECK(due_expiry_warning(st, renewed, renewed - minutes(15)) == 15);
}

TEST_CASE("the warning names the lease, the minutes left and how to extend it", "[access][dev]") {
  const TimePoint now = from_unix_ms(1'800'000'000'000);
  std::string t = expiry_warning_text("l-0123456789ab", now + seconds(61), now);
  CHECK_THAT(t, Catch::Contains("l-0123456789ab"));
  CHECK_THAT(t, Catch::Contains("ends in 2 minutes"));
  CHECK_THAT(t, Catch::Contains("armhive lease renew l-0123456789ab"));
  CHECK_THAT(expiry_warning_text("l-x", now + seconds(30), now), Catch::Contains("1 minute "));
}

}  // namespace
}  // namespace armhive
