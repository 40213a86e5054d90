// The streaming exec against a scripted guest agent that behaves like qemu-ga on glibc: files
// opened "w+", reads from a position with sticky end-of-file (only a seek clears it), a process
// whose output appears between status polls.
#include "daemon/virt/guest_exec_stream.h"

#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>

#include "base/base64.h"
#include "daemon/virt/guest_agent_reply.h"

namespace armhive {
namespace {

using nlohmann::json;

struct ScriptedAgent {
  struct File {
    std::string path, data;
    size_t pos = 0;
    bool eof = false;  // sticky, as glibc's
  };
  std::map<int64_t, File> files;
  int64_t next_handle = 1000;
  std::string out_path, err_path;
  std::vector<std::string> argv;  // what /bin/sh got
  std::string input;
  // One step per guest-exec-status: {stdout to append, stderr to append}; the process exits
  // (with exit_code) after the last step unless `forever`.
  std::vector<std::pair<std::string, std::string>> steps;
  size_t step = 0;
  int exit_code = 0;
  bool forever = false;
  // After the exit a child left behind keeps appending to stdout: every read finds more.
  bool endless_output = false;
  bool exited = false;
  int reads = 0;
  bool killed = false;
  int seeks = 0;
  std::vector<std::string> removed;
  int closed = 0;

  File* by_path(const std::string& p) {
    for (auto& [h, f] : files)
      if (f.path == p) return &f;
    return nullptr;
  }

