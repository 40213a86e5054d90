// armhived: parses the command line, builds the Daemon (daemon/daemon.h), reloads on SIGHUP and
// stops on SIGINT/SIGTERM; tells systemd what it is doing when run as a Type=notify service.

#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iomanip>
#include <iostream>

#include "base/service_notifier.h"
#include "base/version.h"
#include "daemon/config/config_check.h"
#include "daemon/config/daemon_config.h"
#include "daemon/config/store_url.h"
#include "daemon/daemon.h"
#include "daemon/http/token_commands.h"
#include "daemon/journal_sink.h"
#include "daemon/store/backup.h"
#include "daemon/store/database.h"
#include "daemon/store/pg_database.h"
#include "daemon/store/sqlite_database.h"
#include "daemon/store/state_lock.h"
#include "daemon/store/state_migration.h"
#include "daemon/virt/network_guard.h"
#include "daemon/watchdog_pinger.h"

namespace armhive {
namespace {

// The guard's ruleset for one of the configured networks, as armhived applies it to a local
// host: what a remote host's provisioning must install (`nft -j -f FILE`).
int print_network_guard(const DaemonConfig& config, const std::string& name) {
  std::string known;
  for (const NetworkConfig& n : config.networks) {
    known += (known.empty() ? "" : ", ") + n.name;
    if (n.name != name) continue;
    auto ruleset = build_guard_ruleset(network_spec(n));
    if (!ruleset.is_ok()) {
      std::cerr << "armhived: network " << name << ": " << ruleset.status().message() << "\n";
      return 2;
    }
    std::cout << *ruleset << "\n";
    return 0;
  }
  std::cerr << "armhived: no [[networks]] named '" << name << "' in the configuration"
            << (known.empty() ? " (it has none)" : " (it has " + known + ")") << "\n";
  return 2;
}

// Backup and restore copy the SQLite file; a PostgreSQL database has its own tools, which also
// see the other instances' writes.
bool refuse_for_postgres(const DaemonConfig& config, const char* what) {
  if (config.store.url.empty()) return false;
  std::cerr << "armhived: " << what
            << ": the state is in PostgreSQL ([store] url): use pg_dump / pg_restore (or the "
               "cluster's own backups, e.g. Patroni's), which see every instance's writes\n";
  return true;
}

int run_backup(const DaemonConfig& config, const std::string& file) {
  if (refuse_for_postgres(config, "backup")) return 2;
  if (Status s = backup_database(config.database_path(), file); !s.is_ok()) {
    std::cerr << "armhived: backup: " << s.to_string() << "\n";
    return 1;
  }
  std::error_code ec;
  std::cout << "backed up " << config.database_path() << " to " << file << " ("
            << std::filesystem::file_size(file, ec) << " bytes)\n";
  return 0;
}

int run_restore(const DaemonConfig& config, const std::string& file) {
  if (refuse_for_postgres(config, "restore")) return 2;
  auto lock = StateLock::acquire(config.state_dir);  // held until the new file is in place
  if (!lock.is_ok()) {
    std::cerr << "armhived: restore: " << lock.status().message() << "\n";
    return 1;
  }
  if (Status s = restore_database(file, config.database_path()); !s.is_ok()) {
    std::cerr << "armhived: restore: " << s.to_string() << "\n";
    return 1;
  }
  std::cout << "restored " << file << " to " << config.database_path()
            << " (the database it replaced is " << config.database_path()
            << ".before-restore); start armhived: it adopts the VMs of the backup's leases that "
               "libvirt still runs\n";
  return 0;
}

// `armhived migrate --to URL`: the SQLite state of this configuration copied into an empty
// PostgreSQL database (daemon/store/state_migration.h), while armhived is stopped. Exit 0 when
// every table holds as many rows there as here, 1 when the copy or its verification failed, 2
// on bad usage.
int run_migrate(const DaemonConfig& config, const std::string& config_path,
                const std::string& url) {
  if (!config.store.url.empty()) {
    std::cerr << "armhived: migrate: this configuration already uses PostgreSQL ([store] url in "
              << config_path << "); migrate copies the SQLite state of one that does not\n";
    return 2;
  }
  if (Status s = check_store_url(url); !s.is_ok() || url.empty()) {
    std::cerr << "armhived: migrate: --to "
              << (url.empty() ? "must be a postgresql:// connection URI" : s.message()) << "\n";
    return 2;
  }
  // Held to the end: no armhived may start on this state while it is copied.
  auto lock = StateLock::acquire(config.state_dir);
  if (!lock.is_ok()) {
    std::cerr << "armhived: migrate: " << lock.status().message()
              << " (stop armhived first: the state is copied while nothing writes it)\n";
    return 1;
  }
  const std::string path = config.database_path();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    std::cerr << "armhived: migrate: there is no state to copy: " << path << " does not exist\n";
    return 1;
  }
  auto source = SqliteDatabase::open(path);
  if (!source.is_ok()) {
    std::cerr << "armhived: migrate: " << source.status().to_string() << "\n";
    return 1;
  }
  auto target = PgDatabase::connect(url);
  if (!target.is_ok()) {
    std::cerr << "armhived: migrate: " << target.status().to_string() << "\n";
    return 1;
  }
  // A long copy can be interrupted: its one transaction is rolled back and leaves the target
  // empty (main() blocked these signals for serve()).
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_UNBLOCK, &stop, nullptr);
  std::cout << "copying " << path << " to " << (*target)->path() << "\n";
  MigrationOptions options;
  options.progress = [](std::string_view table, int64_t done, int64_t total) {
    // A line per table, and one per 10,000 rows of a long one.
    if (done == total || (done > 0 && done % 10000 < 500)) {
      std::cout << "  " << table << ": " << done << " of " << total << " rows\n" << std::flush;
    }
  };
  auto report = migrate_state_to_postgres(**source, **target, options);
  if (!report.is_ok()) {
    std::cerr << "armhived: migrate: " << report.status().to_string() << "\n";
    return 1;
  }
  std::cout << "\nrows per table (" << path << " = PostgreSQL):\n";
  for (const MigratedTable& t : report->tables) {
    std::cout << "  " << std::left << std::setw(20) << t.table << std::right << std::setw(10)
              << t.source_rows << (t.source_rows == t.target_rows ? " = " : " != ") << t.target_rows
              << "\n";
  }
  if (Status s = report->verification(); !s.is_ok()) {
    std::cerr << "armhived: migrate: " << s.message() << "\n";
    return 1;
  }
  std::cout << "\nverified: PostgreSQL holds every row of " << path
            << ".\nNext: set\n\n  [store]\n  url = \"" << url << "\"\n\nin " << config_path
            << " and start armhived (and the other armhived of the lab with the same [store] "
               "url). Keep "
            << path
            << " as it is: it is the way back, but do not start armhived on it again once the "
               "PostgreSQL state has changed.\n";
  return 0;
}

