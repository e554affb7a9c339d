#include "engine/io/journal.h"

#include <fcntl.h>
#include <simdjson.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>

#include "engine/common/error.h"
#include "engine/io/atomic_file.h"

namespace rose {
namespace {

using simdjson::dom::element;

double monotonic_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void io_fail(const std::filesystem::path& path, std::string_view what, int err) {
  fail("{}: {}: {}", path.string(), what, std::strerror(err));
}

std::string ms_or_null(double ms) { return std::isfinite(ms) ? fmt::format("{:.3f}", ms) : "null"; }

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(ids[i]);
  }
  return out + ']';
}

// Parses one entry line; false when it is not a complete entry (the caller decides whether that is
// a torn tail or damage).
bool parse_entry(simdjson::dom::parser& parser, std::string_view line, JournalEntry& entry) {
  element doc;
  if (parser.parse(line.data(), line.size()).get(doc)) return false;
  int64_t index = 0, prompt_tokens = 0, cached = 0;
  std::string_view id, text, finish, error;
  simdjson::dom::array ids;
  if (doc["index"].get(index) || doc["id"].get(id) || doc["prompt_tokens"].get(prompt_tokens) ||
      doc["token_ids"].get(ids) || doc["text"].get(text) || doc["finish_reason"].get(finish) ||
      doc["cached_tokens"].get(cached)) {
    return false;
  }
  entry.index = index;
  entry.id = std::string(id);
  Completion& c = entry.completion;
  c.prompt_tokens = static_cast<int>(prompt_tokens);
  c.text = std::string(text);
  c.finish_reason = std::string(finish);
  c.cached_tokens = static_cast<int>(cached);
  c.token_ids.clear();
  for (element item : ids) {
    int64_t token = 0;
    if (item.get(token)) return false;
    c.token_ids.push_back(static_cast<int32_t>(token));
  }
  double ms = 0;
  c.ttft_ms = doc["ttft_ms"].get(ms) ? NAN : ms;
  c.e2el_ms = doc["e2el_ms"].get(ms) ? NAN : ms;
  c.error = doc["error"].get(error) ? std::string() : std::string(error);
  return true;
}

void parse_header(simdjson::dom::parser& parser, std::string_view line, const std::string& source,
                  JournalContents& out) {
  element doc;
  int64_t version = 0, requests = 0;
  std::string_view fingerprint;
  if (parser.parse(line.data(), line.size()).get(doc) || doc["roseinfer_journal"].get(version) ||
      doc["fingerprint"].get(fingerprint) || doc["requests"].get(requests)) {
    fail("{}:1: not a roseinfer journal (no header line with roseinfer_journal and fingerprint)",
         source);
  }
  if (version != 1) fail("{}:1: journal version {} is not supported (expected 1)", source, version);
  out.fingerprint = std::string(fingerprint);
  out.num_requests = requests;
}

}  // namespace

std::filesystem::path journal_path_for(const std::filesystem::path& output) {
  std::filesystem::path path = output;
  path += ".partial";
  return path;
}

std::string run_fingerprint(const std::filesystem::path& input, std::string_view config) {
  std::ifstream in(input, std::ios::binary);
  if (!in) fail("{}: cannot open: {}", input.string(), std::strerror(errno));
  XXH3_state_t* state = XXH3_createState();
  ROSE_ASSERT(state != nullptr);
  XXH3_128bits_reset(state);
  constexpr std::string_view kDomain = "roseinfer-run-journal-v1";
  XXH3_128bits_update(state, kDomain.data(), kDomain.size());
  std::vector<char> chunk(size_t(1) << 20);
  while (in) {
    in.read(chunk.data(), std::streamsize(chunk.size()));
    XXH3_128bits_update(state, chunk.data(), size_t(in.gcount()));
  }
  const bool read_error = in.bad();
  const uint64_t config_size = config.size();
  XXH3_128bits_update(state, &config_size, sizeof config_size);
  XXH3_128bits_update(state, config.data(), config.size());
  const XXH128_hash_t hash = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  if (read_error) fail("{}: read failed", input.string());
  return fmt::format("{:016x}{:016x}", hash.high64, hash.low64);
}

std::string journal_entry_line(const JournalEntry& e) {
  const Completion& c = e.completion;
  return fmt::format(
      R"({{"index":{},"id":{},"prompt_tokens":{},"token_ids":{},"text":{},"finish_reason":{},)"
      R"("cached_tokens":{},"ttft_ms":{},"e2el_ms":{},"error":{}}})",
      e.index, json_quote(e.id), c.prompt_tokens, ids_text(c.token_ids), json_quote(c.text),
      json_quote(c.finish_reason), c.cached_tokens, ms_or_null(c.ttft_ms), ms_or_null(c.e2el_ms),
      c.error.empty() ? "null" : json_quote(c.error));
}

