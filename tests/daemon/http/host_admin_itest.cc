// POST /v1/hosts and DELETE /v1/hosts/{name}: admin only, the body checked field by field
// (problem+json naming it) before anything is connected, the service's refusals passed on with
// their status (503 for a host libvirt cannot reach, 409 for a host that still has leases),
// the audit log told.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "daemon/http/convert.h"
#include "tests/daemon/http/api_fixture.h"

namespace armhive {
namespace {

using nlohmann::json;

json problem_of(const HttpReply& r, int status) {
  INFO(r.body);
  CHECK(r.status == status);
  CHECK(r.content_type == "application/problem+json");
  return json::parse(r.body, nullptr, false);
}

TEST_CASE("http: an admin adds and removes a libvirt host", "[http][hosts]") {
  ApiFixture f(ApiFixture::WithHostAdmin{});
  auto added = [&] { return f.host_admin->added(); };

  const json tx1 = {{"name", "tx1"},
                    {"libvirt_uri", "qemu+ssh://armhive@tx1.lab/system"},
                    {"labels", {{"board", "thunderx"}}},
                    {"cpus", {{"housekeeping", "0-1"}, {"dedicated", "2-47"}}},
                    {"l2_clusters", {"0-1"}},
                    {"network_guard", "host"}};
  // Only admin tokens.
  CHECK(f.request("POST", "/v1/hosts", f.ci_b, tx1.dump()).status == 403);
  CHECK(f.request("POST", "/v1/hosts", "", tx1.dump()).status == 401);
  CHECK(added().empty());

  auto created = f.request("POST", "/v1/hosts", f.admin, tx1.dump());
  INFO(created.body);
  REQUIRE(created.status == 201);
  CHECK(created.headers["Location"] == "/v1/hosts/tx1");
  json host = json::parse(created.body);
  CHECK(host["hostname"] == "tx1");
  CHECK(host["uri"] == "qemu+ssh://armhive@tx1.lab/system");
  CHECK(host["labels"]["board"] == "thunderx");
  REQUIRE(added().size() == 1);
  const HostSpec spec = added()[0];
  CHECK(spec.housekeeping_cpus == std::optional<std::string>("0-1"));
  CHECK(spec.dedicated_cpus == std::optional<std::string>("2-47"));
  CHECK(spec.l2_clusters == std::vector<std::string>{"0-1"});
  CHECK(spec.network_guard == "host");
  CHECK(spec.field_prefix.empty());  // errors name the body's keys
  json listed = json::parse(f.request("GET", "/v1/hosts", f.reader).body);
  CHECK(listed["items"].size() == 2);
  // The page lists the fleet first: each host with its state, labels and libvirt URI.
  auto page = f.request("GET", "/ui/hosts", f.reader);
  CHECK(page.body.find("<a href=\"#host-tx1\">tx1</a></td><td>ok</td>") != std::string::npos);
  CHECK(page.body.find("board=thunderx</td><td><code>qemu+ssh://armhive@tx1.lab/system") !=
        std::string::npos);
  CHECK(page.body.find("<section id=\"host-tx1\">") != std::string::npos);

  // Bad bodies are refused naming the field, before anything is connected.
  CHECK(problem_of(f.request("POST", "/v1/hosts", f.admin, R"({"libvirt_uri": "qemu:///system"})"),
                   400)["field"] == "name");
  CHECK(problem_of(f.request("POST", "/v1/hosts", f.admin, R"({"name": "x", "uri": "qemu:///s"})"),
                   400)["field"] == "uri");
  CHECK(problem_of(f.request("POST", "/v1/hosts", f.admin,
                             R"({"name": "x", "libvirt_uri": "q:///s", "cpus": {"spare": "1"}})"),
                   400)["field"] == "cpus.spare");
  CHECK(problem_of(f.request("POST", "/v1/hosts", f.admin, "[1]"), 400).is_object());
  CHECK(added().size() == 1);

  // libvirt cannot reach it: 503 with the host and libvirt's words.
  json down = problem_of(
      f.request("POST", "/v1/hosts", f.admin,
                json{{"name", "hc9"}, {"libvirt_uri", "qemu+tls://unreachable/system"}}.dump()),
      503);
  CHECK_THAT(down["detail"].get<std::string>(), Catch::Contains("host hc9"));
  CHECK_THAT(down["detail"].get<std::string>(), Catch::Contains("Name or service not known"));

  // Removal: refused while busy, saying what to do; done otherwise.
  json busy = problem_of(f.request("DELETE", "/v1/hosts/busy", f.admin), 409);
  CHECK_THAT(busy["detail"].get<std::string>(), Catch::Contains("drain it first"));
  CHECK(f.request("DELETE", "/v1/hosts/tx1", f.ci_b).status == 403);
  auto removed = f.request("DELETE", "/v1/hosts/tx1", f.admin);
  CHECK(removed.status == 204);
  listed = json::parse(f.request("GET", "/v1/hosts", f.reader).body);
  CHECK(listed["items"].size() == 1);
  auto audit = f.audit->recent(50);
  REQUIRE(audit.is_ok());
  bool add_seen = false, remove_seen = false;
  for (const auto& e : *audit) {
    add_seen = add_seen || (e.action == "host.add" && e.detail.find("host=tx1") == 0);
    remove_seen = remove_seen || (e.action == "host.remove" && e.detail == "host=tx1");
  }
  CHECK(add_seen);
  CHECK(remove_seen);
}

TEST_CASE("http: a host never reached is listed unreachable with libvirt's error, no core map",
          "[http][hosts]") {
  // As armhived lists a configured host it has not reached since it started
  // (HostRegistry::view_of).
  ApiFixture f(true, [](HttpOptions& o) {
    o.waiting_hosts = [] {
      HostView v;
      v.topology.hostname = "tx9";
      v.uri = "qemu+tls://tx9.lab/system";
      v.labels = {{"board", "thunderx"}};
      v.state = HostState::kUnreachable;
      v.last_error = "host tx9 (qemu+tls://tx9.lab/system): Connection refused";
      v.unreachable_since = std::chrono::system_clock::now();
      return std::vector<HostView>{v};
    };
  });
  for (const std::string& who : {f.admin, f.reader}) {  // not the admin's alone
    auto r = f.request("GET", "/v1/hosts", who);
    REQUIRE(r.status == 200);
    json items = json::parse(r.body)["items"];
    REQUIRE(items.size() == 2);
    CHECK(items[0]["hostname"] != "tx9");  // the driven hosts first
    const json& tx9 = items[1];
    CHECK(tx9["hostname"] == "tx9");
    CHECK(tx9["state"] == "unreachable");
    CHECK(tx9["connected"] == false);
    CHECK(tx9["accel"] == "unknown");
    CHECK(tx9["cores"].empty());
    CHECK(tx9["labels"]["board"] == "thunderx");
    CHECK_THAT(tx9["last_error"].get<std::string>(), Catch::Contains("Connection refused"));
    CHECK(tx9.contains("unreachable_since"));
  }
  // The page names it in the fleet's table and its section, with the error and no map.
  auto page = f.request("GET", "/ui/hosts", f.reader);
  INFO(page.body);
  CHECK(page.body.find(R"(<a href="#host-tx9">tx9</a>)"
                       "</td><td><b>unreachable</b></td><td>not "
                       "known yet</td>") != std::string::npos);
  const size_t section = page.body.find(R"(<section id="host-tx9">)");
  REQUIRE(section != std::string::npos);
  const std::string tx9 = page.body.substr(section);
  CHECK(tx9.find("never reached since") != std::string::npos);
  CHECK(tx9.find("Last error: host tx9 (qemu+tls://tx9.lab/system): Connection refused") !=
        std::string::npos);
  CHECK(tx9.find("<svg") == std::string::npos);
  // Its core map cannot be drawn: 503 saying why, not an empty picture.
  json no_map = problem_of(f.request("GET", "/v1/hosts?format=svg&host=tx9", f.reader), 503);
  CHECK_THAT(no_map["detail"].get<std::string>(), Catch::Contains("has not been reached yet"));
}

TEST_CASE("http: adding hosts is 503 where armhived does not offer it", "[http][hosts]") {
  ApiFixture f;
  json p = problem_of(f.request("POST", "/v1/hosts", f.admin,
                                R"({"name": "tx1", "libvirt_uri": "qemu:///system"})"),
                      503);
  CHECK(p.is_object());
  problem_of(f.request("DELETE", "/v1/hosts/tx1", f.admin), 503);
}

// Issue 33 (finding 10): POST /v1/hosts took any URI libvirt's client knows, and some make it
// run a program (qemu+ext://?command=, ?netcat=) or use a socket or key file of the client's
// choosing as armhived's user.
TEST_CASE("http: POST /v1/hosts refuses URIs that run or read what the client names",
          "[http][hosts][hostile]") {
  ApiFixture f(ApiFixture::WithHostAdmin{});
  for (const char* uri :
       {"qemu+ext:///system?command=/usr/bin/touch", "qemu+unix:///system?socket=/tmp/evil.sock",
        "qemu+ssh://armhive@tx1.lab/system?command=id", "qemu+ssh://tx1.lab/system?netcat=/tmp/nc",
        "qemu+tls://tx1.lab/system?keyfile=/etc/shadow", "test:///etc/passwd"}) {
    INFO(uri);
    json p = problem_of(f.request("POST", "/v1/hosts", f.admin,
                                  json{{"name", "evil"}, {"libvirt_uri", uri}}.dump()),
                        400);
    CHECK(p["field"] == "libvirt_uri");
  }
  CHECK(f.host_admin->added().empty());  // nothing was connected
}

}  // namespace
}  // namespace armhive