// SIGHUP: the file is read and checked again; one that does not check is refused whole and the
// configuration in force stays. Every outcome is logged and summed up in systemd's STATUS.
void reload(Daemon& daemon, const std::string& config_path, const ServiceNotifier& notifier) {
  spdlog::info("SIGHUP: reloading {}", config_path);
  (void)notifier.reloading("reloading " + config_path);
  const std::string serving = "serving on " + daemon.url();
  ConfigCheck check = check_daemon_config(config_path);
  if (!check.problems.empty()) {
    for (const std::string& p : check.problems) {
      spdlog::error("reload refused (the configuration in force is kept): {}", p);
    }
    (void)notifier.ready(serving + "; reload refused: " + check.problems.front());
    return;
  }
  Daemon::ReloadOutcome out = daemon.reload(check.config);
  for (const std::string& line : out.applied) spdlog::info("reload: {}", line);
  for (const std::string& line : out.refused) spdlog::error("reload: {}", line);
  for (const std::string& line : out.restart_needed) spdlog::warn("reload: {}", line);
  if (out.applied.empty() && out.refused.empty() && out.restart_needed.empty()) {
    spdlog::info("reload: nothing changed");
  }
  std::string status = serving;
  if (!out.refused.empty()) status += "; " + std::to_string(out.refused.size()) + " refused";
  if (!out.restart_needed.empty()) {
    status += "; " + std::to_string(out.restart_needed.size()) + " change(s) need a restart";
  }
  (void)notifier.ready(status);
}

int serve(const DaemonConfig& config, const std::string& config_path,
          const ServiceNotifier& notifier) {
  auto note = [&notifier](std::string_view line) {
    spdlog::debug("{}", line);
    (void)notifier.status(line);
  };
  // A standby (several armhived on one PostgreSQL) waits inside start(): systemd hears it is
  // up, its watchdog is fed, and SIGINT/SIGTERM stop the wait.
  bool told_standby = false;
  bool stop_asked = false;
  auto pause = [&](std::chrono::milliseconds d) {
    if (!told_standby) {
      (void)notifier.ready("standby: waiting to lead");
      told_standby = true;
    }
    (void)notifier.watchdog();
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    timespec ts{static_cast<time_t>(d.count() / 1000),
                static_cast<long>(d.count() % 1000) * 1000000};
    stop_asked = sigtimedwait(&stop, nullptr, &ts) > 0;
    return !stop_asked;
  };
  auto daemon = Daemon::start(config, config_path, note, pause);
  if (!daemon.is_ok() && stop_asked) {
    spdlog::info("signal: stopping as a standby (it never led)");
    (void)notifier.stopping("stopping; it was a standby");
    return 0;
  }
  if (!daemon.is_ok()) {
    spdlog::critical("{}", daemon.status().to_string());
    (void)notifier.status("failed: " + daemon.status().message());
    return 1;
  }
  (void)notifier.ready("serving on " + (*daemon)->url());
  int sig = 0;
  {
    WatchdogPinger watchdog(notifier, [&d = **daemon](std::chrono::milliseconds deadline) {
      return d.answers(deadline);
    });
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGHUP);
    while (sigwait(&signals, &sig) == 0 && sig == SIGHUP) reload(**daemon, config_path, notifier);
  }
  spdlog::info("signal {}: stopping (VMs keep running and are re-adopted on restart)", sig);
  (void)notifier.stopping("stopping; VMs keep running");
  daemon->reset();  // stops every part, in reverse order of start
  return 0;
}

}  // namespace
}  // namespace armhive

