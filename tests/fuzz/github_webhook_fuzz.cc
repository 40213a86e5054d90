// GitHub webhook bodies (anyone who can reach the endpoint sends them; only signed ones are
// parsed, but the signer may be a compromised GitHub side). Properties: a parsed job has
// bounded, non-empty labels and non-negative ids; the label mapping never throws and yields a
// configured pool or none; the signature check refuses a body whose signature was made for
// another body; nothing nested deeper than kMaxJsonDepth is parsed.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "base/json_depth.h"
#include "daemon/github/webhook_signature.h"
#include "daemon/github/workflow_job.h"
#include "tests/fuzz/fuzz_check.h"

// libFuzzer calls this exact name.
// NOLINTNEXTLINE(readability-identifier-naming)
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto job = armhive::parse_workflow_job(text);
  // Nothing nested deeper than kMaxJsonDepth is parsed.
  if (!armhive::check_json_depth(text, "body").is_ok()) FUZZ_CHECK(!job.is_ok());
  if (job.is_ok()) {
    FUZZ_CHECK(job->job_id >= 0 && job->run_id >= 0 && job->runner_id >= 0);
    FUZZ_CHECK(job->labels.size() <= armhive::kMaxJobLabels);
    for (const std::string& l : job->labels) {
      FUZZ_CHECK(!l.empty() && l.size() <= armhive::kMaxLabelBytes);
    }
    const std::map<std::string, std::string> pools = {{"armhive-arm64", "ci"}, {"big", "big"}};
    auto pool = armhive::pool_for_labels(pools, job->labels);
    if (pool.is_ok() && *pool) FUZZ_CHECK(**pool == "ci" || **pool == "big");
  }
  const std::string sig = armhive::webhook_signature("fuzz-secret", text);
  FUZZ_CHECK(armhive::verify_webhook_signature("fuzz-secret", text, sig).is_ok());
  FUZZ_CHECK(
      !armhive::verify_webhook_signature("fuzz-secret", std::string(text) + "x", sig).is_ok());
  // The input itself as a signature header of "{}": refused unless it is that signature.
  if (text != armhive::webhook_signature("fuzz-secret", "{}")) {
    FUZZ_CHECK(!armhive::verify_webhook_signature("fuzz-secret", "{}", text).is_ok());
  }
  return 0;
}
