// `armhive bench LEASE`, `bench show|ls|report|compare`: benchmark runs and their reports.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "api/json.h"
#include "base/validation.h"
#include "cli/bench_summary.h"
#include "cli/command_group.h"
#include "cli/output.h"
#include "cli/progress.h"
#include "cli/table.h"

namespace armhive {
namespace {

using SteadyClock = std::chrono::steady_clock;

class BenchCommands final : public CommandGroup {
 public:
  void add_to(CLI::App& app) override {
    bench_ = app.add_subcommand("bench", "benchmark a leased VM: bench LEASE --suite ...");
    bench_->add_option("lease", id_, "lease id to benchmark");
    bench_->add_option("--suite", suites_,
                       "network,compression,memory,crypto,storage (default network,compression)");
    bench_->add_flag("--wait", wait_, "wait for the run to finish");
    bench_->add_option("--wait-timeout", wait_timeout_, "give up waiting after this (default 15m)");
    show_ = bench_->add_subcommand("show", "show a benchmark run");
    show_->add_option("run", id_, "run id")->required();
    ls_ = bench_->add_subcommand("ls", "list benchmark runs");
    ls_->add_option("--lease", lease_filter_, "only runs of this lease");
    report_ = bench_->add_subcommand("report", "download a run's report");
    report_->add_option("run", id_, "run id")->required();
    report_->add_option("-o,--output", output_, "write to this file (default: stdout)");
    report_->add_flag("--csv", csv_, "CSV instead of HTML");
    compare_ = bench_->add_subcommand("compare", "compare runs: ratios against the first");
    compare_->add_option("runs", ids_, "run ids (at least two)")->required()->expected(2, 16);
    compare_->add_option("-o,--output", output_, "also write the HTML comparison to this file");
    compare_->add_flag("--allow-different", allow_different_,
                       "compare runs whose corpora or tool versions differ");
  }

  bool parsed() const override { return bench_->parsed(); }

  int run(const CommandContext& ctx) override {
    Client& client = *ctx.client;
    if (show_->parsed()) return show(client, ctx.json_out);
    if (ls_->parsed()) return list(client, ctx.json_out);
    if (report_->parsed()) return download_report(client);
    if (compare_->parsed()) return compare(client, ctx.json_out);
    return start(client, ctx.json_out);
  }

 private:
  int show(Client& client, bool json_out) {
    auto r = client.get_benchmark(id_);
    if (!r.is_ok()) return report(r.status());
    if (json_out) {
      auto parsed = [](const std::string& text) {
        auto j = nlohmann::json::parse(text.empty() ? "{}" : text, nullptr, false);
        return j.is_discarded() ? nlohmann::json::object() : j;
      };
      print_json({{"id", r->id},
                  {"lease_id", r->lease_id},
                  {"owner", r->owner},
                  {"vm_name", r->vm_name},
                  {"pool", r->pool},
                  {"host", r->host},
                  {"state", r->state},
                  {"error", r->error},
                  {"created_at", r->created_at},
                  {"finished_at", r->finished_at ? nlohmann::json(*r->finished_at) : nullptr},
                  {"request", parsed(r->request_json)},
                  {"report", parsed(r->report_json)}});
      return kExitOk;
    }
    std::cout << "Run:      " << r->id << "\nLease:    " << r->lease_id << " (" << r->vm_name
              << ", pool " << r->pool << ", host " << r->host << ")\nState:    " << r->state
              << (r->error.empty() ? "" : " (" + r->error + ")") << "\nCreated:  " << r->created_at
              << "\nFinished: " << r->finished_at.value_or("-")
              << "\nReport:   " << client.current_server() << "/v1/benchmarks/" << r->id
              << "/report.html\n";
    auto rep = nlohmann::json::parse(r->report_json, nullptr, false);
    if (!rep.is_discarded()) print_bench_summary(rep, std::cout);
    return kExitOk;
  }

  int list(Client& client, bool json_out) {
    auto r = client.list_benchmarks(lease_filter_);
    if (!r.is_ok()) return report(r.status());
    if (json_out) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& b : *r) {
        arr.push_back({{"id", b.id},
                       {"lease_id", b.lease_id},
                       {"state", b.state},
                       {"pool", b.pool},
                       {"host", b.host},
                       {"created_at", b.created_at}});
      }
      print_json(arr);
      return kExitOk;
    }
    Table t({"RUN", "LEASE", "STATE", "POOL", "HOST", "CREATED"});
    for (const auto& b : *r) t.add({b.id, b.lease_id, b.state, b.pool, b.host, b.created_at});
    t.print(std::cout);
    return kExitOk;
  }

  int download_report(Client& client) {
    auto r = client.benchmark_report(id_, csv_ ? "csv" : "html");
    if (!r.is_ok()) return report(r.status());
    if (output_.empty()) {
      std::cout << *r;
    } else {
      std::ofstream out(output_);
      out << *r;
      if (!out) {
        std::cerr << "armhive: cannot write " << output_ << "\n";
        return kExitUsage;
      }
      std::cerr << "wrote " << output_ << "\n";
    }
    return kExitOk;
  }

