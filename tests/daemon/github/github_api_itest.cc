// The GitHub REST client as a GitHub App, against the loopback stand-in (github_api_standin.py,
// which checks the JWT's RS256 signature with openssl against the App's public key): the
// installation token is bought once and used for the runner calls; a wrong key gets 401.
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "daemon/github/github_api.h"

extern char** environ;

namespace armhive {
namespace {

namespace fs = std::filesystem;

std::string pem_of(EVP_PKEY* key, bool private_part) {
  BIO* bio = BIO_new(BIO_s_mem());
  if (private_part) {
    PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  } else {
    PEM_write_bio_PUBKEY(bio, key);
  }
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

struct StandIn {
  fs::path dir = fs::temp_directory_path() / ("armhive-gh-app-" + std::to_string(::getpid()));
  pid_t pid = -1;
  int port = 0;
  explicit StandIn(const std::string& public_pem) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "app.pub") << public_pem;
    const std::string script =
        std::string(ARMHIVE_SOURCE_DIR) + "/tests/daemon/github/github_api_standin.py";
    std::vector<std::string> args = {"python3",
                                     script,
                                     (dir / "port").string(),
                                     (dir / "record").string(),
                                     "4242",
                                     (dir / "app.pub").string()};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    REQUIRE(posix_spawnp(&pid, "python3", nullptr, nullptr, argv.data(), environ) == 0);
    for (int i = 0; i < 100 && !fs::exists(dir / "port"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::ifstream(dir / "port") >> port;
    REQUIRE(port > 0);
  }
  ~StandIn() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::vector<nlohmann::json> record() const {
    std::vector<nlohmann::json> out;
    std::ifstream in(dir / "record");
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }
};

GithubApiOptions app_options(int port, const std::string& private_pem) {
  GithubApiOptions o;
  o.api_url = "http://127.0.0.1:" + std::to_string(port);
  o.scope = "orgs/octo-org";
  o.app_id = 4242;
  o.app_private_key = private_pem;
  o.installation_id = 77;
  return o;
}

TEST_CASE("github api: a GitHub App buys one installation token and uses it", "[github][app]") {
  EVP_PKEY* key = EVP_RSA_gen(2048);
  EVP_PKEY* other = EVP_RSA_gen(2048);
  REQUIRE(key != nullptr);
  REQUIRE(other != nullptr);
  StandIn standin(pem_of(key, false));

  auto api = make_github_api(app_options(standin.port, pem_of(key, true)));
  REQUIRE(api.is_ok());
  JitRequest req;
  req.name = "armhive-1";
  req.labels = {"self-hosted", "armhive-arm64"};
  auto first = (*api)->generate_jitconfig(req);
  INFO(first.status().to_string());
  REQUIRE(first.is_ok());
  REQUIRE((*api)->generate_jitconfig(req).is_ok());
  auto rec = standin.record();
  REQUIRE(rec.size() == 3);
  CHECK(rec[0]["path"] == "/app/installations/77/access_tokens");
  CHECK(rec[0]["status"] == 201);
  const std::string token = rec[0]["installation_token"];
  for (size_t i : {1u, 2u}) {
    CHECK(rec[i]["path"] == "/orgs/octo-org/actions/runners/generate-jitconfig");
    CHECK(rec[i]["authorization"] == "Bearer " + token);  // the cached installation token
  }

  // Signed with a key GitHub does not know: 401, as the stand-in checks the signature.
  auto wrong = make_github_api(app_options(standin.port, pem_of(other, true)));
  REQUIRE(wrong.is_ok());
  auto refused = (*wrong)->generate_jitconfig(req);
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().code() == ErrorCode::kPermissionDenied);
  CHECK_THAT(refused.status().message(), Catch::Contains("installation access token"));
  EVP_PKEY_free(key);
  EVP_PKEY_free(other);

  auto no_key = make_github_api(app_options(standin.port, "not a key"));
  CHECK(no_key.status().field() == "github.app_private_key_file");
}

}  // namespace
}  // namespace armhive
