#include "images/builder/archive.h"

#include "base/sha256.h"

namespace armhive {

Status unpack_archive(ProcessRunner& runner, const RecipeArchive& a,
                      const std::filesystem::path& target) {
  if (a.source.empty()) {
    return invalid_argument("archives.source",
                            a.name +
                                ": no tarball given: set source in the recipe or pass "
                                "`armhive-image build --archive " +
                                a.name + "=PATH`");
  }
  auto sum = sha256_file(a.source);
  if (!sum.is_ok()) return sum.status().with_field("archives.source");
  if (*sum != a.sha256) {
    return invalid_argument("archives.sha256", a.name + ": " + a.source + " has sha256 " + *sum +
                                                   ", the recipe pins " + a.sha256);
  }
  std::error_code ec;
  std::filesystem::create_directories(target, ec);
  if (ec) return unavailable("cannot create " + target.string() + ": " + ec.message(), a.path);
  auto r = runner.run({.argv = {"tar", "-xf", a.source, "-C", target.string(), "--no-same-owner"},
                       .timeout = std::chrono::minutes(10)});
  if (!r.is_ok()) return r.status().annotate("tar of archive " + a.name);
  if (!r->ok()) {
    return Status(ErrorCode::kUnprocessable,
                  a.name + ": tar could not unpack " + a.source + ": " + r->err.substr(0, 300),
                  a.path, "archives.source");
  }
  return Status::ok();
}

}  // namespace armhive
