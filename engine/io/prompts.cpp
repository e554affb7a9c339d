// Prompt files: one JSON object per line (reference/formats.md), parsed with simdjson's DOM parser.
// Every user mistake becomes a rose::Error whose message starts with "FILE:LINE:" and names the
// field, so a user can find the line in an editor; with skip_invalid the same message is recorded
// as a skipped line instead.
#include "engine/io/prompts.h"

#include <simdjson.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <system_error>
#include <unordered_map>

#include "engine/common/error.h"
#include "engine/common/utf8.h"

namespace rose {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

// Raised for one bad line; turned into "FILE:LINE: message" (or a skip) by the line loop.
struct LineError {
  std::string message;
};

[[noreturn]] void field_error(std::string_view field, std::string_view what, element value) {
  std::string got = simdjson::minify(value);
  constexpr size_t kMaxShown = 60;  // a huge value would drown the message
  if (got.size() > kMaxShown) got = got.substr(0, kMaxShown) + "...";
  throw LineError{fmt::format("field '{}': expected {}, got {}", field, what, got)};
}

[[noreturn]] void line_error(std::string message) { throw LineError{std::move(message)}; }

// Byte offset of the first invalid UTF-8 sequence, or npos. Only called once simdjson's fast check
// has failed, to tell the user where.
size_t find_invalid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const utf8::Scan scan = utf8::scan(s.substr(i));
    if (scan.kind != utf8::Scan::kValid) return i;
    i += scan.length;
  }
  return std::string_view::npos;
}

// When simdjson rejects a line, checks whether the line holds one complete object followed by more
// text, which deserves a clearer message than "improper structure". Returns the 1-based column of
// the trailing text, or 0.
size_t trailing_content_column(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) ++i;
  if (i == s.size() || (s[i] != '{' && s[i] != '[')) return 0;
  int depth = 0;
  bool in_string = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) break;
    }
  }
  if (i >= s.size()) return 0;
  for (size_t j = i + 1; j < s.size(); ++j) {
    if (s[j] != ' ' && s[j] != '\t' && s[j] != '\r') return j + 1;
  }
  return 0;
}

std::optional<element> find_field(object obj, std::string_view key) {
  element value;
  if (obj.at_key(key).get(value)) return std::nullopt;
  return value;
}

bool as_int64(element v, int64_t& out) {
  if (v.type() == element_type::INT64) return !v.get_int64().get(out);
  if (v.type() == element_type::UINT64) return false;  // beyond int64: out of every range we take
  return false;
}

// A JSON number as a double (integers included); false for other types or non-finite values.
bool as_number(element v, double& out) {
  switch (v.type()) {
    case element_type::INT64:
      out = static_cast<double>(v.get_int64().value_unsafe());
      return true;
    case element_type::UINT64:
      out = static_cast<double>(v.get_uint64().value_unsafe());
      return true;
    case element_type::DOUBLE:
      out = v.get_double().value_unsafe();
      return std::isfinite(out);
    default:
      return false;
  }
}

std::string get_string(element v, std::string_view field, std::string_view what = "a string") {
  std::string_view s;
  if (v.type() != element_type::STRING || v.get_string().get(s)) field_error(field, what, v);
  return std::string(s);
}

int get_max_tokens(element v, std::string_view field) {
  int64_t n = 0;
  if (!as_int64(v, n) || n < 1 || n > std::numeric_limits<int32_t>::max()) {
    field_error(field, "a positive integer", v);
  }
  return static_cast<int>(n);
}

float get_temperature(element v, std::string_view field) {
  double t = 0;
  if (!as_number(v, t) || t < 0) field_error(field, "a number >= 0", v);
  return static_cast<float>(t);
}

int get_top_k(element v, std::string_view field) {
  int64_t k = 0;
  if (!as_int64(v, k) || k < 0 || k > std::numeric_limits<int32_t>::max()) {
    field_error(field, "an integer >= 0", v);
  }
  return static_cast<int>(k);
}

float get_top_p(element v, std::string_view field) {
  double p = 0;
  if (!as_number(v, p) || !(p > 0 && p <= 1)) field_error(field, "a number in (0, 1]", v);
  return static_cast<float>(p);
}

uint64_t get_seed(element v, std::string_view field) {
  if (v.type() == element_type::UINT64) return v.get_uint64().value_unsafe();
  int64_t s = 0;
  if (!as_int64(v, s) || s < 0) field_error(field, "an unsigned integer", v);
  return static_cast<uint64_t>(s);
}

bool get_bool(element v, std::string_view field) {
  if (v.type() != element_type::BOOL) field_error(field, "true or false", v);
  return v.get_bool().value_unsafe();
}

