#pragma once
// The pieces of a streamed `roseinfer run`: prompt lines are read and checked one at a time
// (RequestStream), completions go to stdout in input order through a small reorder buffer
// (OrderedEmitter), and with -o the output is assembled at the end from the journal, whose lines
// are in finish order (write_output_from_journal). Memory follows the window, not the file.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "engine/io/completions.h"
#include "engine/io/prompt_scan.h"
#include "engine/io/prompts.h"
#include "engine/model/bundle.h"

namespace rose::cli {

// One output line to be: a request (its index among requests, for seeds and the journal) or a
// skipped line (an error record in the output); `position` is its place in the output.
struct StreamItem {
  int64_t position = 0;
  int64_t index = -1;  // -1 for a skipped line
  RequestSpec spec;
  SkippedLine skip;
  bool skipped() const { return index < 0; }
};

class RequestStream {
 public:
  // `scan` is the first pass over `path`; with skip_invalid, a line whose chat template raises is
  // skipped too (found here, as it is read), so it fails alone with the template's message.
  RequestStream(const std::filesystem::path& path, const PromptFileScan& scan, bool skip_invalid,
                const ModelBundle& model);
  bool next(StreamItem& item);  // false at the end of the file

  int64_t requests_seen() const { return next_index_; }
  int64_t template_skips() const { return int64_t(template_skips_.size()); }
  // Every skipped line (the first pass's and the templates'), by line: O(bad lines) memory.
  std::vector<SkippedLine> all_skipped() const;

 private:
  bool renders(const RequestSpec& spec);

  std::string source_;
  PromptLineReader reader_;
  const std::vector<SkippedLine>& scan_skipped_;
  size_t next_scan_skip_ = 0;
  bool skip_invalid_;
  const ModelBundle& model_;
  std::vector<SkippedLine> template_skips_;
  int64_t next_index_ = 0;
  int64_t next_position_ = 0;
};

// Output lines put in any order, written to stdout in position order; holds only the lines that
// wait for an earlier one.
class OrderedEmitter {
 public:
  void put(int64_t position, std::string line);
  // Positions handed out but not yet written: the reorder window in use.
  int64_t waiting(int64_t next_position) const { return next_position - next_to_write_; }

 private:
  int64_t next_to_write_ = 0;
  std::map<int64_t, std::string> held_;
};

struct OutputTotals {
  int64_t requests = 0, prompt_tokens = 0, output_tokens = 0, failed = 0;
  std::string first_error;
};

void add_totals(OutputTotals& totals, const Completion& completion);

// Writes OUT (atomically) in input order from the journal: one scan of the journal makes an
// index -> (offset, length) table (12 bytes per request), then the prompt file is read once more
// and each request's entry is read back at its offset. rose::Error when the journal lacks a
// request or holds one the file does not.
OutputTotals write_output_from_journal(const std::filesystem::path& prompts,
                                       const std::filesystem::path& journal,
                                       const std::filesystem::path& output,
                                       const std::vector<SkippedLine>& skipped,
                                       int64_t num_requests, bool openai_shape,
                                       const std::string& model_name);

}  // namespace rose::cli
