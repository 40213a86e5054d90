#include "daemon/core/leader_term.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

using namespace std::chrono_literals;
using Time = LeaderTerm::Time;

const Time kT0 = Time() + 1000s;

TEST_CASE("leader term: nobody acts before a renewal came back theirs", "[core][leader]") {
  LeaderTerm term(10s);
  CHECK_FALSE(term.acting(kT0));
  term.renewed(kT0, /*ours=*/false, 0, "armhived@hc1");
  CHECK_FALSE(term.acting(kT0 + 1s));
  CHECK(term.other_holder() == "armhived@hc1");
}

TEST_CASE("leader term: a leader acts for three quarters of the lease from the renewal's send time",
          "[core][leader]") {
  LeaderTerm term(10s);
  // The reply came 3 s after the renewal was sent: the term counts from the send time.
  term.renewed(kT0, /*ours=*/true, 4, "");
  CHECK(term.epoch() == 4);
  CHECK(term.acting(kT0 + 3s));
  CHECK(term.acting(kT0 + 7499ms));
  CHECK_FALSE(term.acting(kT0 + 7500ms));  // before the database's expiry at kT0 + 10 s or later
  CHECK(term.next_renewal(kT0) == kT0 + 2s);
}

TEST_CASE("leader term: failed renewals let the term run out, a later success extends it",
          "[core][leader]") {
  LeaderTerm term(10s);
  term.renewed(kT0, true, 1, "");
  // The renewals sent at +2 s and +4 s failed: nothing is applied.
  CHECK(term.acting(kT0 + 5s));
  term.renewed(kT0 + 6s, true, 1, "");
  CHECK(term.acting(kT0 + 13s));
  CHECK_FALSE(term.acting(kT0 + 13s + 500ms));
}

TEST_CASE("leader term: a paused leader is not acting when it runs again", "[core][leader]") {
  LeaderTerm term(10s);
  term.renewed(kT0, true, 1, "");
  // SIGSTOP for a minute: whatever runs first after SIGCONT asks acting() and is refused,
  // before the renewal thread has noticed anything.
  CHECK_FALSE(term.acting(kT0 + 60s));
  // Another instance took over meanwhile: our next renewal says so, and we do not act again.
  term.renewed(kT0 + 60s, false, 0, "armhived@tx1");
  CHECK_FALSE(term.acting(kT0 + 60s));
  CHECK(term.epoch() == 1);  // the epoch of our last term, for the log
}

TEST_CASE("leader term: losing the lease ends the term at once", "[core][leader]") {
  LeaderTerm term(10s);
  term.renewed(kT0, true, 2, "");
  term.renewed(kT0 + 2s, false, 0, "armhived@tx1");
  CHECK_FALSE(term.acting(kT0 + 2s));
  // Taking it back later is a new term with a new epoch.
  term.renewed(kT0 + 30s, true, 3, "");
  CHECK(term.acting(kT0 + 31s));
  CHECK(term.epoch() == 3);
}

}  // namespace
}  // namespace armhive
