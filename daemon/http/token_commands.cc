#include "daemon/http/token_commands.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "api/types.h"
#include "base/validation.h"
#include "daemon/store/token_store.h"

namespace armhive {
namespace {

constexpr std::string_view kUsage =
    "usage: armhived token create NAME [--role admin|ci|dev|read] [--max-leases N] "
    "[--max-ttl 4h]\n"
    "                             [--dev-max-leases N] [--dev-max-ttl 8h] "
    "[--dev-max-lifetime 3d]\n"
    "       armhived token revoke NAME\n"
    "       armhived token list [--json]\n";

int usage(std::ostream& err, const std::string& problem) {
  if (!problem.empty()) err << "armhived token: " << problem << "\n";
  err << kUsage;
  return 1;
}

int failure(std::ostream& err, const Status& s) {
  err << "armhived token: " << s.message();
  if (!s.field().empty() && s.message().find(s.field()) == std::string::npos) {
    err << " (" << s.field() << ")";
  }
  err << "\n";
  switch (s.code()) {
    case ErrorCode::kInvalidArgument:
      return 1;
    case ErrorCode::kConflict:
    case ErrorCode::kNotFound:
      return 2;
    default:
      return 3;
  }
}

std::string when(const std::optional<TimePoint>& t) { return t ? to_rfc3339(*t) : "-"; }

int create(const std::vector<std::string>& args, TokenStore& store, std::ostream& out,
           std::ostream& err) {
  TokenSpec spec;
  spec.role = TokenRole::kCi;
  bool have_name = false;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string& v) {
      if (i + 1 >= args.size()) return false;
      v = args[++i];
      return true;
    };
    std::string v;
    if (a == "--role") {
      if (!value(v)) return usage(err, "--role needs a value");
      auto role = token_role_from_string(v);
      if (!role) return usage(err, "--role must be admin, ci, dev or read (got \"" + v + "\")");
      spec.role = *role;
    } else if (a == "--max-leases" || a == "--dev-max-leases") {
      if (!value(v)) return usage(err, a + " needs a value");
      if (v.empty() || v.size() > 6 || v.find_first_not_of("0123456789") != std::string::npos) {
        return usage(err, a + " must be a number (0 = unlimited)");
      }
      (a == "--max-leases" ? spec.max_leases : spec.dev_max_leases) = std::stoi(v);
    } else if (a == "--max-ttl" || a == "--dev-max-ttl" || a == "--dev-max-lifetime") {
      if (!value(v)) return usage(err, a + " needs a value");
      auto s = parse_duration(a, v);
      if (!s.is_ok()) return usage(err, s.status().message() + " (" + a + ", e.g. 4h)");
      if (*s > kMaxTtlSeconds) return usage(err, a + " must be at most 30d");
      (a == "--max-ttl"       ? spec.max_ttl
       : a == "--dev-max-ttl" ? spec.dev_max_ttl
                              : spec.dev_max_lifetime) = Seconds(*s);
    } else if (!a.empty() && a[0] == '-') {
      return usage(err, "unknown option " + a);
    } else if (!have_name) {
      spec.name = a;
      have_name = true;
    } else {
      return usage(err, "unexpected argument " + a);
    }
  }
  if (!have_name) return usage(err, "create needs a NAME");
  auto secret = store.create(spec);
  if (!secret.is_ok()) return failure(err, secret.status());
  out << *secret << "\n";
  err << "Created token \"" << spec.name << "\" (role " << to_string(spec.role)
      << (spec.max_leases ? ", max " + std::to_string(spec.max_leases) + " leases" : "")
      << (spec.max_ttl.count() ? ", max ttl " + format_duration(spec.max_ttl.count()) : "")
      << (spec.dev_max_leases ? ", max " + std::to_string(spec.dev_max_leases) + " dev leases" : "")
      << (spec.dev_max_ttl.count() ? ", dev max ttl " + format_duration(spec.dev_max_ttl.count())
                                   : "")
      << (spec.dev_max_lifetime.count()
              ? ", dev leases renewable to " + format_duration(spec.dev_max_lifetime.count())
              : "")
      << "). This is the only time the secret is shown: store it now.\n";
  return 0;
}

int list(const std::vector<std::string>& args, TokenStore& store, std::ostream& out,
         std::ostream& err) {
  bool as_json = false;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--json") {
      as_json = true;
    } else {
      return usage(err, "unexpected argument " + args[i]);
    }
  }
  auto tokens = store.list();
  if (!tokens.is_ok()) return failure(err, tokens.status());
  if (as_json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& t : *tokens) {
      j.push_back({{"name", t.name},
                   {"role", std::string(to_string(t.role))},
                   {"max_leases", t.max_leases},
                   {"max_ttl_seconds", t.max_ttl.count()},
                   {"dev_max_leases", t.dev_max_leases},
                   {"dev_max_ttl_seconds", t.dev_max_ttl.count()},
                   {"dev_max_lifetime_seconds", t.dev_max_lifetime.count()},
                   {"created_at", to_rfc3339(t.created_at)},
                   {"revoked_at", t.revoked_at ? nlohmann::json(to_rfc3339(*t.revoked_at))
                                               : nlohmann::json(nullptr)}});
    }
    out << j.dump(2) << "\n";
    return 0;
  }
  char line[256];
  std::snprintf(line, sizeof line, "%-24s %-6s %-10s %-8s %-25s %s\n", "NAME", "ROLE", "MAX-LEASES",
                "MAX-TTL", "CREATED", "REVOKED");
  out << line;
  for (const auto& t : *tokens) {
    std::snprintf(line, sizeof line, "%-24s %-6s %-10s %-8s %-25s %s\n", t.name.c_str(),
                  std::string(to_string(t.role)).c_str(),
                  t.max_leases ? std::to_string(t.max_leases).c_str() : "-",
                  t.max_ttl.count() ? format_duration(t.max_ttl.count()).c_str() : "-",
                  to_rfc3339(t.created_at).c_str(), when(t.revoked_at).c_str());
    out << line;
  }
  return 0;
}

}  // namespace

int run_token_command(const std::vector<std::string>& args, Database& db, std::ostream& out,
                      std::ostream& err) {
  if (args.empty()) return usage(err, "");
  if (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    out << kUsage;
    return 0;
  }
  SystemClock clock;
  auto store = TokenStore::open(db, clock);
  if (!store.is_ok()) return failure(err, store.status());
  if (args[0] == "create") return create(args, **store, out, err);
  if (args[0] == "list") return list(args, **store, out, err);
  if (args[0] == "revoke") {
    if (args.size() != 2) return usage(err, "revoke needs exactly one NAME");
    Status s = (*store)->revoke(args[1]);
    if (!s.is_ok()) return failure(err, s);
    err << "Revoked token \"" << args[1] << "\".\n";
    return 0;
  }
  return usage(err, "unknown command \"" + args[0] + "\"");
}

Status install_bootstrap_token(TokenStore& tokens, std::string_view secret, std::string_view name) {
  TokenSpec spec;
  spec.name = std::string(name);
  spec.role = TokenRole::kAdmin;
  return tokens.put(spec, secret);
}

Result<std::string> read_token_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return unavailable("cannot read the token file", path);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
    line.pop_back();
  }
  size_t start = line.find_first_not_of(" \t");
  if (start == std::string::npos) return invalid_argument("token_file", "the file is empty");
  return line.substr(start);
}

}  // namespace armhive
