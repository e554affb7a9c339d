// --model resolution: presets, .gguf paths, folders, and repo ids in a fake Hugging Face cache.
#include <doctest/doctest.h>

#include <fstream>

#include "engine/model/model_source.h"
#include "test_util.h"

namespace fs = std::filesystem;
using rose::ModelSourceKind;
using rose::resolve_model_source;
using rose::test::contains;
using rose::test::error_of;
using rose::test::TempDir;

namespace {
void touch(const fs::path& path, const std::string& text = "x") {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}
}  // namespace

TEST_CASE("hub cache folder follows HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME, HOME in that order") {
  CHECK(rose::hf_hub_cache({{"HOME", "/h"}}) == fs::path("/h/.cache/huggingface/hub"));
  CHECK(rose::hf_hub_cache({{"HOME", "/h"}, {"XDG_CACHE_HOME", "/x"}}) ==
        fs::path("/x/huggingface/hub"));
  CHECK(rose::hf_hub_cache({{"HOME", "/h"}, {"HF_HOME", "/hf"}}) == fs::path("/hf/hub"));
  CHECK(rose::hf_hub_cache({{"HF_HOME", "/hf"}, {"HF_HUB_CACHE", "/c"}}) == fs::path("/c"));
}

TEST_CASE("presets, gguf files and folders resolve by what is on disk") {
  TempDir dir("model_source");
  CHECK(resolve_model_source("tiny", {}).kind == ModelSourceKind::kPreset);

  const fs::path gguf = dir.path / "m.Q4_1.GGUF";
  touch(gguf);
  auto source = resolve_model_source(gguf.string(), {});
  CHECK(source.kind == ModelSourceKind::kGguf);
  CHECK(source.path == gguf);

  const fs::path folder = dir.path / "hf";
  touch(folder / "config.json", "{}");
  source = resolve_model_source(folder.string(), {});
  CHECK(source.kind == ModelSourceKind::kHfFolder);
  CHECK(source.path == folder);

  touch(dir.path / "weights.bin");
  CHECK(contains(error_of([&] { resolve_model_source((dir.path / "weights.bin").string(), {}); }),
                 "must be a .gguf"));
  CHECK(contains(error_of([&] { resolve_model_source("no-such-model", {}); }), "not a preset"));
}

TEST_CASE("a folder of GGUF files resolves to its only GGUF and refuses to guess among several") {
  TempDir dir("model_source_gguf_folder");
  touch(dir.path / "a.gguf");
  CHECK(resolve_model_source(dir.path.string(), {}).path == dir.path / "a.gguf");
  touch(dir.path / "b.gguf");
  const std::string message = error_of([&] { resolve_model_source(dir.path.string(), {}); });
  CHECK(contains(message, "several GGUF files (a.gguf, b.gguf)"));
}

TEST_CASE("repo ids are found in the local Hugging Face cache, never fetched") {
  TempDir dir("model_source_hub");
  const rose::EnvLookup env{{"HF_HUB_CACHE", dir.path.string()}};
  const fs::path repo = dir.path / "models--Org--Model";
  touch(repo / "snapshots" / "abc" / "config.json", "{}");
  touch(repo / "snapshots" / "def" / "config.json", "{}");

  // Two snapshots and no refs/main: ambiguous.
  CHECK(contains(error_of([&] { resolve_model_source("Org/Model", env); }), "2 snapshots"));
  touch(repo / "refs" / "main", "def\n");
  auto source = resolve_model_source("Org/Model", env);
  CHECK(source.kind == ModelSourceKind::kHfFolder);
  CHECK(source.path == repo / "snapshots" / "def");
  CHECK(contains(source.origin, "Hugging Face cache"));

  const std::string missing = error_of([&] { resolve_model_source("Org/Other", env); });
  CHECK(contains(missing, "not in the local Hugging Face cache"));
  CHECK(contains(missing, "never downloads"));
}
