#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "daemon/config/daemon_config.h"

namespace armhive {

// `armhived check-config`: everything armhived would refuse in a configuration file, found
// without starting it, each problem as "FILE:LINE: KEY: what is wrong" so that an editor (or
// a reader of the journal after ExecStartPre) goes to the spot.
struct ConfigCheck {
  std::vector<std::string> problems;  // empty: the file is good
  bool parsed = false;                // read and parsed; problems are then the files' only
  DaemonConfig config;                // when parsed: with every default filled in
};

// Reads and parses `path`, then checks what parsing cannot: secret files others may read, and
// TLS files that cannot be opened. Parsing stops at its first error (later keys are not read
// in a file that is wrong), so a bad file yields one parse problem; the file checks are all
// reported. Reads files; any thread.
ConfigCheck check_daemon_config(const std::string& path);

// "FILE:LINE: KEY: message" for an error of parse_daemon_config on `text`: the line of the key
// it names (or of the nearest enclosing table present, for a key that is missing), or the line
// and column a TOML syntax error gives. Without a line: "FILE: KEY: message".
std::string locate_config_error(std::string_view file, std::string_view text, const Status& error);

// The configuration as a TOML file with every default written out (what `check-config`
// prints): parsing it gives the same configuration back. Pure.
std::string render_daemon_config(const DaemonConfig& config);

// The top-level tables other than [[pools]], [github] and [access] ("server", "engine",
// "networks", ...) whose effective values differ between two configurations, in file order: what
// a reload cannot apply to a running armhived (its pools are daemon/core/pool_reload.h's,
// [github] daemon/config/github_reload.h's, [access] daemon/config/access_reload.h's). Pure.
std::vector<std::string> changed_sections(const DaemonConfig& running, const DaemonConfig& next);

}  // namespace armhive