double get_arrival_time(element v, std::string_view field) {
  double t = 0;
  if (!as_number(v, t) || t < 0) field_error(field, "a number of seconds >= 0", v);
  return t;
}

std::string get_id(element v, std::string_view field) {
  switch (v.type()) {
    case element_type::STRING: {
      // The id names the request's output line (and keys the resume journal): an empty one would
      // leave the output unmatchable.
      std::string id(v.get_string().value_unsafe());
      if (id.empty()) {
        line_error(fmt::format("field '{}': empty; an id names the request's output line", field));
      }
      return id;
    }
    case element_type::INT64:
      return std::to_string(v.get_int64().value_unsafe());
    case element_type::UINT64:
      return std::to_string(v.get_uint64().value_unsafe());
    default:
      field_error(field, "a string or an integer", v);
  }
}

std::vector<int32_t> get_token_ids(element v, std::string_view field) {
  simdjson::dom::array array;
  if (v.type() != element_type::ARRAY || v.get_array().get(array)) {
    field_error(field, "an array of token ids", v);
  }
  std::vector<int32_t> ids;
  ids.reserve(array.size());
  size_t index = 0;
  for (element item : array) {
    int64_t id = 0;
    if (!as_int64(item, id) || id < 0 || id > std::numeric_limits<int32_t>::max()) {
      field_error(fmt::format("{}[{}]", field, index), "a token id (an integer >= 0)", item);
    }
    ids.push_back(static_cast<int32_t>(id));
    ++index;
  }
  if (ids.empty()) line_error(fmt::format("field '{}': empty; a request needs a prompt", field));
  return ids;
}

std::string get_prompt_text(element v, std::string_view field) {
  std::string text = get_string(v, field);
  if (text.empty()) line_error(fmt::format("field '{}': empty; a request needs a prompt", field));
  return text;
}

// OpenAI's `stop`: null, one string, or an array of strings (OpenAI allows up to 4; more are
// accepted), none of them empty.
std::vector<std::string> get_stop_strings(element v, std::string_view field) {
  if (v.type() == element_type::NULL_VALUE) return {};
  auto nonempty = [](element item, const std::string& item_field) {
    std::string stop = get_string(item, item_field);
    if (stop.empty()) line_error(fmt::format("field '{}': an empty stop string", item_field));
    return stop;
  };
  if (v.type() == element_type::STRING) return {nonempty(v, std::string(field))};
  simdjson::dom::array array;
  if (v.type() != element_type::ARRAY || v.get_array().get(array)) {
    field_error(field, "a string or an array of strings", v);
  }
  std::vector<std::string> stops;
  size_t index = 0;
  for (element item : array) stops.push_back(nonempty(item, fmt::format("{}[{}]", field, index++)));
  return stops;
}

// The sampling and length fields shared by roseinfer lines and OpenAI bodies. `prefix` is "" or
// "body." so messages name the field as it appears in the file.
void read_common_fields(object obj, std::string_view prefix, RequestSpec& spec) {
  auto name = [&](std::string_view key) { return fmt::format("{}{}", prefix, key); };
  if (auto v = find_field(obj, "max_tokens")) {
    spec.max_tokens = get_max_tokens(*v, name("max_tokens"));
  } else if (auto v2 = find_field(obj, "max_completion_tokens")) {
    spec.max_tokens = get_max_tokens(*v2, name("max_completion_tokens"));
  }
  if (auto v = find_field(obj, "temperature"))
    spec.temperature = get_temperature(*v, name("temperature"));
  if (auto v = find_field(obj, "top_k")) spec.top_k = get_top_k(*v, name("top_k"));
  if (auto v = find_field(obj, "top_p")) spec.top_p = get_top_p(*v, name("top_p"));
  if (auto v = find_field(obj, "seed")) spec.seed = get_seed(*v, name("seed"));
  if (auto v = find_field(obj, "ignore_eos")) spec.ignore_eos = get_bool(*v, name("ignore_eos"));
  if (auto v = find_field(obj, "stop")) spec.stop = get_stop_strings(*v, name("stop"));
  if (auto v = find_field(obj, "skip_special_tokens")) {
    spec.skip_special_tokens = get_bool(*v, name("skip_special_tokens"));
  }
}

