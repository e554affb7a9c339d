#pragma once
// The run journal (OUT.partial) that keeps the work of an interrupted `run -o OUT`: every finished
// request is appended, as it finishes, as one complete JSON line
//   {"index", "id", "prompt_tokens", "token_ids", "text", "finish_reason", "cached_tokens",
//    "ttft_ms", "e2el_ms", "error"}
// after a header line {"roseinfer_journal": 1, "fingerprint", "requests"}. The fingerprint covers
// the input file's bytes and whatever else changes the tokens (model, device, sampling defaults),
// so `--resume` refuses a journal of another run. Lines are written in small batches with one
// write() each and fsynced at most every kSyncInterval; a torn last line (power loss, kill -9 in
// the middle of a write) is dropped on reading and its request computed again.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/io/completions.h"

namespace rose {

struct JournalEntry {
  int64_t index = 0;  // the request's line order in the input (its place in the output)
  std::string id;
  Completion completion;
};

struct JournalContents {
  std::string fingerprint;
  int64_t num_requests = 0;
  std::vector<JournalEntry> entries;  // in the order they were written
  uint64_t valid_bytes = 0;           // the header and every whole, parsable entry line
  bool dropped_torn_line = false;     // a last line without its newline, or unparsable, was dropped
};

// OUT + ".partial".
std::filesystem::path journal_path_for(const std::filesystem::path& output);

// 32 hex digits of XXH3-128 over the bytes of `input` (read in chunks, so memory stays small) and
// `config`. Throws rose::Error naming the file when it cannot be read.
std::string run_fingerprint(const std::filesystem::path& input, std::string_view config);

// One entry as a journal line (no newline).
std::string journal_entry_line(const JournalEntry& entry);

// Reads a journal. A bad header, or a bad line followed by more lines, is a rose::Error naming
// FILE:LINE (the file is not a journal, or was damaged in the middle).
JournalContents read_journal(const std::filesystem::path& path);

// read_journal without keeping the entries (a streamed run of any length): each whole entry goes
// to `on_entry` with its line's byte offset and length (no newline); the result's `entries` stays
// empty.
using JournalEntryFn =
    std::function<void(const JournalEntry& entry, uint64_t offset, uint32_t length)>;
JournalContents scan_journal(const std::filesystem::path& path, const JournalEntryFn& on_entry);

// Reads single entries back at the offsets scan_journal reported (pread: no file position, no
// buffer beyond one line), to write the output in input order from a journal in finish order.
class JournalEntryReader {
 public:
  explicit JournalEntryReader(const std::filesystem::path& path);
  ~JournalEntryReader();
  JournalEntryReader(const JournalEntryReader&) = delete;
  JournalEntryReader& operator=(const JournalEntryReader&) = delete;
  // rose::Error naming the journal and offset when the line is not a whole entry.
  JournalEntry read(uint64_t offset, uint32_t length);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class JournalWriter {
 public:
  static constexpr int kBatchRecords = 32;   // a batch is written when it holds this many lines...
  static constexpr double kBatchAgeS = 0.5;  // ...or its first line is this old
  static constexpr double kSyncInterval = 2.0;

  // Starts a new journal at `path` (replacing one there) with its header line, synced; the header
  // goes in through a temporary file and a rename, so a journal is never seen without it.
  JournalWriter(const std::filesystem::path& path, const std::string& fingerprint,
                int64_t num_requests);
  // Continues an existing journal after its first `valid_bytes` bytes (cutting off a torn tail).
  JournalWriter(const std::filesystem::path& path, uint64_t valid_bytes);
  ~JournalWriter();  // flushes what is buffered (best effort) and closes; never removes
  JournalWriter(const JournalWriter&) = delete;
  JournalWriter& operator=(const JournalWriter&) = delete;

  void append(const JournalEntry& entry);
  // Writes the buffered batch when it is full or old enough; cheap to call after every token.
  void flush_if_due();
  // Writes the buffered batch now and fsyncs the file.
  void sync();
  // Closes and deletes the journal (once the output that replaces it is committed).
  void remove();

  int64_t entries_appended() const { return appended_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void write_buffer();

  std::filesystem::path path_;
  int fd_ = -1;
  std::string buffer_;
  int buffered_records_ = 0;
  double first_buffered_at_ = 0.0;
  double last_sync_at_ = 0.0;
  int64_t appended_ = 0;
};

}  // namespace rose