  int compare(Client& client, bool json_out) {
    auto r = client.compare_benchmarks(ids_, "json");
    if (!r.is_ok()) return report(r.status());
    // Runs of different corpora or tool versions measured different work.
    if (std::string why = incomparable_message(nlohmann::json::parse(*r, nullptr, false));
        !why.empty() && !allow_different_) {
      std::cerr << why;
      return kExitUsage;
    }
    if (!output_.empty()) {
      auto html = client.compare_benchmarks(ids_, "html");
      if (!html.is_ok()) return report(html.status());
      std::ofstream(output_) << *html;
      std::cerr << "wrote " << output_ << "\n";
    }
    auto j = nlohmann::json::parse(*r, nullptr, false);
    if (json_out || j.is_discarded() || !j.contains("runs") || !j["runs"].is_array() ||
        !j.contains("metrics") || !j["metrics"].is_array()) {
      std::cout << (j.is_discarded() ? *r : dump_json(j, 2)) << "\n";
      return kExitOk;
    }
    print_compare_settings(j, std::cout);
    // daemon/bench/README.md "Comparison JSON": one row per metric, a value and a ratio
    // (against the first run) column per run.
    std::vector<std::string> header{"METRIC", "UNIT"};
    for (const auto& run : j["runs"]) {
      header.push_back(run.is_object() ? run.value("id", "?") : "?");
      header.push_back("RATIO");
    }
    Table t(header);
    auto cell = [](const nlohmann::json& arr, size_t i, const char* fmt) -> std::string {
      if (!arr.is_array() || i >= arr.size() || !arr[i].is_number()) return "-";
      char buf[64];
      std::snprintf(buf, sizeof buf, fmt, arr[i].get<double>());
      return buf;
    };
    for (const auto& m : j["metrics"]) {
      if (!m.is_object()) continue;
      std::vector<std::string> row{m.value("label", m.value("key", "?")), m.value("unit", "")};
      for (size_t i = 0; i < j["runs"].size(); ++i) {
        row.push_back(cell(m.value("values", nlohmann::json()), i, "%.4g"));
        row.push_back(cell(m.value("ratios", nlohmann::json()), i, "%.2fx"));
      }
      t.add(row);
    }
    t.print(std::cout);
    return kExitOk;
  }

  int start(Client& client, bool json_out) {
    if (id_.empty()) {
      std::cerr << "armhive: bench needs a LEASE (or one of show, ls, report, compare)\n";
      return kExitUsage;
    }
    nlohmann::json body = nlohmann::json::object();
    if (!suites_.empty()) {
      std::vector<std::string> list;
      std::stringstream ss(suites_);
      for (std::string s; std::getline(ss, s, ',');) {
        if (!s.empty()) list.push_back(s);
      }
      body["suites"] = list;
    }
    auto limit_s = parse_duration("--wait-timeout", wait_timeout_);
    if (!limit_s.is_ok()) return usage_error(limit_s.status());
    auto r = client.start_benchmark(id_, dump_json(body));
    if (!r.is_ok()) return report(r.status());
    BenchmarkRunDto run = *r;
    int code = kExitOk;
    if (wait_) {
      Progress progress(run.id);
      auto deadline = SteadyClock::now() + std::chrono::seconds(*limit_s);
      while (run.state == "queued" || run.state == "running") {
        progress.update(run.state, "");
        if (SteadyClock::now() >= deadline) {
          code = kExitTimeout;
          break;
        }
        std::this_thread::sleep_for(std::chrono::seconds(2));
        auto next = client.get_benchmark(run.id);
        if (!next.is_ok()) {
          progress.finish();
          return report(next.status());
        }
        run = *next;
      }
      progress.finish();
      if (run.state == "failed") {
        std::cerr << "armhive: benchmark " << run.id << " failed: " << run.error << "\n";
        code = kExitServer;
      } else if (code == kExitTimeout) {
        std::cerr << "armhive: benchmark " << run.id << " still " << run.state << "\n";
      }
    }
    if (json_out) {
      nlohmann::json j = {
          {"id", run.id}, {"lease_id", run.lease_id}, {"state", run.state}, {"error", run.error}};
      print_json(j);
    } else {
      std::cout << run.id << "\n";
      std::cerr << "Benchmark " << run.id << " " << run.state << ". Report: `armhive bench report "
                << run.id << " -o report.html` or " << client.current_server() << "/v1/benchmarks/"
                << run.id << "/report.html\n";
    }
    return code;
  }

  CLI::App* bench_ = nullptr;
  CLI::App* show_ = nullptr;
  CLI::App* ls_ = nullptr;
  CLI::App* report_ = nullptr;
  CLI::App* compare_ = nullptr;
  std::string id_, suites_, output_, lease_filter_, wait_timeout_ = "15m";
  std::vector<std::string> ids_;
  bool wait_ = false;
  bool csv_ = false;
  bool allow_different_ = false;
};

}  // namespace

std::unique_ptr<CommandGroup> make_bench_commands() { return std::make_unique<BenchCommands>(); }

}  // namespace armhive
