// Finding and opening libtritonserver at run time. Nothing here links the
// core: every function is resolved with dlsym into one TritonApi table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "triton_api.h"

namespace tsb {

struct LoadedCore {
  std::string path;
  uint32_t api_major = 0;
  uint32_t api_minor = 0;
};

// Opens the core at `path` (RTLD_GLOBAL: backends resolve TRITONBACKEND_*
// from it). Libraries that sit in the same folder and are reachable from the
// DT_NEEDED entries of the core or of any of `companions` (e.g. bundled
// backends) are preloaded first, dependencies before dependents, because
// such bundles carry no RPATH. Resolves every required symbol and checks the
// API version. Idempotent: a second call returns the already loaded core.
LoadedCore load_triton(const std::string& path,
                       const std::vector<std::string>& companions);

// The loaded core's function table; throws UNAVAILABLE if none is loaded.
const TritonApi& triton();
bool triton_loaded() noexcept;
const LoadedCore& loaded_core();

// DT_NEEDED entries of an ELF shared object (empty if unreadable).
std::vector<std::string> elf_needed(const std::string& path);

}  // namespace tsb
