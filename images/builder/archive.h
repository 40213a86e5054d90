#pragma once

#include <filesystem>

#include "base/process_runner.h"
#include "base/status.h"
#include "images/builder/recipe.h"

namespace armhive {

// Unpacks an operator-supplied tarball ([[archives]] of a recipe) into `target`, the directory
// in the image's root filesystem its `path` names (the builder resolves it inside the root).
// The tarball must exist and match the pinned sha256 (kInvalidArgument naming archives.source
// or archives.sha256 otherwise: a tarball that is not the pinned one never reaches an image).
// tar runs with an argv (never a shell), `--no-same-owner` (the tarball's uids mean nothing in
// the guest) and GNU tar's defaults against `..` and absolute member names. Any thread.
Status unpack_archive(ProcessRunner& runner, const RecipeArchive& archive,
                      const std::filesystem::path& target);

}  // namespace armhive
