#include "cli/config.h"

#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "base/toml_reader.h"

namespace armhive {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

std::string default_config_path() {
  if (std::string p = env("ARMHIVE_CONFIG"); !p.empty()) return p;
  if (std::string x = env("XDG_CONFIG_HOME"); !x.empty()) return x + "/armhive/config.toml";
  if (std::string h = env("HOME"); !h.empty()) return h + "/.config/armhive/config.toml";
  return {};
}

struct FileSettings {
  std::vector<std::string> servers;
  std::string token, token_file, ca_file;
  bool insecure = false;
};

// "URL,URL" -> its entries, blanks around each trimmed. Empty entries are kept: Client::create
// refuses them naming their position.
std::vector<std::string> split_servers(const std::string& list) {
  std::vector<std::string> out;
  if (list.empty()) return out;
  size_t begin = 0;
  for (;;) {
    size_t comma = list.find(',', begin);
    std::string entry =
        list.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    while (!entry.empty() && std::isspace(static_cast<unsigned char>(entry.front()))) {
      entry.erase(0, 1);
    }
    while (!entry.empty() && std::isspace(static_cast<unsigned char>(entry.back()))) {
      entry.pop_back();
    }
    out.push_back(std::move(entry));
    if (comma == std::string::npos) return out;
    begin = comma + 1;
  }
}

Result<FileSettings> read_config(const std::string& path, bool required) {
  FileSettings out;
  if (path.empty()) return out;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    if (required) return invalid_argument("config", "no config file " + path);
    return out;
  }
  // A directory (or a device) would make the read below throw: named instead.
  if (!std::filesystem::is_regular_file(path, ec)) {
    return invalid_argument("config", path +
                                          " is not a file (ARMHIVE_CONFIG or --config names "
                                          "the configuration file itself)");
  }
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) return invalid_argument("config", "cannot read " + path);
  ARMHIVE_ASSIGN_OR_RETURN(toml::table t, parse_toml(text, "config", path));
  TomlReader r(t, "");
  if (Status known = r.only({"server", "token", "token_file", "ca_file", "insecure"});
      !known.is_ok()) {
    return invalid_argument("config", path + ": unknown key \"" + known.field() +
                                          "\" (server, token, token_file, ca_file, insecure)");
  }
  // server = "URL" or "URL,URL", or server = ["URL", "URL"].
  Status st;
  if (t.get_as<toml::array>("server") != nullptr) {
    st = r.strings("server", out.servers);
  } else {
    std::string list;
    st = r.str("server", list);
    out.servers = split_servers(list);
  }
  if (st.is_ok()) st = r.str("token", out.token);
  if (st.is_ok()) st = r.str("token_file", out.token_file);
  if (st.is_ok()) st = r.str("ca_file", out.ca_file);
  if (st.is_ok()) st = r.boolean("insecure", out.insecure);
  if (!st.is_ok()) return invalid_argument("config", path + ": " + st.field() + " " + st.message());
  return out;
}

}  // namespace

std::string expand_home(const std::string& path) {
  if (path.rfind("~/", 0) == 0) {
    std::string home = env("HOME");
    if (!home.empty()) return home + path.substr(1);
  }
  return path;
}

Result<ClientOptions> resolve_client_options(const CliSettings& flags) {
  bool explicit_config = !flags.config_path.empty();
  std::string path = explicit_config ? expand_home(flags.config_path) : default_config_path();
  ARMHIVE_ASSIGN_OR_RETURN(FileSettings file, read_config(path, explicit_config));
  if (file.token.empty() && !file.token_file.empty()) {
    std::ifstream in(expand_home(file.token_file));
    if (!in)
      return invalid_argument("config", path + ": cannot read token_file " + file.token_file);
    std::getline(in, file.token);
    while (!file.token.empty() && std::isspace(static_cast<unsigned char>(file.token.back()))) {
      file.token.pop_back();
    }
  }
  ClientOptions o;
  auto pick = [](const std::string& a, const std::string& b, const std::string& c) {
    return !a.empty() ? a : !b.empty() ? b : c;
  };
  if (!flags.server.empty()) {
    o.servers = split_servers(flags.server);
  } else if (std::string e = env("ARMHIVE_SERVER"); !e.empty()) {
    o.servers = split_servers(e);
  } else if (!file.servers.empty()) {
    o.servers = file.servers;
  } else {
    o.servers = {std::string(kDefaultServer)};
  }
  o.server = o.servers.front();
  o.token = pick(flags.token, env("ARMHIVE_TOKEN"), file.token);
  o.ca_file = expand_home(pick(flags.ca_file, env("ARMHIVE_CA_FILE"), file.ca_file));
  o.insecure = flags.insecure || file.insecure;
  return o;
}

namespace {

Status check_lease_id(const std::string& lease_id) {
  for (char c : lease_id) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-')) {
      return invalid_argument("lease", "not a lease id: " + lease_id);
    }
  }
  return Status::ok();
}

// <cache>/armhive/<what>, created owner-only.
Result<std::string> cache_dir(const std::string& what) {
  std::string base;
  if (std::string x = env("XDG_CACHE_HOME"); !x.empty()) {
    base = x + "/armhive/" + what;
  } else if (std::string h = env("HOME"); !h.empty()) {
    base = h + "/.cache/armhive/" + what;
  } else {
    base = "/tmp/armhive-" + std::to_string(::getuid()) + "/" + what;
  }
  std::error_code ec;
  std::filesystem::create_directories(base, ec);
  if (ec) return unavailable("cannot create " + base + ": " + ec.message());
  std::filesystem::permissions(base, std::filesystem::perms::owner_all, ec);
  return base;
}

}  // namespace

Result<std::string> lease_key_dir(const std::string& lease_id) {
  ARMHIVE_RETURN_IF_ERROR(check_lease_id(lease_id));
  ARMHIVE_ASSIGN_OR_RETURN(std::string base, cache_dir("ssh"));
  const std::string dir = base + "/" + lease_id;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return unavailable("cannot create " + dir + ": " + ec.message());
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
  if (ec) return unavailable("cannot make " + dir + " private: " + ec.message());
  return dir;
}

Result<std::string> write_known_hosts(const std::string& lease_id, const std::string& lines) {
  ARMHIVE_RETURN_IF_ERROR(check_lease_id(lease_id));
  ARMHIVE_ASSIGN_OR_RETURN(std::string base, cache_dir("known_hosts"));
  const std::string path = base + "/" + lease_id;
  std::ofstream out(path, std::ios::trunc);
  out << lines;
  if (!out) return unavailable("cannot write " + path);
  return path;
}

}  // namespace armhive