int main(int argc, char** argv) {
  using namespace armhive;
  // Before any thread: it takes NOTIFY_SOCKET out of the environment the tools would inherit.
  const ServiceNotifier notifier = ServiceNotifier::from_environment();
  // Block the stop and reload signals in every thread; serve() waits for them with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  CLI::App app{"armhived: a pool of ephemeral aarch64 VMs for CI, leased over a REST API"};
  app.set_version_flag("--version", "armhived " + std::string(kVersion));
  std::string config_path = "/etc/armhive/armhived.toml";
  app.add_option("-c,--config", config_path, "Configuration file")->capture_default_str();
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "Debug logging");
  CLI::App* token = app.add_subcommand("token", "Manage API tokens: create, revoke, list");
  token->allow_extras();
  token->prefix_command();
  CLI::App* guard = app.add_subcommand(
      "network-guard",
      "Print the nftables ruleset (JSON, for `nft -j -f FILE`) that guards a guest network; a "
      "remote host's provisioning installs it there (network_guard = \"host\")");
  std::string guard_network;
  guard->add_option("NETWORK", guard_network, "a [[networks]] name")->required();
  CLI::App* backup = app.add_subcommand(
      "backup", "Write a consistent copy of the database to FILE, also while armhived serves");
  std::string backup_file;
  backup->add_option("FILE", backup_file, "a new file (never overwritten)")->required();
  CLI::App* restore = app.add_subcommand(
      "restore",
      "Put a backup in place of the database for the next start (armhived must be stopped; the "
      "current database is kept as <database>.before-restore)");
  std::string restore_file;
  restore->add_option("FILE", restore_file, "a file `armhived backup` wrote")->required();
  CLI::App* check = app.add_subcommand(
      "check-config",
      "Check the configuration without starting: each problem as FILE:LINE: KEY: what is wrong "
      "(exit 2); when it is good, print it with every default written out (exit 0)");
  bool quiet = false;
  check->add_flag("-q,--quiet", quiet, "Print problems only (the unit's ExecStartPre)");
  CLI::App* migrate = app.add_subcommand(
      "migrate",
      "Copy the SQLite state into an empty PostgreSQL database and verify the rows per table "
      "(armhived must be stopped); then set [store] url to it (exit 1: the copy or its "
      "verification failed, 2: bad usage)");
  std::string migrate_url;
  migrate
      ->add_option("--to", migrate_url,
                   "the PostgreSQL database: a postgresql:// URI without a password (a passfile "
                   "or PGPASSWORD carries it), as [store] url takes it")
      ->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    // migrate's bad usage is 2, as its help says (CLI11's own codes otherwise).
    return code != 0 && migrate->parsed() ? 2 : code;
  }
  spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::info);

  if (*check) {
    ConfigCheck result = check_daemon_config(config_path);
    for (const std::string& p : result.problems) std::cerr << p << "\n";
    if (!result.problems.empty()) return 2;
    if (!quiet) {
      std::cout << "# The effective configuration of " << config_path << " (armhived " << kVersion
                << "), every default written out\n"
                << render_daemon_config(result.config);
    }
    return 0;
  }
  // Only what parsing refuses stops here; the secret files' modes are checked by the start.
  ConfigCheck checked = check_daemon_config(config_path);
  if (!checked.parsed) {
    for (const std::string& p : checked.problems) std::cerr << "armhived: " << p << "\n";
    return 2;
  }
  std::optional<DaemonConfig> config = std::move(checked.config);
  if (*guard) return print_network_guard(*config, guard_network);
  if (*backup) return run_backup(*config, backup_file);
  if (*restore) return run_restore(*config, restore_file);
  if (*migrate) return run_migrate(*config, config_path, migrate_url);
  if (*token) {
    Result<std::unique_ptr<Database>> db = unavailable("no database");
    if (config->store.url.empty()) {
      db = Database::open(config->database_path());
    } else if (auto pg = PgDatabase::connect(config->store.url); pg.is_ok()) {
      db = std::unique_ptr<Database>(std::move(*pg));
    } else {
      db = pg.status();
    }
    if (!db.is_ok()) {
      std::cerr << "armhived: " << db.status().to_string() << "\n";
      return 1;
    }
    return run_token_command(token->remaining(), **db, std::cout, std::cerr);
  }
  // Under systemd with output to the journal: each line with its LEASE_ID, POOL and HOST.
  if (JournalSink::stderr_is_journal()) {
    auto logger = spdlog::default_logger();
    logger->sinks().clear();
    logger->sinks().push_back(std::make_shared<JournalSink>());
  }
  return serve(*config, config_path, notifier);
}
