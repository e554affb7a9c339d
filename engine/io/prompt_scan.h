#pragma once
// A first pass over a prompt file for streamed runs: every line is parsed (nothing is kept but a
// count, the bad lines and 16 bytes per request while repeated ids are looked for), so a bad file
// fails before the model loads, exactly as when the whole file is read, and the run knows its
// total for progress.
#include <cstdint>
#include <filesystem>
#include <vector>

#include "engine/io/prompts.h"

namespace rose {

struct PromptFileScan {
  int64_t num_requests = 0;          // lines that parse and do not repeat an id
  std::vector<SkippedLine> skipped;  // with skip_invalid: bad lines and repeated ids, by line
  bool all_have_arrival_time = true;
  bool any_custom_id = false;  // some line is an OpenAI batch line
};

// The same errors, in the same words, as read_prompt_file: without skip_invalid the first bad line
// (or repeated id) in file order is a rose::Error "FILE:LINE: ...", and a file without any request
// is one either way.
PromptFileScan scan_prompt_file(const std::filesystem::path& path, bool skip_invalid);

// 64 bits of XXH3 of a request id (the journal keeps no ids in memory, only these).
uint64_t request_id_hash(const std::string& id);

}  // namespace rose
