#include "log_callback.h"

#include <cxxabi.h>

#include <mutex>

#include "errors.h"
#include "thread_state.h"
#include "triton_library.h"

namespace nb = nanobind;

namespace tsb {
namespace {

std::mutex g_mutex;
// Leaked on purpose: the core may log during interpreter shutdown.
nb::callable* g_callback = nullptr;

void on_log(TRITONSERVER_LogLevel level, const char* filename, const int line,
            const char* msg, void*) noexcept {
  if (!python_usable()) return;
  ThreadGil gil;  // one thread state per core thread that logs
  nb::callable fn;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_callback == nullptr) return;
    fn = *g_callback;
  }
  try {
    fn(static_cast<int>(level), filename ? filename : "", line,
       msg ? msg : "");
  } catch (abi::__forced_unwind&) {  // finalization ended this thread
    park_forever();
  } catch (nb::python_error& e) {
    e.discard_as_unraisable("tritonserver log callback");
  } catch (...) {
  }
}

}  // namespace

void install_log_callback(ServerOptions& options, nb::callable fn) {
  auto set_log_callback = TRITON_NEED(ServerOptionsSetLogCallback);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_callback == nullptr) g_callback = new nb::callable();
    *g_callback = std::move(fn);
  }
  note_python_under_core_locks();  // the core logs under its locks
  check(set_log_callback(options.get(), on_log, nullptr),
        "Options.log_callback");
}

}  // namespace tsb