// A chat message's content: a string, or an array of parts of which the {"type": "text"} ones
// count.
std::string message_content(element content, std::string_view field) {
  if (content.type() == element_type::STRING)
    return std::string(content.get_string().value_unsafe());
  if (content.type() != element_type::ARRAY) {
    field_error(field, "a string or an array of text parts", content);
  }
  simdjson::dom::array parts;
  if (content.get_array().get(parts))
    field_error(field, "a string or an array of text parts", content);
  std::string text;
  size_t index = 0;
  for (element part : parts) {
    const std::string part_field = fmt::format("{}[{}]", field, index++);
    object part_obj;
    if (part.get_object().get(part_obj)) field_error(part_field, "an object", part);
    auto type = find_field(part_obj, "type");
    if (!type || type->type() != element_type::STRING) {
      line_error(fmt::format("field '{}.type': missing or not a string", part_field));
    }
    if (type->get_string().value_unsafe() != "text") continue;  // images and audio carry no text
    auto part_text = find_field(part_obj, "text");
    if (!part_text) line_error(fmt::format("field '{}.text': missing", part_field));
    text += get_string(*part_text, part_field + ".text");
  }
  return text;
}

std::vector<ChatMessage> parse_messages(element messages, std::string_view name) {
  simdjson::dom::array array;
  if (messages.type() != element_type::ARRAY || messages.get_array().get(array) ||
      array.size() == 0) {
    field_error(name, "a nonempty array of messages", messages);
  }
  std::vector<ChatMessage> parsed;
  size_t index = 0;
  for (element message : array) {
    const std::string field = fmt::format("{}[{}]", name, index++);
    object obj;
    if (message.get_object().get(obj))
      field_error(field, "an object with role and content", message);
    auto role = find_field(obj, "role");
    if (!role) line_error(fmt::format("field '{}.role': missing", field));
    auto content = find_field(obj, "content");
    if (!content) line_error(fmt::format("field '{}.content': missing", field));
    ChatMessage& turn = parsed.emplace_back();
    turn.role = get_string(*role, field + ".role");
    turn.content = message_content(*content, field + ".content");
  }
  return parsed;
}

RequestSpec parse_openai_line(object obj, int line) {
  RequestSpec spec;
  spec.line = line;
  auto custom_id = find_field(obj, "custom_id");
  if (!custom_id) line_error("field 'custom_id': missing (an OpenAI batch line needs one)");
  spec.custom_id = get_id(*custom_id, "custom_id");
  if (auto method = find_field(obj, "method")) {
    if (get_string(*method, "method") != "POST") field_error("method", "\"POST\"", *method);
  }
  if (auto url = find_field(obj, "url")) get_string(*url, "url");  // the body decides the shape
  auto body_value = find_field(obj, "body");
  if (!body_value) line_error("field 'body': missing (an OpenAI batch line needs one)");
  object body;
  if (body_value->get_object().get(body)) field_error("body", "an object", *body_value);

  auto prompt = find_field(body, "prompt");
  auto messages = find_field(body, "messages");
  if (prompt && messages) {
    line_error("fields 'body.prompt' and 'body.messages': give one, not both");
  } else if (messages) {
    spec.messages = parse_messages(*messages, "body.messages");
    spec.openai_chat = true;
  } else if (prompt) {
    // The completions API takes a string or one prompt as an array of token ids.
    if (prompt->type() == element_type::ARRAY) {
      spec.prompt_token_ids = get_token_ids(*prompt, "body.prompt");
    } else {
      spec.prompt = get_prompt_text(*prompt, "body.prompt");
    }
  } else {
    line_error("field 'body.prompt': missing (give 'body.prompt' or 'body.messages')");
  }
  read_common_fields(body, "body.", spec);
  spec.id = spec.custom_id.value();
  if (auto id = find_field(obj, "id")) spec.id = get_id(*id, "id");
  return spec;
}

RequestSpec parse_native_line(object obj, int line) {
  RequestSpec spec;
  spec.line = line;
  auto prompt = find_field(obj, "prompt");
  auto ids = find_field(obj, "prompt_token_ids");
  auto messages = find_field(obj, "messages");
  if (prompt && ids) {
    line_error("fields 'prompt' and 'prompt_token_ids': give one, not both");
  } else if (messages && (prompt || ids)) {
    line_error(fmt::format("fields 'messages' and '{}': give one, not both",
                           prompt ? "prompt" : "prompt_token_ids"));
  } else if (messages) {
    spec.messages = parse_messages(*messages, "messages");
  } else if (prompt) {
    spec.prompt = get_prompt_text(*prompt, "prompt");
  } else if (ids) {
    spec.prompt_token_ids = get_token_ids(*ids, "prompt_token_ids");
  } else {
    line_error("field 'prompt': missing (give 'prompt', 'prompt_token_ids' or 'messages')");
  }
  read_common_fields(obj, "", spec);
  if (auto v = find_field(obj, "arrival_time"))
    spec.arrival_time = get_arrival_time(*v, "arrival_time");
  spec.id = fmt::format("line-{}", line);
  if (auto id = find_field(obj, "id")) spec.id = get_id(*id, "id");
  return spec;
}

