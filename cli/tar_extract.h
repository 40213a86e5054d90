#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/tar_reader.h"

namespace armhive {

// What `armhive cp` unpacks of a guest's tar stream, decided per member before anything is
// written. A CI job is root in its guest and makes that stream; the CLI may run as root here.
//
//   kept        regular files, directories, symlinks whose target stays inside the target
//               directory (relative, no ".." above it, not through another symlink of the
//               archive), hard links to a regular file met earlier in the archive
//   refused     devices, FIFOs and every other entry type; absolute member paths; ".." in a
//               member path; a member below one of the archive's symlinks; a symlink or hard
//               link leaving the target; a NUL in a path
//   neutralised modes: files 0755 when the archive's owner may run them, else 0644, directories
//               0755, both under the umask (tar --no-same-permissions): no setuid, setgid or
//               sticky bit, no group/other write. Owners are never taken from the archive.
//
// Ownership: plain values. Threading: one thread at a time.
class TarPolicy {
 public:
  struct Checked {
    std::vector<std::string> path;  // normalised components below the target (empty: itself)
    TarType type = TarType::kOther;
    std::vector<std::string> link;  // a hard link's target, normalised like `path`
  };
  // The member's verdict; kInvalidArgument (field "tar") naming the member and what is wrong.
  // Members are checked in archive order (a link may only name what came before it).
  Result<Checked> check(const TarMember& member, uint64_t index);

 private:
  std::map<std::string, TarType> seen_;  // normalised path -> what the archive made there
};

// The member's path as a message shows it: quoted, control bytes escaped, long ones cut.
std::string printable_member(const std::string& path);

// Whether a tar stream from `source` (LEASE:/PATH) may unpack into `target`: only when that is
// missing or a real directory. Over a file a file was asked for (the guest must send one); over
// a symlink (an earlier download may have left it) the stream would be written through it.
// kConflict saying so, before a byte is read.
Status check_tar_target(const std::string& target, const std::string& source);

// Unpacks the tar archive in `archive` into the directory `target` (made if missing): first
// every member is read and checked (TarPolicy), and nothing is written unless all pass; then
// the members are written below `target` without ever following a symlink (each directory is
// opened with O_NOFOLLOW from the one above, a file replaces an existing file or symlink of its
// name instead of writing through it, a directory of the archive never replaces anything).
// kInvalidArgument for a refused member or a malformed archive (nothing written), kUnavailable
// for a local failure while writing, naming the member.
Status extract_tar(const std::string& archive, const std::string& target);

}  // namespace armhive
