#pragma once
/// rollout/trajectory_store.hpp: append-only, crash-safe storage of trajectory records.
///
/// Layout of a store directory:
///   segment-000001.msgpack, ...   frames: magic "CAFT", u32 length, u32 crc32, msgpack record
///   (a segment rolls over at `segment_bytes`)
/// Only files named exactly like a segment are read (a stray `*.bak` copy is not).
/// Reading scans every segment; a torn or corrupt frame (a crash mid-write) is
/// detected by its length/checksum, reported, and skipped: the records before and
/// after it still load. A failed append (disk full, EIO) truncates its partial frame
/// away and reports the error; the writer must stop (the driver closes admission).
/// Each append is written with one write(2) and synced (fdatasync) before it counts.
/// A segment file is created with its first record, so no empty segments are left.
/// The index (episode id -> segment, offset) is rebuilt on open, so there is no
/// second file to keep consistent.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "messages/trajectory.hpp"

namespace caf_agent::rollout {

/// Where a record lives.
struct record_location {
  uint32_t segment = 0;
  uint64_t offset = 0;
};

/// What a scan found.
struct scan_report {
  size_t records = 0;
  size_t corrupt_frames = 0;  ///< torn or checksum-failed frames that were skipped
  std::vector<std::string> problems;
};

/// Append-only trajectory store (one writer).
class trajectory_store {
 public:
  /// Opens (creating if needed) the store in `dir`; scans existing segments.
  /// Returns an error message instead when the directory is unusable.
  static std::optional<std::string> open(const std::filesystem::path& dir, std::unique_ptr<trajectory_store>& out,
                                         uint64_t segment_bytes = 64ull << 20);
  ~trajectory_store();
  trajectory_store(const trajectory_store&) = delete;
  trajectory_store& operator=(const trajectory_store&) = delete;

  /// Appends a record and flushes it. A record for an episode already stored is
  /// refused (returns "duplicate ..."), which is what keeps "one record per
  /// episode" true when a lost node's episode was also recorded elsewhere.
  /// Returns an error message on failure (e.g. disk full), else empty.
  std::string append(const messages::trajectory_record& rec);

  /// True when a record for `episode_id` is stored.
  bool contains(uint64_t episode_id) const { return index_.contains(episode_id); }

  /// Number of stored records.
  size_t size() const { return index_.size(); }

  /// Episode ids of every stored record, ascending.
  std::vector<uint64_t> episode_ids() const;

  /// What the opening scan found.
  const scan_report& opened_with() const { return open_report_; }

  /// Reads every readable record of the store in `dir` (skipping corrupt frames).
  static std::vector<messages::trajectory_record> read_all(const std::filesystem::path& dir,
                                                           scan_report* report = nullptr);

  /// Writes every record as one JSON object per line (tokens and all).
  static std::optional<std::string> export_jsonl(const std::filesystem::path& dir, const std::filesystem::path& out);

 private:
  trajectory_store() = default;
  std::string roll_segment();
  std::string open_segment();

  std::filesystem::path dir_;
  uint64_t segment_bytes_ = 0;
  uint32_t segment_ = 0;
  uint64_t segment_size_ = 0;
  int fd_ = -1;  // the current segment, opened with its first record
  bool segment_open_ = false;
  std::map<uint64_t, record_location> index_;
  scan_report open_report_;
};

/// CRC-32 (IEEE) of `data`.
uint32_t crc32(const void* data, size_t size);

}  // namespace caf_agent::rollout
