// One run at a time writes a checkpoint folder. Two runs of one model in one folder would prune
// each other's checkpoints and take them for their own (the second told the first's checkpoint
// was its own, then refused on --resume or silently restarted); a lock taken only at the first
// checkpoint, a minute in, left that minute open.
//
// The folder itself is locked (flock on its own descriptor), from before a resume reads it or
// --restart empties it to the end of the command: no lock file, so the folder of a finished run
// is removed whole. The kernel drops the lock when the process ends, however it ends.
#pragma once

#include <filesystem>
#include <string>

#include "train/checkpoint.h"

namespace xo {

class CheckpointFolderLock {
 public:
  // Creates `dir` where missing and locks it. Throws UserError naming `flag` (the option that
  // chose the folder; empty: none did) and the folder when another process holds it. On a file
  // system without locks the run goes on unguarded. `folder`: whether a folder this created is
  // removed at the end where nothing was written into it (Keep: a search's fused trials, whose
  // folders are made by the thousand: on ext4 without a journal a removed inode slows every
  // inode made in its block group for a minute or more, docs/benchmarks.md "Files a search makes").
  CheckpointFolderLock(const std::filesystem::path& dir, const std::string& flag,
                       CheckpointFolder folder = CheckpointFolder::Remove);
  // Unlocks; the folder is removed where this created it, nothing was written into it and it is
  // not kept.
  ~CheckpointFolderLock();
  CheckpointFolderLock(const CheckpointFolderLock&) = delete;
  CheckpointFolderLock& operator=(const CheckpointFolderLock&) = delete;

 private:
  std::filesystem::path dir_;
  int fd_ = -1;
  bool created_ = false;  // and to be removed at the end where empty
};

}  // namespace xo
