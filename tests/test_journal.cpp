// The run journal (engine/io/journal.h): entries round-trip, a torn last line is dropped and cut
// off on reopening, damage in the middle and non-journals are errors, the fingerprint follows the
// input bytes and the configuration.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "engine/io/journal.h"
#include "tests/test_util.h"

using namespace rose;
using rose::test::contains;
using rose::test::error_of;
using rose::test::TempDir;

namespace {

JournalEntry entry(int64_t index, const std::string& id) {
  JournalEntry e;
  e.index = index;
  e.id = id;
  e.completion.prompt_tokens = 7;
  e.completion.token_ids = {1, 2, int32_t(index)};
  e.completion.text = "line \"" + id + "\"\n\xC3\xA9";
  e.completion.finish_reason = "length";
  e.completion.cached_tokens = 3;
  e.completion.ttft_ms = 1.5;
  e.completion.e2el_ms = NAN;
  return e;
}

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_all(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

}  // namespace

TEST_CASE("journal entries written in batches read back whole, in order") {
  TempDir dir("journal");
  const auto path = dir.path / "out.jsonl.partial";
  {
    JournalWriter writer(path, "abc123", 3);
    writer.append(entry(2, "c"));
    JournalEntry failed = entry(0, "a");
    failed.completion.finish_reason = "error";
    failed.completion.error = "non-finite logits at engine step 4";
    writer.append(failed);
    CHECK(writer.entries_appended() == 2);
  }  // the destructor writes what is buffered
  const JournalContents j = read_journal(path);
  CHECK(j.fingerprint == "abc123");
  CHECK(j.num_requests == 3);
  CHECK_FALSE(j.dropped_torn_line);
  CHECK(j.valid_bytes == std::filesystem::file_size(path));
  REQUIRE(j.entries.size() == 2);
  CHECK(j.entries[0].index == 2);
  CHECK(j.entries[0].id == "c");
  const Completion& c = j.entries[0].completion;
  CHECK(c.text == "line \"c\"\n\xC3\xA9");
  CHECK(c.token_ids == std::vector<int32_t>{1, 2, 2});
  CHECK(c.prompt_tokens == 7);
  CHECK(c.cached_tokens == 3);
  CHECK(c.ttft_ms == doctest::Approx(1.5));
  CHECK(std::isnan(c.e2el_ms));
  CHECK(c.error.empty());
  CHECK(j.entries[1].completion.finish_reason == "error");
  CHECK(j.entries[1].completion.error == "non-finite logits at engine step 4");
}

TEST_CASE("a batch is written once full, before the writer is closed") {
  TempDir dir("journal");
  const auto path = dir.path / "j.partial";
  JournalWriter writer(path, "f", 100);
  const auto header_size = std::filesystem::file_size(path);
  for (int i = 0; i < JournalWriter::kBatchRecords - 1; ++i) writer.append(entry(i, "r"));
  CHECK(std::filesystem::file_size(path) == header_size);  // still buffered
  writer.append(entry(99, "r"));
  CHECK(read_journal(path).entries.size() == size_t(JournalWriter::kBatchRecords));
}

TEST_CASE("a new journal replaces a file there whole and leaves no temporary file") {
  TempDir dir("journal");
  const auto path = dir.path / "j.partial";
  write_all(path, "an older file, not a journal\n");
  {
    JournalWriter writer(path, "f", 2);
    writer.append(entry(1, "b"));
  }
  const JournalContents j = read_journal(path);
  CHECK(j.fingerprint == "f");
  CHECK(j.entries.size() == 1);
  int files = 0;
  for (const auto& item : std::filesystem::directory_iterator(dir.path))
    files += !item.is_directory();
  CHECK(files == 1);
}

TEST_CASE("a torn last line is dropped and cut off when the journal is continued") {
  TempDir dir("journal");
  const auto path = dir.path / "j.partial";
  {
    JournalWriter writer(path, "f", 5);
    writer.append(entry(0, "a"));
    writer.append(entry(1, "b"));
  }
  const std::string whole = read_all(path);
  // Power loss in the middle of the last line: it has no newline.
  write_all(path, whole.substr(0, whole.size() - 9));
  JournalContents j = read_journal(path);
  CHECK(j.dropped_torn_line);
  REQUIRE(j.entries.size() == 1);
  CHECK(j.entries[0].id == "a");
  {
    JournalWriter writer(path, j.valid_bytes);
    writer.append(entry(1, "b"));
  }
  j = read_journal(path);
  CHECK_FALSE(j.dropped_torn_line);
  REQUIRE(j.entries.size() == 2);
  CHECK(j.entries[1].id == "b");
  CHECK(read_all(path) == whole);

  // A last line that ends but does not parse (a block of zeros after a crash) is dropped too.
  write_all(path, whole + std::string(12, '\0') + "\n");
  j = read_journal(path);
  CHECK(j.dropped_torn_line);
  CHECK(j.entries.size() == 2);
}

TEST_CASE("damage before the last line, a missing header or an empty file is an error") {
  TempDir dir("journal");
  const auto path = dir.path / "j.partial";
  {
    JournalWriter writer(path, "f", 5);
    writer.append(entry(0, "a"));
    writer.append(entry(1, "b"));
  }
  std::string text = read_all(path);
  const size_t second = text.find('\n') + 1;
  text[second + 3] = '#';  // breaks the first entry (line 2)
  write_all(path, text);
  CHECK(contains(error_of([&] { read_journal(path); }), "j.partial:2: not a complete journal"));

  write_all(path, "{\"id\":\"a\",\"prompt\":\"hi\"}\n");
  CHECK(contains(error_of([&] { read_journal(path); }), "j.partial:1: not a roseinfer journal"));
  write_all(path, "");
  CHECK(contains(error_of([&] { read_journal(path); }), "empty file"));
  CHECK(contains(error_of([&] { read_journal(dir.path / "missing"); }), "cannot open"));
}

TEST_CASE("the fingerprint follows the input bytes and the configuration") {
  TempDir dir("journal");
  const auto input = dir.path / "in.jsonl";
  write_all(input, "{\"prompt\":\"a\"}\n");
  const std::string base = run_fingerprint(input, "model=tiny");
  CHECK(base.size() == 32);
  CHECK(run_fingerprint(input, "model=tiny") == base);
  CHECK(run_fingerprint(input, "model=gpt2") != base);
  write_all(input, "{\"prompt\":\"b\"}\n");
  CHECK(run_fingerprint(input, "model=tiny") != base);
  CHECK(contains(error_of([&] { run_fingerprint(dir.path / "nope", ""); }), "cannot open"));
}

TEST_CASE("the journal of OUT is OUT.partial") {
  CHECK(journal_path_for("runs/out.jsonl") == std::filesystem::path("runs/out.jsonl.partial"));
}

TEST_CASE("scan_journal reports each entry's offset and length, and the reader reads it back") {
  TempDir dir("journal_scan");
  const auto path = dir.path / "out.jsonl.partial";
  {
    JournalWriter writer(path, "f00", 3);
    writer.append(entry(2, "c"));
    writer.append(entry(0, "a"));
    writer.append(entry(1, "b"));
  }
  std::vector<std::pair<uint64_t, uint32_t>> spans(3);
  const JournalContents j =
      scan_journal(path, [&](const JournalEntry& e, uint64_t offset, uint32_t length) {
        spans[size_t(e.index)] = {offset, length};
      });
  CHECK(j.entries.empty());
  CHECK(j.fingerprint == "f00");
  CHECK(j.valid_bytes == std::filesystem::file_size(path));
  JournalEntryReader reader(path);
  for (int64_t i : {1, 0, 2}) {
    const JournalEntry e = reader.read(spans[size_t(i)].first, spans[size_t(i)].second);
    CHECK(e.index == i);
    CHECK(e.id == std::string(1, char('a' + i)));
    CHECK(e.completion.token_ids == std::vector<int32_t>{1, 2, int32_t(i)});
  }
  CHECK(contains(error_of([&] { reader.read(spans[0].first + 1, spans[0].second); }),
                 "no whole entry at byte"));
}
