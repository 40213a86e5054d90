// `armhive cp`'s unpacking of a guest's tar stream (cli/tar_extract.h) against crafted archives:
// what a hostile guest (root in its VM) can put in one.
#include "cli/tar_extract.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace armhive {
namespace {

namespace fs = std::filesystem;

// Writes tar archives byte by byte, as a hostile guest may: any type, mode, path and link.
class TarBytes {
 public:
  TarBytes& add(const std::string& name, char type, uint32_t mode, const std::string& data = "",
                const std::string& link = "") {
    header(name, type, mode, data.size(), link);
    body(data);
    return *this;
  }
  TarBytes& file(const std::string& name, const std::string& data, uint32_t mode = 0644) {
    return add(name, '0', mode, data);
  }
  // A pax extended header ('x') whose records apply to the next member.
  TarBytes& pax(const std::string& key, const std::string& value) {
    std::string rec = " " + key + "=" + value + "\n";
    size_t len = rec.size() + 1;
    while (std::to_string(len).size() + rec.size() != len) ++len;
    std::string records = std::to_string(len) + rec;
    header("PaxHeader", 'x', 0644, records.size(), "");
    body(records);
    return *this;
  }
  // A GNU long name ('L') for the next member.
  TarBytes& long_name(const std::string& name) {
    header("././@LongLink", 'L', 0644, name.size() + 1, "");
    body(name + std::string(1, '\0'));
    return *this;
  }
  std::string finish() const { return out_ + std::string(1024, '\0'); }
  std::string raw() const { return out_; }