JournalContents scan_journal(const std::filesystem::path& path, const JournalEntryFn& on_entry) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open: {}", path.string(), std::strerror(errno));
  const std::string source = path.string();
  JournalContents out;
  simdjson::dom::parser parser;
  std::string line;
  int line_number = 0;
  uint64_t offset = 0;
  bool pending_bad = false;  // a bad line is damage unless it turns out to be the last one
  int bad_line = 0;
  JournalEntry entry;
  while (std::getline(in, line)) {
    ++line_number;
    const bool has_newline = !in.eof();
    if (pending_bad)
      fail("{}:{}: not a complete journal entry (damaged journal)", source, bad_line);
    if (line_number == 1) {
      if (!has_newline) fail("{}:1: not a roseinfer journal (header line incomplete)", source);
      parse_header(parser, line, source, out);
    } else {
      if (!has_newline || !parse_entry(parser, line, entry)) {
        pending_bad = true;
        bad_line = line_number;
        continue;
      }
      on_entry(entry, offset, uint32_t(line.size()));
    }
    offset += line.size() + 1;
    out.valid_bytes = offset;
  }
  if (line_number == 0) fail("{}: empty file, not a roseinfer journal", source);
  out.dropped_torn_line = pending_bad;
  return out;
}

JournalContents read_journal(const std::filesystem::path& path) {
  std::vector<JournalEntry> entries;
  JournalContents out = scan_journal(
      path, [&](const JournalEntry& entry, uint64_t, uint32_t) { entries.push_back(entry); });
  out.entries = std::move(entries);
  return out;
}

struct JournalEntryReader::Impl {
  std::filesystem::path path;
  int fd = -1;
  std::string line;
  simdjson::dom::parser parser;
};

JournalEntryReader::JournalEntryReader(const std::filesystem::path& path)
    : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  impl_->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (impl_->fd < 0) io_fail(path, "cannot open the journal", errno);
}

JournalEntryReader::~JournalEntryReader() {
  if (impl_->fd >= 0) ::close(impl_->fd);
}

JournalEntry JournalEntryReader::read(uint64_t offset, uint32_t length) {
  Impl& m = *impl_;
  m.line.resize(length);
  size_t got = 0;
  while (got < length) {
    const ssize_t n = ::pread(m.fd, m.line.data() + got, length - got, off_t(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) io_fail(m.path, "read failed", errno);
    if (n == 0) break;
    got += size_t(n);
  }
  JournalEntry entry;
  if (got != length || !parse_entry(m.parser, m.line, entry)) {
    fail("{}: no whole entry at byte {} (the journal changed during the run)", m.path.string(),
         offset);
  }
  return entry;
}

JournalWriter::JournalWriter(const std::filesystem::path& path, const std::string& fingerprint,
                             int64_t num_requests)
    : path_(path) {
  // The header goes in through a temporary file and a rename, so a journal is never seen without
  // it: a kill between creating the file and writing the header would otherwise leave an empty
  // OUT.partial that --resume refuses and a run without it will not overwrite.
  write_file_atomically(path_,
                        fmt::format(R"({{"roseinfer_journal":1,"fingerprint":{},"requests":{}}})",
                                    json_quote(fingerprint), num_requests) +
                            '\n');
  fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) io_fail(path_, "cannot open the journal", errno);
  last_sync_at_ = monotonic_seconds();
}

JournalWriter::JournalWriter(const std::filesystem::path& path, uint64_t valid_bytes)
    : path_(path) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd_ < 0) io_fail(path_, "cannot open the journal", errno);
  if (::ftruncate(fd_, off_t(valid_bytes)) != 0) io_fail(path_, "cannot cut its torn tail", errno);
  if (::lseek(fd_, off_t(valid_bytes), SEEK_SET) < 0) io_fail(path_, "seek failed", errno);
  last_sync_at_ = monotonic_seconds();
}

JournalWriter::~JournalWriter() {
  if (fd_ < 0) return;
  try {
    sync();
  } catch (const Error&) {
    // Destructors must not throw; the records that could not be written are computed again.
  }
  if (fd_ >= 0) ::close(fd_);
}

void JournalWriter::append(const JournalEntry& entry) {
  if (buffered_records_ == 0) first_buffered_at_ = monotonic_seconds();
  buffer_ += journal_entry_line(entry);
  buffer_ += '\n';
  ++buffered_records_;
  ++appended_;
  if (buffered_records_ >= kBatchRecords) flush_if_due();
}

void JournalWriter::flush_if_due() {
  if (buffered_records_ == 0) return;
  const double now = monotonic_seconds();
  if (buffered_records_ < kBatchRecords && now - first_buffered_at_ < kBatchAgeS) return;
  write_buffer();
  if (now - last_sync_at_ >= kSyncInterval) sync();
}

void JournalWriter::sync() {
  write_buffer();
  if (::fsync(fd_) != 0) io_fail(path_, "fsync of the journal failed", errno);
  last_sync_at_ = monotonic_seconds();
}

void JournalWriter::remove() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}

void JournalWriter::write_buffer() {
  ROSE_ASSERT(fd_ >= 0);
  // One write() per batch: a kill between batches never splits a line; a kill inside one leaves
  // at most a torn last line, which read_journal drops.
  std::string_view data = buffer_;
  while (!data.empty()) {
    const ssize_t n = ::write(fd_, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      io_fail(path_, "write to the journal failed", errno);
    }
    data.remove_prefix(size_t(n));
  }
  buffer_.clear();
  buffered_records_ = 0;
}

}  // namespace rose
