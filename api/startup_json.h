#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "api/types.h"
#include "base/result.h"

namespace armhive {

// JSON forms of a lease's startup command (api/openapi.yaml: StartupRequest, StartupStatus).
// Include only in .cc files.
//
// The request is parsed strictly, naming the field at fault under `prefix` ("startup"):
//   {"argv": ["/opt/runner/run.sh", "--once"],            required: 1..256 non-empty strings
//    "env": {"RUNNER_TOKEN": {"value": "…", "secret": true},   NAME: [A-Za-z_][A-Za-z0-9_]*
//            "LANG": "C.UTF-8"},                               a string is a non-secret value
//    "release_on_exit": true}
// No string may hold NUL; sizes are bounded by the kMaxStartup* constants. Error messages never
// quote a value (it may be a secret).
Result<StartupRequestDto> startup_request_from_json(const nlohmann::json& j,
                                                    const std::string& prefix);
// Secret values are written (the CLI sends them); never use this for a response.
nlohmann::json to_json(const StartupRequestDto& r);

nlohmann::json to_json(const StartupStatusDto& s);
Status parse_startup_status(const nlohmann::json& j, const std::string& prefix,
                            StartupStatusDto& out);

// Whether `name` may name an environment variable: [A-Za-z_][A-Za-z0-9_]*, at most
// kMaxStartupEnvNameBytes.
bool valid_env_name(std::string_view name);

}  // namespace armhive
