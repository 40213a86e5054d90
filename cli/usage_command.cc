// `armhive usage [--since 7d|RFC3339] [--until ...] [--group-by owner|pool|label]
// [--label KEY] [--csv]`: what the leases created in a window used (GET /v1/usage).
#include <cctype>
#include <chrono>
#include <iostream>

#include "api/json.h"
#include "api/usage_report.h"
#include "cli/command_group.h"
#include "cli/output.h"
#include "cli/table.h"

namespace armhive {
namespace {

class UsageCommand final : public CommandGroup {
 public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand("usage",
                              "what the leases created in a window used (CPU, memory, disk, "
                              "network), per owner, pool or label value; your own leases unless "
                              "the token is admin");
    cmd_->add_option("--since", since_,
                     "start of the window: RFC 3339 time or a duration before now (7d, 12h); "
                     "default 7d before --until");
    cmd_->add_option("--until", until_, "end of the window (the same forms); default now");
    cmd_->add_option("--group-by", group_by_, "owner, pool or label (with --label KEY)")
        ->check(CLI::IsMember({"owner", "pool", "label"}));
    cmd_->add_option("--label", label_, "with --group-by label: the label key whose values group");
    cmd_->add_flag("--csv", csv_, "print CSV (RFC 4180) for a spreadsheet");
  }
  bool parsed() const override { return cmd_->parsed(); }

  int run(const CommandContext& ctx) override {
    // Checked here so a typo is a usage error; sent as written (a duration is resolved on
    // the server's clock).
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    for (const auto& [flag, text] : {std::pair{"--since", since_}, std::pair{"--until", until_}}) {
      if (text.empty()) continue;
      auto t = parse_usage_time(flag, text, now);
      if (!t.is_ok()) return usage_error(t.status());
    }
    if (group_by_ == "label" && label_.empty()) {
      return usage_error(invalid_argument("--label", "--group-by label needs --label KEY"));
    }
    if (group_by_ != "label" && !label_.empty()) {
      return usage_error(invalid_argument("--label", "is only used with --group-by label"));
    }
    UsageQueryDto q{since_, until_, group_by_, label_};
    if (csv_) {
      auto text = ctx.client->usage_csv(q);
      if (!text.is_ok()) return report(text.status());
      std::cout << *text;
      return kExitOk;
    }
    auto r = ctx.client->usage(q);
    if (!r.is_ok()) return report(r.status());
    if (ctx.json_out) {
      print_json(to_json(*r));
      return kExitOk;
    }
    std::string by = r->group_by == "label" ? "label " + r->label : r->group_by;
    std::cout << "Leases created from " << r->since << " to " << r->until << ", by " << by << ":\n";
    if (r->rows.empty()) {
      std::cout << "(none got a VM)\n";
      return kExitOk;
    }
    std::string head = r->group_by == "label" ? r->label : r->group_by;
    for (char& c : head) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    Table t(
        {head, "LEASES", "CPU", "WALL", "CPUS", "PEAK MEM", "DISK WRITTEN", "NET IN", "NET OUT"});
    for (const UsageRowDto& row : r->rows) {
      t.add({row.group.empty() ? "-" : row.group, std::to_string(row.leases),
             seconds_text(row.cpu_seconds), seconds_text(row.wall_seconds),
             cpus_text(row.cpu_seconds, row.wall_seconds), bytes_text(row.peak_memory_bytes),
             bytes_text(row.disk_write_bytes), bytes_text(row.net_rx_bytes),
             bytes_text(row.net_tx_bytes)});
    }
    t.print(std::cout);
    return kExitOk;
  }

 private:
  CLI::App* cmd_ = nullptr;
  std::string since_, until_, group_by_, label_;
  bool csv_ = false;
};

}  // namespace

std::unique_ptr<CommandGroup> make_usage_command() { return std::make_unique<UsageCommand>(); }

}  // namespace armhive