RequestSpec parse_line(simdjson::dom::parser& parser, std::string_view text, int line) {
  if (!simdjson::validate_utf8(text.data(), text.size())) {
    const size_t at = find_invalid_utf8(text);
    line_error(
        fmt::format("invalid UTF-8 at column {}", at == std::string_view::npos ? 0 : at + 1));
  }
  element root;
  if (auto err = parser.parse(text.data(), text.size(), /*realloc_if_needed=*/true).get(root)) {
    if (const size_t column = trailing_content_column(text)) {
      line_error(
          fmt::format("invalid JSON: unexpected text after the object at column {}", column));
    }
    line_error(fmt::format("invalid JSON: {}", simdjson::error_message(err)));
  }
  object obj;
  if (root.get_object().get(obj)) {
    line_error(fmt::format("expected a JSON object per line, got {}",
                           root.type() == element_type::ARRAY ? "an array" : "a scalar"));
  }
  // An OpenAI batch line is recognised by its envelope.
  if (find_field(obj, "body") || find_field(obj, "custom_id")) return parse_openai_line(obj, line);
  return parse_native_line(obj, line);
}

bool is_blank(std::string_view s) {
  for (char c : s) {
    if (c != ' ' && c != '\t' && c != '\r' && c != '\f' && c != '\v') return false;
  }
  return true;
}

}  // namespace

PromptFile parse_prompt_jsonl(std::string_view content, const std::string& source,
                              bool skip_invalid) {
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  if (content.substr(0, kBom.size()) == kBom) content.remove_prefix(kBom.size());

  PromptFile file;
  simdjson::dom::parser parser;
  std::unordered_map<std::string, int> id_lines;  // id -> line it was first seen on
  int line = 0;
  size_t pos = 0;
  while (pos < content.size()) {
    ++line;
    size_t end = content.find('\n', pos);
    if (end == std::string_view::npos) end = content.size();
    std::string_view text = content.substr(pos, end - pos);
    pos = end + 1;
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (is_blank(text)) continue;
    try {
      RequestSpec spec = parse_line(parser, text, line);
      auto [it, inserted] = id_lines.emplace(spec.id, line);
      if (!inserted) {
        line_error(fmt::format("field '{}': duplicate id '{}' (first on line {})",
                               spec.custom_id ? "custom_id" : "id", spec.id, it->second));
      }
      file.requests.push_back(std::move(spec));
    } catch (const LineError& e) {
      std::string message = fmt::format("{}:{}: {}", source, line, e.message);
      if (!skip_invalid) throw Error(message);
      file.skipped.push_back(SkippedLine{line, std::move(message)});
    }
  }
  if (file.requests.empty()) {
    if (file.skipped.empty()) fail("{}: no requests (the file has no non-blank lines)", source);
    fail("{}: no valid requests ({} lines skipped; the first: {})", source, file.skipped.size(),
         file.skipped.front().message);
  }
  return file;
}

namespace {

// The checks every prompt file gets before it is opened.
void check_prompt_path(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) fail("{}: no such file", name);
  if (std::filesystem::is_directory(status))
    fail("{}: is a directory, expected a JSONL file", name);
}

}  // namespace

PromptFile read_prompt_file(const std::filesystem::path& path, bool skip_invalid) {
  const std::string name = path.string();
  check_prompt_path(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open for reading", name);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) fail("{}: read error", name);
  return parse_prompt_jsonl(buffer.view(), name, skip_invalid);
}

struct PromptLineReader::Impl {
  std::string source;
  std::ifstream in;
  simdjson::dom::parser parser;
  std::string text;
  int line = 0;
};

PromptLineReader::PromptLineReader(const std::filesystem::path& path)
    : impl_(std::make_unique<Impl>()) {
  impl_->source = path.string();
  check_prompt_path(path);
  impl_->in.open(path, std::ios::binary);
  if (!impl_->in) fail("{}: cannot open for reading", impl_->source);
}

PromptLineReader::~PromptLineReader() = default;

bool PromptLineReader::next(PromptLine& out) {
  Impl& m = *impl_;
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  while (std::getline(m.in, m.text)) {
    std::string_view text = m.text;
    if (++m.line == 1 && text.substr(0, kBom.size()) == kBom) text.remove_prefix(kBom.size());
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (is_blank(text)) continue;
    out.line = m.line;
    out.error.clear();
    try {
      out.spec = parse_line(m.parser, text, m.line);
    } catch (const LineError& e) {
      out.spec.reset();
      out.error = fmt::format("{}:{}: {}", m.source, m.line, e.message);
    }
    return true;
  }
  if (m.in.bad()) fail("{}: read error", m.source);
  return false;
}

}  // namespace rose
