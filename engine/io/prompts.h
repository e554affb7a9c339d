#pragma once
// Prompt files (JSONL; reference/formats.md): one request per line, either roseinfer's own fields
// or an OpenAI batch request line. Errors name the file, the line and the field.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat/message.h"

namespace rose {

struct RequestSpec {
  std::string id;                        // "id", else the OpenAI "custom_id", else "line-N"
  std::optional<std::string> custom_id;  // set for OpenAI batch lines; output follows that shape
  std::optional<std::string> prompt;     // text to tokenize
  std::vector<ChatMessage> messages;     // or a chat (OpenAI "messages"), rendered for the model
  std::optional<std::vector<int32_t>> prompt_token_ids;  // or ids as given
  std::optional<int> max_tokens;
  std::optional<float> temperature;
  std::optional<int> top_k;
  std::optional<float> top_p;
  std::optional<uint64_t> seed;
  std::optional<bool> ignore_eos;
  std::vector<std::string> stop;            // "stop": a string or an array of strings
  std::optional<bool> skip_special_tokens;  // completion text leaves special tokens out
  std::optional<double> arrival_time;       // seconds from the start of the run (online trace)
  int line = 0;                             // 1-based line in the file
  // OpenAI batch lines: the body used "messages" (output is a chat.completion, else a
  // text_completion). The messages stay as they are until prepare_requests (engine/io/requests.h)
  // renders them with the model's chat template, or "role: content" lines without one.
  bool openai_chat = false;
};

struct SkippedLine {
  int line = 0;
  std::string message;  // "FILE:LINE: field 'x': ..."
};

struct PromptFile {
  std::vector<RequestSpec> requests;
  std::vector<SkippedLine> skipped;  // only with skip_invalid
};

// Reads a whole file. A file without any request is an error; so is a repeated id. Blank lines are
// ignored; a UTF-8 BOM and CRLF line ends are accepted; a line with invalid UTF-8 or bad JSON is an
// error (or a skip with skip_invalid). `source` names the file in messages.
PromptFile parse_prompt_jsonl(std::string_view content, const std::string& source,
                              bool skip_invalid);
PromptFile read_prompt_file(const std::filesystem::path& path, bool skip_invalid);

// One non-blank line of a prompt file: its request, or why it is not one ("FILE:LINE: ...").
struct PromptLine {
  int line = 0;
  std::optional<RequestSpec> spec;
  std::string error;  // set when spec is empty
};

// Reads a prompt file one line at a time, so memory does not grow with the file (`run` streams
// it). Lines parse exactly as in parse_prompt_jsonl (BOM, CRLF, blank lines), but ids are not
// checked for repeats here: scan_prompt_file (prompt_scan.h) does that over the whole file.
class PromptLineReader {
 public:
  // rose::Error naming the file when it is missing, a directory or unreadable.
  explicit PromptLineReader(const std::filesystem::path& path);
  ~PromptLineReader();
  PromptLineReader(const PromptLineReader&) = delete;
  PromptLineReader& operator=(const PromptLineReader&) = delete;
  // The next non-blank line; false at the end of the file.
  bool next(PromptLine& out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rose
