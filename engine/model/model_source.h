#pragma once
// Where --model points: a preset name, a .gguf file, a Hugging Face folder, or a Hugging Face repo
// id (org/name) found in the local Hugging Face cache. Resolution only looks at the file system;
// nothing is ever fetched.
#include <filesystem>
#include <map>
#include <string>

namespace rose {

enum class ModelSourceKind { kPreset, kGguf, kHfFolder };

struct ModelSource {
  ModelSourceKind kind = ModelSourceKind::kPreset;
  std::string name;            // what --model said
  std::filesystem::path path;  // the .gguf file or the folder (empty for a preset)
  std::string origin;          // how it was found, for messages: "preset", "path", "HF cache (...)"
};

// Environment variables the resolver reads, passed in so tests need not touch the process's own.
using EnvLookup = std::map<std::string, std::string>;
EnvLookup process_environment();  // HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME, HOME from getenv

// The Hugging Face hub cache folder: HF_HUB_CACHE, else HF_HOME/hub, else
// XDG_CACHE_HOME/huggingface/hub, else HOME/.cache/huggingface/hub.
std::filesystem::path hf_hub_cache(const EnvLookup& env);

// Resolves in DESIGN.md's order: preset, path to a .gguf, folder, repo id in the HF cache (its
// refs/main snapshot, else its only snapshot). A folder or snapshot holding no config.json but
// exactly one .gguf resolves to that file. Throws rose::Error saying what was tried.
ModelSource resolve_model_source(const std::string& model, const EnvLookup& env);

}  // namespace rose