 private:
  static void octal(char* f, size_t len, uint64_t v) {
    std::snprintf(f, len, "%0*llo", static_cast<int>(len - 1), static_cast<unsigned long long>(v));
  }
  void header(const std::string& name, char type, uint32_t mode, uint64_t size,
              const std::string& link) {
    char h[512] = {};
    std::memcpy(h, name.data(), std::min<size_t>(name.size(), 100));
    octal(h + 100, 8, mode);
    octal(h + 108, 8, 0);  // uid 0: root, as the guest's tar writes it
    octal(h + 116, 8, 0);
    octal(h + 124, 12, size);
    octal(h + 136, 12, 1700000000);
    h[156] = type;
    std::memcpy(h + 157, link.data(), std::min<size_t>(link.size(), 100));
    std::memcpy(h + 257,
                "ustar\0"
                "00",
                8);
    if (type == '3' || type == '4') {
      octal(h + 329, 8, 1);  // /dev/mem's numbers
      octal(h + 337, 8, 1);
    }
    std::memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (unsigned char c : h) sum += c;
    std::snprintf(h + 148, 8, "%06o", sum);
    out_.append(h, 512);
  }
  void body(const std::string& data) {
    out_ += data;
    out_.append((512 - data.size() % 512) % 512, '\0');
  }
  std::string out_;
};

// A fresh directory with the archive file and the target below it, removed at the end.
struct Scratch {
  fs::path dir;
  Scratch() {
    std::string t = (fs::temp_directory_path() / "armhive-tar-XXXXXX").string();
    REQUIRE(::mkdtemp(t.data()) != nullptr);
    dir = t;
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string archive(const std::string& bytes) const {
    std::ofstream(dir / "in.tar", std::ios::binary) << bytes;
    return (dir / "in.tar").string();
  }
  std::string target() const { return (dir / "out").string(); }
  // Every path below the target (sorted), "" when it does not exist.
  std::vector<std::string> listing() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(target(), ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      out.push_back(fs::relative(it->path(), target()).string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
};

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The refusal of `bytes`: the error, and nothing written below the target.
Status refused(const std::string& bytes) {
  Scratch s;
  Status st = extract_tar(s.archive(bytes), s.target());
  CHECK_FALSE(st.is_ok());
  CHECK(s.listing().empty());
  return st;
}

TEST_CASE("tar: files, directories, inside links and pax/GNU long names are unpacked",
          "[cli][tar]") {
  Scratch s;
  const std::string deep(150, 'd');
  TarBytes t;
  t.add("./", '5', 0755)
      .add("./src/", '5', 0755)
      .file("./src/main.c", "int main(){}\n")
      .file("./run.sh", "#!/bin/sh\n", 0755)
      .add("./link", '2', 0777, "", "src/main.c")
      .add("./src/up", '2', 0777, "", "../run.sh")
      .add("./hard", '1', 0644, "", "./src/main.c")
      .long_name("./" + deep + "/gnu.txt")
      .file("ignored-name", "gnu")
      .pax("path", "./" + deep + "/pax.txt")
      .file("ignored-too", "pax");
  REQUIRE(extract_tar(s.archive(t.finish()), s.target()).is_ok());
  const fs::path out = s.target();
  CHECK(read_all(out / "src/main.c") == "int main(){}\n");
  CHECK(fs::read_symlink(out / "link") == "src/main.c");
  CHECK(fs::read_symlink(out / "src/up") == "../run.sh");
  CHECK(fs::equivalent(out / "hard", out / "src/main.c"));
  CHECK(read_all(out / deep / "gnu.txt") == "gnu");
  CHECK(read_all(out / deep / "pax.txt") == "pax");
  struct stat st {};
  REQUIRE(::stat((out / "run.sh").c_str(), &st) == 0);
  CHECK((st.st_mode & 0100) != 0);  // still runnable
}

TEST_CASE("tar: a character device, a FIFO or a block device is refused naming the member",
          "[cli][tar][hostile]") {
  // A file before it is not written either: every member is checked first.
  Status st = refused(TarBytes().file("ok.txt", "x").add("./dev/mem", '3', 0666).finish());
  CHECK(st.code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(st.message(), Catch::Contains("tar member 2 \"./dev/mem\""));
  CHECK_THAT(st.message(), Catch::Contains("character device"));
  CHECK_THAT(refused(TarBytes().add("fifo", '6', 0644).finish()).message(),
             Catch::Contains("FIFO"));
  CHECK_THAT(refused(TarBytes().add("sda", '4', 0644).finish()).message(),
             Catch::Contains("block device"));
  CHECK_THAT(refused(TarBytes().add("sparse", 'S', 0644).finish()).message(),
             Catch::Contains("tar type 'S'"));
}

TEST_CASE("tar: setuid, setgid, sticky and group/other-writable modes are dropped",
          "[cli][tar][hostile]") {
  Scratch s;
  const mode_t old_umask = ::umask(022);
  Status st = extract_tar(s.archive(TarBytes()
                                        .add("bin/", '5', 01777)
                                        .file("bin/su", "elf", 06755)
                                        .file("bin/data", "d", 02666)
                                        .finish()),
                          s.target());
  ::umask(old_umask);
  REQUIRE(st.is_ok());
  struct stat su {
  }, data{}, dir{};
  REQUIRE(::stat((fs::path(s.target()) / "bin/su").c_str(), &su) == 0);
  REQUIRE(::stat((fs::path(s.target()) / "bin/data").c_str(), &data) == 0);
  REQUIRE(::stat((fs::path(s.target()) / "bin").c_str(), &dir) == 0);
  CHECK((su.st_mode & 07777) == 0755);
  CHECK((data.st_mode & 07777) == 0644);
  CHECK((dir.st_mode & 07777) == 0755);
  // Owners are never taken from the archive (uid 0 there): the files are this process's.
  CHECK(su.st_uid == ::geteuid());
}

TEST_CASE("tar: paths and links leaving the target are refused", "[cli][tar][hostile]") {
  CHECK_THAT(refused(TarBytes().file("../evil", "x").finish()).message(),
             Catch::Contains("\"..\" in its path"));
  CHECK_THAT(refused(TarBytes().file("a/../../evil", "x").finish()).message(),
             Catch::Contains("\"a/../../evil\""));
  CHECK_THAT(refused(TarBytes().file("/etc/cron.d/evil", "x").finish()).message(),
             Catch::Contains("absolute path"));
  CHECK_THAT(refused(TarBytes().pax("path", "../../evil").file("fine", "x").finish()).message(),
             Catch::Contains("\"../../evil\""));
  CHECK_THAT(refused(TarBytes().add("pw", '2', 0777, "", "/etc/passwd").finish()).message(),
             Catch::Contains("symbolic link to the absolute path \"/etc/passwd\""));
  CHECK_THAT(refused(TarBytes().add("a/up", '2', 0777, "", "../../etc").finish()).message(),
             Catch::Contains("leaves the target directory"));
  // Inside lexically, outside once the kernel follows "here" (a link to "."): refused.
  CHECK_THAT(refused(TarBytes()
                         .add("here", '2', 0777, "", ".")
                         .add("out", '2', 0777, "", "here/../etc")
                         .finish())
                 .message(),
             Catch::Contains("through the archive's link \"here\""));
  CHECK_THAT(refused(TarBytes().add("hl", '1', 0644, "", "/etc/shadow").finish()).message(),
             Catch::Contains("hard link"));
  CHECK_THAT(refused(TarBytes().add("hl", '1', 0644, "", "../x").finish()).message(),
             Catch::Contains("hard link"));
  CHECK_THAT(refused(TarBytes().add("hl", '1', 0644, "", "not-in-archive").finish()).message(),
             Catch::Contains("not a regular file earlier in the archive"));
}

TEST_CASE("tar: a symlink to /etc then a file through it is refused, nothing lands in /etc",
          "[cli][tar][hostile]") {
  Scratch s;
  fs::create_directories(s.dir / "etc");  // stands in for /etc
  std::ofstream(s.dir / "etc/passwd") << "root:x:0:0\n";
  // In one archive: the link is inside-relative but the member below it is refused up front.
  Status one = extract_tar(
      s.archive(TarBytes().add("etc", '2', 0777, "", "sub").file("etc/passwd", "owned\n").finish()),
      s.target());
  CHECK_THAT(one.message(), Catch::Contains("lies below \"etc\""));
  CHECK(s.listing().empty());

  // Across downloads: an earlier one left out/etc -> the real directory (as `tar` unpacked it);
  // the next one sends etc/passwd.
  fs::create_directories(s.target());
  fs::create_symlink(s.dir / "etc", fs::path(s.target()) / "etc");
  Status two =
      extract_tar(s.archive(TarBytes().file("etc/passwd", "owned\n").finish()), s.target());
  CHECK(two.code() == ErrorCode::kConflict);
  CHECK_THAT(two.message(), Catch::Contains("\"etc/passwd\""));
  CHECK_THAT(two.message(), Catch::Contains("symbolic link here"));
  CHECK(read_all(s.dir / "etc/passwd") == "root:x:0:0\n");

  // A file of the link's own name replaces the link, never writes through it.
  fs::create_symlink(s.dir / "etc/passwd", fs::path(s.target()) / "pw");
  REQUIRE(extract_tar(s.archive(TarBytes().file("pw", "mine\n").finish()), s.target()).is_ok());
  CHECK(read_all(s.dir / "etc/passwd") == "root:x:0:0\n");
  CHECK_FALSE(fs::is_symlink(fs::path(s.target()) / "pw"));
  CHECK(read_all(fs::path(s.target()) / "pw") == "mine\n");
}

TEST_CASE("tar: a directory sent where a file or a symlink is asked for is refused",
          "[cli][tar][hostile]") {
  Scratch s;
  fs::create_directories(s.dir / "dir");
  std::ofstream(s.dir / "out.log") << "old";
  fs::create_symlink(s.dir / "dir", s.dir / "link");
  CHECK(check_tar_target((s.dir / "dir").string(), "l-1:/root/out").is_ok());
  CHECK(check_tar_target((s.dir / "new").string(), "l-1:/root/out").is_ok());
  Status file = check_tar_target((s.dir / "out.log").string(), "l-1:/root/out.log");
  CHECK(file.code() == ErrorCode::kConflict);
  CHECK_THAT(file.message(), Catch::Contains("l-1:/root/out.log is a directory in the guest"));
  CHECK_THAT(file.message(), Catch::Contains("is a file here"));
  CHECK_THAT(check_tar_target((s.dir / "link").string(), "l-1:/root/d").message(),
             Catch::Contains("a symbolic link here"));
}

TEST_CASE("tar: malformed archives are errors, never partial unpacks", "[cli][tar][hostile]") {
  std::string bad_sum = TarBytes().file("a", "x").finish();
  bad_sum[0] = 'b';  // the checksum no longer matches
  CHECK_THAT(refused(bad_sum).message(), Catch::Contains("checksum"));
  std::string truncated = TarBytes().file("a", std::string(2000, 'x')).raw().substr(0, 1024);
  CHECK_THAT(refused(truncated).message(), Catch::Contains("truncated"));
  CHECK_THAT(refused(TarBytes().pax("path", "x").raw()).message(),
             Catch::Contains("ends after a header"));
  std::string noise(1536, 'z');
  CHECK_FALSE(refused(noise).is_ok());
  // A size field that is not octal.
  std::string sized = TarBytes().file("a", "x").finish();
  std::memcpy(sized.data() + 124, "00000000009", 11);
  CHECK_FALSE(refused(sized).is_ok());
}

TEST_CASE("tar reader: pax sizes override the header, base-256 sizes are read",
          "[cli][tar][base]") {
  std::string data(700, 'p');
  std::istringstream in(TarBytes().pax("size", "700").add("big", '0', 0644, data).finish());
  // The header said 700 too (add writes it): also check reading it in small pieces.
  TarReader r(in);
  auto m = r.next();
  REQUIRE(m.is_ok());
  REQUIRE(m->has_value());
  CHECK((*m)->path == "big");
  CHECK((*m)->size == 700);
  std::string got;
  char buf[100];
  for (;;) {
    auto n = r.read(buf, sizeof buf);
    REQUIRE(n.is_ok());
    if (*n == 0) break;
    got.append(buf, *n);
  }
  CHECK(got == data);
  auto end = r.next();
  REQUIRE(end.is_ok());
  CHECK_FALSE(end->has_value());
}

}  // namespace
}  // namespace armhive
