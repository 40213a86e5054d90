#include "tests/support/memory_guest_agent.h"

#include <nlohmann/json.hpp>

#include "base/base64.h"
#include "base/sha256.h"

namespace armhive {
namespace {

using nlohmann::json;

std::string ok(const json& r) { return json{{"return", r}}.dump(); }

std::string parent_of(const std::string& p) {
  size_t s = p.rfind('/');
  return s == 0 || s == std::string::npos ? "/" : p.substr(0, s);
}

Status unprocessable_tar() { return internal_error("tar: not a tar stream"); }

}  // namespace

void MemoryGuestAgent::put(const std::string& path, std::string data) {
  std::lock_guard lock(mu_);
  for (std::string d = parent_of(path); d != "/"; d = parent_of(d)) dirs_.insert(d);
  files_[path] = std::move(data);
}

std::optional<std::string> MemoryGuestAgent::file(const std::string& path) const {
  std::lock_guard lock(mu_);
  auto it = files_.find(path);
  if (it == files_.end()) return std::nullopt;
  return it->second;
}

std::set<std::string> MemoryGuestAgent::paths() const {
  std::lock_guard lock(mu_);
  std::set<std::string> out;
  for (const auto& [p, d] : files_) out.insert(p);
  return out;
}

size_t MemoryGuestAgent::open_handles() const {
  std::lock_guard lock(mu_);
  return handles_.size();
}

Result<std::string> MemoryGuestAgent::exec(const std::string& script,
                                           const std::vector<std::string>& a) {
  auto has = [&](std::string_view s) { return script.find(s) != std::string::npos; };
  if (has("if [ -d")) {
    if (dirs_.count(a.at(0))) return std::string("dir\n");
    return std::string(files_.count(a.at(0)) ? "file\n" : "none\n");
  }
  if (has("tar -xf")) {
    auto it = files_.find(a.at(1));
    if (it == files_.end()) return internal_error("tar: no such file");
    const std::string& t = it->second;
    std::map<std::string, std::string> unpacked;
    size_t i = 0;
    while (i < t.size()) {
      size_t z1 = t.find('\0', i), z2 = z1 == std::string::npos ? z1 : t.find('\0', z1 + 1);
      if (z2 == std::string::npos) return unprocessable_tar();
      std::string name = t.substr(i, z1 - i);
      size_t n = 0;
      try {
        n = std::stoul(t.substr(z1 + 1, z2 - z1 - 1));
      } catch (const std::exception&) {
        return unprocessable_tar();
      }
      if (z2 + 1 + n > t.size() || name.empty() || name.find("..") != std::string::npos) {
        return unprocessable_tar();
      }
      unpacked[name] = t.substr(z2 + 1, n);
      i = z2 + 1 + n;
    }
    dirs_.insert(a.at(0));
    for (auto& [name, data] : unpacked) {
      std::string path = a.at(0) + "/" + name;
      for (std::string d = parent_of(path); d != "/"; d = parent_of(d)) dirs_.insert(d);
      files_[path] = std::move(data);
    }
    return std::string();
  }
  if (has("tar -cf")) {
    const std::string prefix = a.at(0) + "/";
    std::string t;
    for (const auto& [p, d] : files_) {
      if (p.rfind(prefix, 0) != 0) continue;
      t += p.substr(prefix.size()) + '\0' + std::to_string(d.size()) + '\0' + d;
    }
    files_[a.at(1)] = std::move(t);
    return std::string();
  }
  if (has("mkdir -p")) {
    if (files_.count(a.at(0))) return internal_error("mkdir: a file is in the way");
    for (std::string d = a.at(0); d != "/"; d = parent_of(d)) dirs_.insert(d);
    return std::string();
  }
  if (has("mv -f")) {
    auto it = files_.find(a.at(0));
    if (it == files_.end()) return internal_error("mv: no such file");
    files_[a.at(1)] = std::move(it->second);
    files_.erase(a.at(0));
    return std::string();
  }
  if (has("rm -f")) {
    files_.erase(a.at(0));
    return std::string();
  }
  if (has("wc -c")) {
    auto it = files_.find(a.at(0));
    if (it == files_.end()) return internal_error("wc: no such file");
    std::string sum = wrong_sha256 ? std::string(64, '0') : sha256_hex(it->second);
    return "   " + std::to_string(it->second.size()) + "\n" + sum + "  " + a.at(0) + "\n";
  }
  return internal_error("unexpected guest script: " + script);
}

Result<std::string> MemoryGuestAgent::operator()(const std::string& command,
                                                 std::chrono::milliseconds) {
  std::lock_guard lock(mu_);
  json c = json::parse(command);
  const std::string ex = c.at("execute");
  const json& a = c.contains("arguments") ? c["arguments"] : json::object();
  if (ex == "guest-file-open") {
    const std::string path = a.at("path"), mode = a.at("mode");
    if (!dirs_.count(parent_of(path))) return internal_error("open: no such directory " + path);
    if (mode == "r" && !files_.count(path)) return internal_error("open: no such file " + path);
    if (mode == "w") files_[path].clear();
    handles_[next_handle_] = {path, 0, mode == "w"};
    return ok(next_handle_++);
  }
  if (ex == "guest-exec") {
    if (a.at("path") != "/bin/sh") return internal_error("unexpected program");
    std::vector<std::string> argv = a.at("arg");
    if (argv.size() < 3 || argv[0] != "-c") return internal_error("unexpected sh call");
    std::vector<std::string> args(argv.begin() + 3, argv.end());
    auto r = exec(argv[1], args);
    int64_t pid = next_pid_++;
    exited_[pid] = r.is_ok() ? std::make_pair(0, *r) : std::make_pair(1, std::string());
    return ok({{"pid", pid}});
  }
  if (ex == "guest-exec-status") {
    auto it = exited_.find(a.at("pid").get<int64_t>());
    if (it == exited_.end()) return internal_error("no such pid");
    json r = {{"exited", true}, {"exitcode", it->second.first}};
    if (!it->second.second.empty()) r["out-data"] = base64_encode(it->second.second);
    if (it->second.first != 0) r["err-data"] = base64_encode("failed\n");
    exited_.erase(it);
    return ok(r);
  }
  auto h = handles_.find(a.at("handle").get<int64_t>());
  if (h == handles_.end()) return internal_error("no such handle");
  if (ex == "guest-file-close") {
    handles_.erase(h);
    return ok(json::object());
  }
  std::string& data = files_[h->second.path];
  if (ex == "guest-file-write") {
    ++writes;
    auto bytes = base64_decode("buf-b64", a.at("buf-b64").get<std::string>());
    if (!bytes.is_ok()) return bytes.status();
    data += *bytes;
    size_t n = bytes->size() - (lie_write_count && !bytes->empty() ? 1 : 0);
    return ok({{"count", n}, {"eof", false}});
  }
  if (ex == "guest-file-read") {
    ++reads;
    size_t want = a.at("count");
    std::string got = data.substr(std::min(h->second.pos, data.size()), want);
    h->second.pos += got.size();
    bool eof = got.size() < want;
    if (extra_bytes && eof && got.size() < want) got += 'X';
    json r = {{"count", got.size()}, {"eof", eof}};
    r["buf-b64"] = garbage_base64 ? std::string("@@not base64@@") : base64_encode(got);
    if (oversized_reply) r["padding"] = std::string(64 * 1024 + 8 * want, ' ');
    return ok(r);
  }
  return internal_error("unexpected agent command " + ex);
}

}  // namespace armhive
