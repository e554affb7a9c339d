#pragma once
// The step timeline probe's host side (the device side and what it records: trace_probe.cuh):
// whether this build has it, and writing what it recorded. ROSEINFER_CUDA_TRACE_FILE asks the
// CUDA backend for the file (backend_switches.h).
#include <cstdio>
#include <string>

namespace rose {
namespace trace_probe {

// True in builds configured with -DROSEINFER_TRACE_PROBE=ON.
bool built();

// One probed unit's records (the current device's) into f; false with *error when a copy fails.
bool dump_gemv_quant(std::FILE* f, std::string* error);
bool dump_attention_decode(std::FILE* f, std::string* error);
bool dump_norm(std::FILE* f, std::string* error);
bool dump_sampling(std::FILE* f, std::string* error);

// Every unit's records of the current device into `path`, through a temporary file renamed when
// complete (after a device synchronize); false with *error.
bool write_file(const std::string& path, std::string* error);

}  // namespace trace_probe
}  // namespace rose
