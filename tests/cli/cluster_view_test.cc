#include "cli/cluster_view.h"

#include <catch2/catch.hpp>
#include <sstream>

namespace armhive {
namespace {

TEST_CASE("cluster view says how long ago each member was heard from", "[cli]") {
  CHECK(contact_age_text(0) == "0 s ago");
  CHECK(contact_age_text(2.9) == "2 s ago");
  CHECK(contact_age_text(119.5) == "119 s ago");
  CHECK(contact_age_text(120) == "2 min ago");
  CHECK(contact_age_text(7199) == "119 min ago");
  CHECK(contact_age_text(7200) == "2 h ago");
  CHECK(contact_age_text(3 * 86400 + 5) == "3 d ago");
  CHECK(contact_age_text(-1) == "0 s ago");  // a clock read twice never shows the future
}

TEST_CASE("cluster view lists the members then who leads since when", "[cli]") {
  ClusterDto c;
  c.store = "postgresql";
  c.leader =
      ClusterLeaderDto{"armhived@hc1/1234", "http://hc1:8470", 3, "2026-12-09T08:12:40.118Z"};
  c.members.push_back({"armhived@hc1/1234", "http://hc1:8470", "leader", "2026-12-09T08:12:30.000Z",
                       "2026-12-09T08:13:00.000Z", 1.2});
  c.members.push_back({"armhived@tx1/877", "http://tx1:8470", "standby", "2026-12-09T08:12:31.000Z",
                       "2026-12-09T08:12:01.000Z", 61});
  std::ostringstream out;
  print_cluster(c, out);
  const std::string text = out.str();
  INFO(text);
  std::istringstream lines(text);
  std::string header, first, second, leads;
  std::getline(lines, header);
  std::getline(lines, first);
  std::getline(lines, second);
  std::getline(lines, leads);
  CHECK(header.find("HOLDER") == 0);
  CHECK(header.find("LAST CONTACT") != std::string::npos);
  CHECK(first.find("armhived@hc1/1234") == 0);
  CHECK(first.find("leader") != std::string::npos);
  CHECK(first.find("1 s ago") != std::string::npos);
  CHECK(second.find("armhived@tx1/877") == 0);
  CHECK(second.find("standby") != std::string::npos);
  CHECK(second.find("61 s ago") != std::string::npos);
  CHECK(leads == "armhived@hc1/1234 leads (epoch 3) since 2026-12-09T08:12:40.118Z");
}

TEST_CASE("cluster view of one armhived on SQLite says there is no cluster", "[cli]") {
  ClusterDto c;
  c.store = "sqlite";
  c.leader =
      ClusterLeaderDto{"armhived@hc1/42", "http://127.0.0.1:8470", 0, "2026-12-09T08:00:00.000Z"};
  c.members.push_back({"armhived@hc1/42", "http://127.0.0.1:8470", "leader",
                       "2026-12-09T08:00:00.000Z", "2026-12-09T08:10:00.000Z", 0});
  std::ostringstream out;
  print_cluster(c, out);
  CHECK(out.str().find("armhived@hc1/42") != std::string::npos);
  CHECK(out.str().find("one armhived (SQLite): no cluster\n") != std::string::npos);
  CHECK(out.str().find("leads (epoch") == std::string::npos);
}

}  // namespace
}  // namespace armhive
