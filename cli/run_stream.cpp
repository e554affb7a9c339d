#include "cli/run_stream.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <limits>

#include "cli/common.h"
#include "engine/common/error.h"
#include "engine/io/atomic_file.h"
#include "engine/io/completions.h"
#include "engine/io/journal.h"
#include "engine/io/requests.h"

namespace rose::cli {

RequestStream::RequestStream(const std::filesystem::path& path, const PromptFileScan& scan,
                             bool skip_invalid, const ModelBundle& model)
    : source_(path.string()),
      reader_(path),
      scan_skipped_(scan.skipped),
      skip_invalid_(skip_invalid),
      model_(model) {}

bool RequestStream::renders(const RequestSpec& spec) {
  if (!skip_invalid_ || spec.messages.empty()) return true;
  try {
    render_prompt_text(spec, model_, fmt::format("{}:{}", source_, spec.line));
    return true;
  } catch (const Error& e) {
    notice("skipped {}", e.what());
    template_skips_.push_back(SkippedLine{spec.line, e.what()});
    return false;
  }
}

bool RequestStream::next(StreamItem& item) {
  PromptLine line;
  if (!reader_.next(line)) return false;
  item.position = next_position_++;
  item.index = -1;
  if (next_scan_skip_ < scan_skipped_.size() && scan_skipped_[next_scan_skip_].line == line.line) {
    item.skip = scan_skipped_[next_scan_skip_++];
    return true;
  }
  // The first pass parsed this line: failing now means the file changed under the run.
  if (!line.spec) fail("{} (the file changed during the run)", line.error);
  if (!renders(*line.spec)) {
    item.skip = template_skips_.back();
    return true;
  }
  item.index = next_index_++;
  item.spec = std::move(*line.spec);
  return true;
}

std::vector<SkippedLine> RequestStream::all_skipped() const {
  std::vector<SkippedLine> all = scan_skipped_;
  all.insert(all.end(), template_skips_.begin(), template_skips_.end());
  std::sort(all.begin(), all.end(),
            [](const SkippedLine& a, const SkippedLine& b) { return a.line < b.line; });
  return all;
}

void OrderedEmitter::put(int64_t position, std::string line) {
  held_.emplace(position, std::move(line));
  bool wrote = false;
  for (auto it = held_.begin(); it != held_.end() && it->first == next_to_write_;
       it = held_.erase(it)) {
    fmt::print("{}\n", it->second);
    ++next_to_write_;
    wrote = true;
  }
  if (wrote) std::fflush(stdout);
}

namespace {

struct EntrySpan {
  uint64_t offset = std::numeric_limits<uint64_t>::max();
  uint32_t length = 0;
};

// index -> where its journal line is; the last entry of an index wins.
std::vector<EntrySpan> journal_table(const std::filesystem::path& journal, int64_t num_requests) {
  std::vector<EntrySpan> table(static_cast<size_t>(num_requests));
  scan_journal(journal, [&](const JournalEntry& entry, uint64_t offset, uint32_t length) {
    if (entry.index < 0 || entry.index >= num_requests) {
      fail("{}: entry for request {} ('{}'), but the input has {} requests", journal.string(),
           entry.index, entry.id, num_requests);
    }
    table[size_t(entry.index)] = {offset, length};
  });
  return table;
}

}  // namespace

void add_totals(OutputTotals& totals, const Completion& c) {
  ++totals.requests;
  totals.prompt_tokens += c.prompt_tokens;
  totals.output_tokens += int64_t(c.token_ids.size());
  if (c.error.empty()) return;
  if (totals.failed++ == 0) totals.first_error = c.error;
}

OutputTotals write_output_from_journal(const std::filesystem::path& prompts,
                                       const std::filesystem::path& journal,
                                       const std::filesystem::path& output,
                                       const std::vector<SkippedLine>& skipped,
                                       int64_t num_requests, bool openai_shape,
                                       const std::string& model_name) {
  const std::vector<EntrySpan> table = journal_table(journal, num_requests);
  JournalEntryReader entries(journal);
  PromptLineReader reader(prompts);
  AtomicFile file(output);
  const auto created = static_cast<int64_t>(std::time(nullptr));
  OutputTotals totals;
  std::string buffer;
  size_t next_skip = 0;
  int64_t index = 0;
  PromptLine line;
  for (int position = 0; reader.next(line); ++position) {
    if (next_skip < skipped.size() && skipped[next_skip].line == line.line) {
      buffer += invalid_line_json(skipped[next_skip++], openai_shape, position);
    } else {
      if (!line.spec || index >= num_requests)
        fail("{}: the file changed during the run (line {})", prompts.string(), line.line);
      const EntrySpan span = table[size_t(index)];
      if (span.length == 0) fail("{}: request {} is missing", journal.string(), index);
      const JournalEntry entry = entries.read(span.offset, span.length);
      if (entry.id != line.spec->id) {
        fail("{}: entry for request {} ('{}') does not match {}", journal.string(), index, entry.id,
             prompts.string());
      }
      add_totals(totals, entry.completion);
      buffer += completion_json_line(*line.spec, entry.completion, model_name, position, created);
      ++index;
    }
    buffer += '\n';
    if (buffer.size() >= (size_t(1) << 20)) {
      file.write(buffer);
      buffer.clear();
    }
  }
  file.write(buffer);
  file.commit();
  return totals;
}

}  // namespace rose::cli
