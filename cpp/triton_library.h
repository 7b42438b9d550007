// Finding and opening libtritonserver at run time. Nothing here links the
// core: every function is resolved with dlsym into one TritonApi table.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
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
// API version; optional functions the core lacks stay null. Idempotent: a second call returns the already loaded core.
LoadedCore load_triton(const std::string& path,
                       const std::vector<std::string>& companions);

// The loaded core's function table; throws UNAVAILABLE if none is loaded.
const TritonApi& triton();
bool triton_loaded() noexcept;
const LoadedCore& loaded_core();

// Raises UNSUPPORTED: `feature` needs the C function `function`, which the
// loaded core lacks; the message names both and the core (path, C API).
[[noreturn]] void raise_missing(const char* feature, const char* function);

// The feature each optional function serves (see TRITON_OPTIONAL_FUNCTIONS).
namespace optional_feature {
#define TRITON_FEATURE_NAME(name, ret, args, feature) \
  constexpr const char* name = feature;
TRITON_OPTIONAL_FUNCTIONS(TRITON_FEATURE_NAME)
#undef TRITON_FEATURE_NAME
}  // namespace optional_feature

template <typename Fn>
Fn need(Fn fn, const char* function, const char* feature) {
  if (fn == nullptr) raise_missing(feature, function);
  return fn;
}

// The loaded core's optional function `name`, called only by the feature
// that needs it: raises UNSUPPORTED at that call when the core lacks it.
#define TRITON_NEED(name)                                  \
  ::tsb::need(::tsb::triton().name, "TRITONSERVER_" #name, \
              ::tsb::optional_feature::name)

// (C function, feature) for each optional function the loaded core lacks.
std::vector<std::pair<std::string, std::string>> missing_functions();

// DT_NEEDED entries of an ELF shared object (empty if unreadable).
std::vector<std::string> elf_needed(const std::string& path);

// Serializes a core message to JSON and deletes it (raises TritonException
// on failure, after the delete).
std::string take_json(TRITONSERVER_Message* message);

}  // namespace tsb
