#include "triton_library.h"

#include <dlfcn.h>
#include <elf.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>

#include "errors.h"

namespace tsb {
namespace {

std::mutex g_load_mutex;
TritonApi g_api;
LoadedCore g_core;
std::atomic<bool> g_loaded{false};

std::string dirname_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

bool file_exists(const std::string& path) {
  std::ifstream f(path);
  return f.good();
}

// Reads `size` bytes at `offset` of `f` into `out`; false when the file
// (of `file_size` bytes) is shorter.
bool read_at(std::ifstream& f, uint64_t file_size, uint64_t offset,
             uint64_t size, std::string* out) {
  if (offset > file_size || size > file_size - offset) return false;
  out->assign(size, '\0');
  f.seekg(static_cast<std::streamoff>(offset));
  return f.read(&(*out)[0], static_cast<std::streamsize>(size)).good();
}

// Resolves each symbol of the table from `handle`; returns missing names.
std::vector<std::string> resolve(void* handle, TritonApi* api) {
  std::vector<std::string> missing;
#define TRITON_RESOLVE_REQUIRED(name, ret, args)                          \
  api->name = reinterpret_cast<ret(*) args>(                            \
      dlsym(handle, "TRITONSERVER_" #name));                             \
  if (api->name == nullptr) missing.push_back("TRITONSERVER_" #name);
#define TRITON_RESOLVE_OPTIONAL(name, ret, args, feature) \
  api->name = reinterpret_cast<ret(*) args>(   \
      dlsym(handle, "TRITONSERVER_" #name));
  TRITON_REQUIRED_FUNCTIONS(TRITON_RESOLVE_REQUIRED)
  TRITON_OPTIONAL_FUNCTIONS(TRITON_RESOLVE_OPTIONAL)
#define TRITON_RESOLVE_BACKEND(name, ret, args)          \
  api->TRITONBACKEND_##name = reinterpret_cast<ret(*) args>( \
      dlsym(handle, "TRITONBACKEND_" #name));
  TRITON_BACKEND_FUNCTIONS(TRITON_RESOLVE_BACKEND)
  TRITON_BACKEND_OPTIONAL_FUNCTIONS(TRITON_RESOLVE_BACKEND)
#undef TRITON_RESOLVE_BACKEND
#undef TRITON_RESOLVE_REQUIRED
#undef TRITON_RESOLVE_OPTIONAL
  return missing;
}

}  // namespace

// Reads only the ELF header, the section headers, the dynamic section and
// its string table (a few KiB), not the file: the core is 30 MiB, and
// reading it whole cost ~120 ms and its size in RSS at every start.
std::vector<std::string> elf_needed(const std::string& path) {
  std::vector<std::string> needed;
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return needed;
  const uint64_t size = static_cast<uint64_t>(f.tellg());
  std::string header, sections, dynamic, strings;
  if (!read_at(f, size, 0, sizeof(Elf64_Ehdr), &header)) return needed;
  auto* eh = reinterpret_cast<const Elf64_Ehdr*>(header.data());
  if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
      eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_shoff == 0 ||
      eh->e_shentsize != sizeof(Elf64_Shdr) ||
      !read_at(f, size, eh->e_shoff, uint64_t(eh->e_shnum) * sizeof(Elf64_Shdr),
               &sections)) {
    return needed;
  }
  auto* sh = reinterpret_cast<const Elf64_Shdr*>(sections.data());
  for (int i = 0; i < eh->e_shnum; ++i) {
    if (sh[i].sh_type != SHT_DYNAMIC) continue;
    if (sh[i].sh_link >= eh->e_shnum) break;
    const Elf64_Shdr& strtab = sh[sh[i].sh_link];
    if (!read_at(f, size, sh[i].sh_offset, sh[i].sh_size, &dynamic) ||
        !read_at(f, size, strtab.sh_offset, strtab.sh_size, &strings)) {
      break;
    }
    auto* dyn = reinterpret_cast<const Elf64_Dyn*>(dynamic.data());
    size_t count = dynamic.size() / sizeof(Elf64_Dyn);
    for (size_t j = 0; j < count && dyn[j].d_tag != DT_NULL; ++j) {
      if (dyn[j].d_tag == DT_NEEDED && dyn[j].d_un.d_val < strings.size()) {
        needed.emplace_back(strings.c_str() + dyn[j].d_un.d_val);
      }
    }
    break;
  }
  return needed;
}

LoadedCore load_triton(const std::string& path,
                       const std::vector<std::string>& companions) {
  std::lock_guard<std::mutex> lock(g_load_mutex);
  if (g_loaded.load()) return g_core;
  if (!file_exists(path)) {
    raise(TRITONSERVER_ERROR_NOT_FOUND, "no such file: " + path);
  }

  // Depth-first over DT_NEEDED, restricted to files in the core's folder:
  // post-order gives dependencies before dependents.
  const std::string folder = dirname_of(path);
  std::vector<std::string> order;
  std::set<std::string> seen;
  std::function<void(const std::string&)> visit = [&](const std::string& lib) {
    for (const std::string& name : elf_needed(lib)) {
      std::string candidate = folder + "/" + name;
      if (seen.count(candidate) || !file_exists(candidate)) continue;
      seen.insert(candidate);
      visit(candidate);
      order.push_back(candidate);
    }
  };
  seen.insert(path);
  visit(path);
  for (const std::string& companion : companions) visit(companion);

  for (const std::string& lib : order) {
    if (dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      const char* why = dlerror();
      raise(TRITONSERVER_ERROR_UNAVAILABLE,
            "failed to preload " + lib + " (a dependency of " + path +
                "): " + (why ? why : "unknown dlopen error"));
    }
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    raise(TRITONSERVER_ERROR_UNAVAILABLE,
          "failed to open the Triton core " + path + ": " +
              (why ? why : "unknown dlopen error"));
  }

  TritonApi api;
  std::vector<std::string> missing = resolve(handle, &api);
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    raise(TRITONSERVER_ERROR_UNSUPPORTED,
          path + " lacks functions this package needs: " + list);
  }
  uint32_t major = 0, minor = 0;
  if (TRITONSERVER_Error* err = api.ApiVersion(&major, &minor)) {
    api.ErrorDelete(err);
    raise(TRITONSERVER_ERROR_INTERNAL, "TRITONSERVER_ApiVersion failed");
  }
  if (major != kRequiredApiMajor || minor < kRequiredApiMinor) {
    raise(TRITONSERVER_ERROR_UNSUPPORTED,
          "Triton core " + path + " has C API " + std::to_string(major) +
              "." + std::to_string(minor) + "; this package needs " +
              std::to_string(kRequiredApiMajor) + "." +
              std::to_string(kRequiredApiMinor) + " or newer (major " +
              std::to_string(kRequiredApiMajor) + ")");
  }
  g_api = api;
  g_core = LoadedCore{path, major, minor};
  g_loaded.store(true, std::memory_order_release);
  return g_core;
}

const TritonApi& triton() {
  if (!g_loaded.load(std::memory_order_acquire)) {
    raise(TRITONSERVER_ERROR_UNAVAILABLE,
          "the Triton core library is not loaded; start a Server first");
  }
  return g_api;
}

bool triton_loaded() noexcept { return g_loaded.load(); }

const LoadedCore& loaded_core() { return g_core; }

void raise_missing(const char* feature, const char* function) {
  const LoadedCore& core = loaded_core();
  raise(TRITONSERVER_ERROR_UNSUPPORTED,
        std::string(feature) + " needs " + function +
            ", which the loaded Triton core lacks (C API " +
            std::to_string(core.api_major) + "." +
            std::to_string(core.api_minor) + ", " + core.path +
            "); use a newer core (docs/cores.md)");
}

std::vector<std::pair<std::string, std::string>> missing_functions() {
  const TritonApi& api = triton();
  std::vector<std::pair<std::string, std::string>> missing;
#define TRITON_LIST_MISSING(name, ret, args, feature) \
  if (api.name == nullptr) missing.emplace_back("TRITONSERVER_" #name, feature);
  TRITON_OPTIONAL_FUNCTIONS(TRITON_LIST_MISSING)
#undef TRITON_LIST_MISSING
  return missing;
}

std::string take_json(TRITONSERVER_Message* message) {
  const TritonApi& api = triton();
  const char* base = nullptr;
  size_t size = 0;
  TRITONSERVER_Error* err = api.MessageSerializeToJson(message, &base, &size);
  std::string out = err == nullptr ? std::string(base, size) : std::string();
  api.MessageDelete(message);
  check(err);
  return out;
}

}  // namespace tsb
