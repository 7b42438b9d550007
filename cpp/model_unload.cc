#include "model_unload.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "background_outcome.h"
#include "errors.h"
#include "fork.h"
#include "triton_library.h"

namespace tsb {

void let_backend_threads_finish() noexcept {
  try {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } catch (...) {
  }
}

namespace {

std::atomic<OpenRequestsRelease> g_open_requests_release{nullptr};

}  // namespace

void set_open_requests_release(OpenRequestsRelease release) noexcept {
  g_open_requests_release.store(release);
}

void release_open_requests(TRITONSERVER_Server* server,
                           const char* model) noexcept {
  if (OpenRequestsRelease release = g_open_requests_release.load()) {
    release(server, model);
  }
}

struct BackgroundUnload : BackgroundOutcome {
  BackgroundUnload(std::shared_ptr<ServerHandle> h,
                   std::shared_ptr<InflightRequests> inflight,
                   const std::string& model, bool dependents, double timeout_s)
      : handle(std::move(h)),
        drain(std::make_unique<ModelDrain>(std::move(inflight), model)),
        unload_dependents(dependents),
        drain_timeout_s(timeout_s) {}

  // The thread's body. Never throws (it is a thread entry point).
  void run() noexcept {
    // Past the timeout the unload goes on: the requests the model keeps
    // open without answering are answered with an error (else the core
    // would wait for them for good), and the core unloads the model when
    // its last requests end.
    bool drained = true;
    try {
      drained = drain->wait(drain_timeout_s);
      if (drained) let_backend_threads_finish();
    } catch (...) {
    }
    bool unload_failed = false;
    TRITONSERVER_Error_Code err_code = TRITONSERVER_ERROR_INTERNAL;
    std::string err_message;
    try {
      // Held only for the call: a server's stop waits for it, never for
      // the drain (the stop waits for the same requests itself).
      ServerHandle::Use use(*handle);
      const TritonApi& api = triton();
      const char* name = drain->model().c_str();
      if (!drained) release_open_requests(use.get(), name);
      check(unload_dependents ? api.ServerUnloadModelAndDependents(use.get(), name)
                              : api.ServerUnloadModel(use.get(), name));
    } catch (const TritonException& e) {
      unload_failed = true;
      err_code = e.code();
      try {
        err_message = e.what();
      } catch (...) {
      }
    } catch (...) {
      unload_failed = true;
    }
    // From here on the model reads as the core says (UNLOADING, then
    // UNAVAILABLE; READY again if the core refused).
    drain.reset();
    set(unload_failed, err_code, std::move(err_message));
  }

  const std::shared_ptr<ServerHandle> handle;
  std::unique_ptr<ModelDrain> drain;  // reset by run() only
  const bool unload_dependents;
  const double drain_timeout_s;
};

UnloadInProgress::UnloadInProgress(
    std::shared_ptr<BackgroundUnload> unload) noexcept
    : unload_(std::move(unload)), fork_generation_(fork_generation()) {}

BackgroundUnload* UnloadInProgress::ours() const noexcept {
  return inherited_from_parent(fork_generation_) ? nullptr : unload_.get();
}

bool UnloadInProgress::wait(double timeout_s) {
  BackgroundUnload* unload = ours();
  return unload == nullptr || unload->wait(timeout_s > 0 ? timeout_s : 0.0);
}

void UnloadInProgress::finish() {
  BackgroundUnload* unload = ours();
  if (unload == nullptr) return;
  std::lock_guard<std::mutex> lock(unload->mutex);
  if (unload->done && unload->failed) {
    raise(unload->code, unload->message.empty() ? "the model's unload failed"
                                                : unload->message);
  }
}

UnloadInProgress begin_model_unload(std::shared_ptr<ServerHandle> handle,
                                    std::shared_ptr<InflightRequests> inflight,
                                    const std::string& model,
                                    bool unload_dependents,
                                    double drain_timeout_s) {
  auto unload = std::make_shared<BackgroundUnload>(
      std::move(handle), std::move(inflight), model, unload_dependents,
      drain_timeout_s);
  try {
    std::thread([unload] { unload->run(); }).detach();
  } catch (const std::system_error&) {
    unload->run();  // no thread to be had: unload here, however long it takes
  }
  return UnloadInProgress(std::move(unload));
}

}  // namespace tsb