  Result<std::string> operator()(const std::string& cmd, std::chrono::milliseconds) {
    json c = json::parse(cmd);
    const std::string ex = c["execute"];
    const json& a = c["arguments"];
    if (ex == "guest-file-open") {
      REQUIRE(a["mode"] == "w+");
      files[next_handle] = {a["path"], "", 0, false};
      return json{{"return", next_handle++}}.dump();
    }
    if (ex == "guest-exec") {
      if (a["path"] == "/bin/sh" && a["arg"].size() == 4 && a["arg"][2] == "armhive-kill") {
        // The command's whole process group, by its pid.
        CHECK(a["arg"][3] == "77");
        CHECK(a["arg"][1].get<std::string>().find("kill -9 \"-$1\"") != std::string::npos);
        killed = true;
        return json{{"return", {{"pid", 2}}}}.dump();
      }
      if (a["path"] == "/bin/rm") {
        for (size_t i = 1; i < a["arg"].size(); ++i) removed.push_back(a["arg"][i]);
        return json{{"return", {{"pid", 3}}}}.dump();
      }
      REQUIRE(a["path"] == "/bin/sh");
      REQUIRE(a["capture-output"] == false);
      std::vector<std::string> args = a["arg"];
      REQUIRE(args.size() >= 6);
      CHECK(args[0] == "-c");
      out_path = args[3];
      err_path = args[4];
      argv.assign(args.begin() + 5, args.end());
      if (a.contains("input-data"))
        input = *base64_decode("in", a["input-data"].get<std::string>());
      return json{{"return", {{"pid", 77}}}}.dump();
    }
    if (ex == "guest-exec-status") {
      CHECK(a["pid"] == 77);
      if (killed) return json{{"return", {{"exited", true}, {"signal", 9}}}}.dump();
      if (step < steps.size()) {
        by_path(out_path)->data += steps[step].first;
        by_path(err_path)->data += steps[step].second;
        ++step;
        return json{{"return", {{"exited", false}}}}.dump();
      }
      if (forever) return json{{"return", {{"exited", false}}}}.dump();
      exited = true;
      return json{{"return", {{"exited", true}, {"exitcode", exit_code}}}}.dump();
    }
    File& f = files.at(a["handle"].get<int64_t>());
    if (ex == "guest-file-seek") {
      ++seeks;
      f.pos = a["offset"].get<size_t>();
      f.eof = false;
      return json{{"return", {{"position", f.pos}, {"eof", false}}}}.dump();
    }
    if (ex == "guest-file-read") {
      // Bounds a drain that would never end, so that it fails here instead of hanging.
      if (++reads > 5000) return internal_error("the drain never ended");
      size_t want = a["count"];
      if (endless_output && exited && f.path == out_path) f.data += std::string(want, 'y');
      std::string got;
      if (!f.eof) {
        got = f.data.substr(std::min(f.pos, f.data.size()), want);
        f.pos += got.size();
        if (got.size() < want) f.eof = true;
      }
      json r = {{"count", got.size()}, {"eof", f.eof}};
      if (!got.empty()) r["buf-b64"] = base64_encode(got);
      return json{{"return", r}}.dump();
    }
    if (ex == "guest-file-close") {
      ++closed;
      return json{{"return", json::object()}}.dump();
    }
    FAIL("unexpected agent command " << cmd);
    return internal_error("unexpected");
  }
};

struct RecordingSink : ExecSink {
  std::vector<std::pair<ExecOutputStream, std::string>> chunks;
  bool was_started = false;
  int cancel_after_polls = -1;  // -1: never
  int polls = 0;
  void started() override { was_started = true; }
  void output(ExecOutputStream s, std::string_view d) override {
    CHECK(was_started);
    chunks.emplace_back(s, std::string(d));
  }
  bool cancelled() override { return cancel_after_polls >= 0 && ++polls > cancel_after_polls; }
  std::string all(ExecOutputStream s) const {
    std::string out;
    for (const auto& [k, d] : chunks)
      if (k == s) out += d;
    return out;
  }
};

ExecStreamOptions fast() {
  ExecStreamOptions o;
  o.poll_interval = std::chrono::milliseconds(1);
  o.idle_poll_interval = std::chrono::milliseconds(2);
  o.read_chunk = 4;  // small, so long output takes several reads
  o.max_reads_per_poll = 2;
  return o;
}

TEST_CASE("streaming exec: output of every poll arrives, in order, then the exit code",
          "[virt][exec_stream]") {
  ScriptedAgent agent;
  agent.steps = {{"hello ", ""}, {"", "warn\n"}, {"world, this is long\n", ""}, {"", ""}};
  agent.exit_code = 3;
  RecordingSink sink;
  GuestExecRequest req{.argv = {"make", "-j2", "a b"}, .stdin_data = "in", .timeout = {}};
  AgentCall call = std::ref(agent);
  auto r = run_streaming_exec(call, req, sink, fast());
  REQUIRE(r.is_ok());
  CHECK(r->exit_code == 3);
  CHECK_FALSE(r->cancelled);
  CHECK(agent.argv == std::vector<std::string>{"make", "-j2", "a b"});  // argv as arguments
  CHECK(agent.input == "in");
  CHECK(sink.all(ExecOutputStream::kStdout) == "hello world, this is long\n");
  CHECK(sink.all(ExecOutputStream::kStderr) == "warn\n");
  // The first chunk came before the process had produced the rest.
  REQUIRE_FALSE(sink.chunks.empty());
  CHECK(sink.chunks.front().second == "hell");
  CHECK(agent.seeks > 0);  // sticky EOF was cleared to read what came later
  CHECK(agent.closed == 2);
  CHECK(agent.removed == std::vector<std::string>{agent.out_path, agent.err_path});
  CHECK(agent.out_path.rfind("/tmp/.armhive-exec-", 0) == 0);
}

TEST_CASE("streaming exec: a cancelled sink kills the guest process and cleans up",
          "[virt][exec_stream]") {
  ScriptedAgent agent;
  agent.steps = {{"started\n", ""}};
  agent.forever = true;
  RecordingSink sink;
  sink.cancel_after_polls = 3;
  AgentCall call = std::ref(agent);
  auto r = run_streaming_exec(call, {.argv = {"sleep", "1000"}, .timeout = {}}, sink, fast());
  REQUIRE(r.is_ok());
  CHECK(r->cancelled);
  CHECK(agent.killed);
  CHECK(sink.all(ExecOutputStream::kStdout) == "started\n");
  CHECK(agent.closed == 2);
  CHECK(agent.removed.size() == 2);
}

// Issue 33 (finding 6): the drain after the exit read until the files' end whatever the client
// did; a child left behind writing for ever (`sh -c 'yes & exit 0'`) held the worker for good,
// even after the client went away.
TEST_CASE("streaming exec: the drain after the exit stops when the client goes away",
          "[virt][exec_stream][hostile]") {
  ScriptedAgent agent;
  agent.endless_output = true;
  RecordingSink sink;
  sink.cancel_after_polls = 50;  // the client leaves while the drain is running
  AgentCall call = std::ref(agent);
  auto r =
      run_streaming_exec(call, {.argv = {"sh", "-c", "yes & exit 0"}, .timeout = {}}, sink, fast());
  REQUIRE(r.is_ok());
  CHECK(r->exit_code == 0);
  CHECK(r->cancelled);
  CHECK(agent.reads < 5000);
  CHECK(agent.closed == 2);
}

TEST_CASE("streaming exec: the drain after the exit stops at the request's deadline",
          "[virt][exec_stream][hostile]") {
  ScriptedAgent agent;
  agent.endless_output = true;
  RecordingSink sink;
  AgentCall call = std::ref(agent);
  auto r = run_streaming_exec(
      call, {.argv = {"sh", "-c", "yes & exit 0"}, .timeout = std::chrono::milliseconds(1)}, sink,
      fast());
  REQUIRE(r.is_ok());
  CHECK(r->timed_out);
  CHECK(agent.reads < 5000);
}

TEST_CASE("streaming exec: a timeout kills the process and says so", "[virt][exec_stream]") {
  ScriptedAgent agent;
  agent.forever = true;
  RecordingSink sink;
  AgentCall call = std::ref(agent);
  auto r = run_streaming_exec(
      call, {.argv = {"sleep", "1000"}, .timeout = std::chrono::milliseconds(20)}, sink, fast());
  REQUIRE(r.is_ok());
  CHECK(r->timed_out);
  CHECK_FALSE(r->cancelled);
  CHECK(agent.killed);
}

TEST_CASE("streaming exec: a lying guest-file-read reply is an error, files still cleaned up",
          "[virt][exec_stream][hostile]") {
  ScriptedAgent agent;
  agent.steps = {{"x", ""}};
  bool lie = true;
  RecordingSink sink;
  AgentCall call = [&](const std::string& cmd, std::chrono::milliseconds t) -> Result<std::string> {
    if (lie && cmd.find("guest-file-read") != std::string::npos) {
      return std::string(R"({"return":{"count":4000,"buf-b64":"eA==","eof":false}})");
    }
    return agent(cmd, t);
  };
  auto r = run_streaming_exec(call, {.argv = {"true"}, .timeout = {}}, sink, fast());
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == ErrorCode::kInternal);
  CHECK_THAT(r.status().message(), Catch::Contains("guest-file-read"));
  CHECK(agent.closed == 2);
  CHECK(agent.removed.size() == 2);
}

TEST_CASE("guest agent: guest-file replies parse strictly", "[virt][hostile]") {
  CHECK(*parse_guest_file_open(R"({"return":1000})") == 1000);
  for (const char* bad : {R"({"return":-1})", R"({"return":"5"})", R"({})", "x"}) {
    INFO(bad);
    CHECK_FALSE(parse_guest_file_open(bad).is_ok());
  }
  auto ok = parse_guest_file_read(R"({"return":{"count":2,"buf-b64":"aGk=","eof":true}})", 10);
  REQUIRE(ok.is_ok());
  CHECK(ok->data == "hi");
  CHECK(ok->eof);
  CHECK(parse_guest_file_read(R"({"return":{"count":0,"eof":true}})", 10)->data.empty());
  for (const char* bad :
       {R"({"return":{"count":3,"buf-b64":"aGk="}})", R"({"return":{"count":20,"buf-b64":"aGk="}})",
        R"({"return":{"count":2,"buf-b64":"!!"}})", R"({"return":{}})"}) {
    INFO(bad);
    CHECK_FALSE(parse_guest_file_read(bad, 10).is_ok());
  }
}

}  // namespace
}  // namespace armhive
