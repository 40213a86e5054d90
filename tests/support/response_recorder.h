#pragma once

#include <string>

namespace armhive {

// Writes one HTTP answer of the daemon as $ARMHIVE_API_RESPONSES_DIR/<pid>-<n>.json
// ({method, path, status, content_type, body}; JSON bodies parsed, NDJSON as a list of lines,
// anything else as text) for tests/api/check_openapi.py; nothing when the variable is unset.
// The integration tests' in-process server and the e2e suite's real armhived both record
// through it. Thread-safe.
void record_response(const std::string& method, const std::string& path, int status,
                     const std::string& content_type, const std::string& body);

}  // namespace armhive
