#include "engine/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>

#include "engine/common/error.h"
#include "engine/common/utf8.h"

namespace rose {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

// Per-thread matching state: a match context with limits, so a pathological pattern from a
// tokenizer.json fails with an error instead of running for ever, and a JIT stack big enough for
// long runs of whitespace (the default 32 KiB one overflows on them).
struct ThreadMatchState {
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  ThreadMatchState() {
    context = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
    if (context != nullptr) {
      pcre2_set_match_limit(context, 50'000'000);
      pcre2_set_depth_limit(context, 100'000);
      if (jit_stack != nullptr) pcre2_jit_stack_assign(context, nullptr, jit_stack);
    }
  }
  ~ThreadMatchState() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
  }
};

pcre2_match_context* thread_match_context() {
  thread_local ThreadMatchState state;
  return state.context;
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};

}  // namespace

Regex::Regex(std::string_view pattern, bool literal, const std::string& where) {
  uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
  if (literal) options |= PCRE2_LITERAL;
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                        &error_code, &error_offset, nullptr);
  if (code_ == nullptr) {
    fail("{}: regex does not compile at offset {}: {}", where, error_offset,
         pcre2_message(error_code));
  }
  // JIT is an optimisation only: when it is unavailable the interpreter gives the same matches.
  pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
}

Regex::~Regex() { pcre2_code_free(code_); }

void Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& matches) const {
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> data(
      pcre2_match_data_create_from_pattern(code_, nullptr));
  if (!data) fail("tokenizer: out of memory for regex match data");
  pcre2_match_context* context = thread_match_context();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t offset = 0;
  while (offset <= text.size()) {
    const int rc = pcre2_match(code_, subject, text.size(), offset, 0, data.get(), context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) fail("tokenizer: pre-tokenizer regex failed on the input: {}", pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
    size_t begin = ovector[0], end = ovector[1];
    if (end < begin || begin < offset || end > text.size()) {
      // Only \K in a lookaround can do this; such a match has no sensible split.
      fail("tokenizer: pre-tokenizer regex produced a match that ends before it starts");
    }
    if (end > begin) {
      matches.emplace_back(begin, end);
      offset = end;
    } else {
      // An empty match splits nothing (empty pieces are dropped); move one character on, as
      // Oniguruma's find_iter does.
      if (end >= text.size()) break;
      offset = end + utf8::scan(text.substr(end)).length;
    }
  }
}

bool Regex::search(std::string_view text) const {
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> data(
      pcre2_match_data_create_from_pattern(code_, nullptr));
  if (!data) fail("tokenizer: out of memory for regex match data");
  const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, 0,
                             data.get(), thread_match_context());
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) fail("tokenizer: regex failed on the input: {}", pcre2_message(rc));
  return true;
}

}  // namespace rose
