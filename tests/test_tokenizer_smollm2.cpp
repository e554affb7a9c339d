// The real SmolLM2-135M-Instruct vocabulary through make_tokenizer, against the test vectors of
// ../shared/reference/gguf-and-chat-templates.md (HF tokenizers and llama.cpp agree on them).
// Reads the tables scripts/dump_gguf_vocab.py writes next to the cached GGUF; exits 77 (skipped)
// when there is no dump. ROSEINFER_MODEL_CACHE names the cache folder (default ~/.cache/roseinfer).
#include <doctest/doctest.h>
#include <simdjson.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/vocab.h"

namespace fs = std::filesystem;

namespace {

fs::path dump_path() {
  const char* cache = std::getenv("ROSEINFER_MODEL_CACHE");
  const char* home = std::getenv("HOME");
  const fs::path folder = cache ? fs::path(cache) : fs::path(home ? home : "") / ".cache/roseinfer";
  return folder / "SmolLM2-135M-Instruct.Q4_1.vocab.json";
}

rose::TokenizerVocab read_dump(const fs::path& path) {
  simdjson::dom::parser parser;
  const simdjson::dom::element root = parser.load(path.string());
  rose::TokenizerVocab vocab;
  vocab.source = path.string();
  vocab.model = std::string_view(root["model"]);
  vocab.pre = std::string_view(root["pre"]);
  for (simdjson::dom::element t : root["tokens"].get_array()) {
    vocab.tokens.emplace_back(std::string_view(t));
  }
  for (simdjson::dom::element t : root["token_types"].get_array()) {
    vocab.token_types.push_back(static_cast<int32_t>(int64_t(t)));
  }
  for (simdjson::dom::element m : root["merges"].get_array()) {
    vocab.merges.emplace_back(std::string_view(m));
  }
  vocab.bos_id = static_cast<int32_t>(int64_t(root["bos_id"]));
  vocab.eos_id = static_cast<int32_t>(int64_t(root["eos_id"]));
  vocab.unk_id = static_cast<int32_t>(int64_t(root["unk_id"]));
  vocab.add_bos = bool(root["add_bos"]);
  return vocab;
}

}  // namespace

TEST_CASE("SmolLM2 vocabulary from GGUF tables gives the reference ids") {
  const fs::path path = dump_path();
  if (!fs::exists(path)) {
    MESSAGE("skipped: no ", path.string(), " (run scripts/dump_gguf_vocab.py)");
    std::exit(77);
  }
  const auto tokenizer = rose::make_tokenizer(read_dump(path));
  using Ids = std::vector<int32_t>;
  CHECK(tokenizer->vocab_size() == 49152);
  CHECK(tokenizer->encode("Hello, we can use") == Ids{19556, 28, 392, 416, 722});
  CHECK(tokenizer->encode("Hello world! 123") == Ids{19556, 905, 17, 216, 33, 34, 35});
  CHECK(tokenizer->encode("  multiple   spaces") == Ids{216, 2701, 256, 5600});
  CHECK(tokenizer->encode("\n") == Ids{198});
  const std::string chat =
      "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
      "Hello!<|im_end|>\n<|im_start|>assistant\n";
  const Ids chat_ids{1, 9690, 198, 2683,  359, 253, 5356, 11173, 30,  2,    198,
                     1, 4093, 198, 19556, 17,  2,   198,  1,     520, 9531, 198};
  CHECK(tokenizer->encode(chat) == chat_ids);
  // add_bos_token is false: no BOS, which would be a stray <|im_start|> here.
  CHECK_FALSE(tokenizer->adds_bos());
  CHECK(tokenizer->encode(chat, true) == chat_ids);
  CHECK(tokenizer->decode(chat_ids, false) == chat);
  CHECK(tokenizer->decode(chat_ids) ==
        "system\nYou are a helpful assistant.\nuser\nHello!\nassistant\n");
  CHECK(tokenizer->is_special(2));
  CHECK(tokenizer->decode(Ids{504, 3575, 282, 4649, 314, 7042, 30, 2}).find("<|im_end|>") ==
        std::string::npos);
}
