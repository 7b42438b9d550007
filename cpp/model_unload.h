// A model's unload begun by Server::begin_unload(): the model drained at
// once (it reads as being unloaded), then, on a thread of its own, its
// requests in flight waited for and the core's unload called; the caller
// waits for it in slices (UnloadInProgress), or not at all.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "inflight_requests.h"
#include "server_handle.h"

namespace tsb {

// A heuristic grace after the last request of a model ended: the backend
// thread that released it may still be finishing that execution, and the
// model must not be destroyed under it (the core's crash described in
// InflightRequests::begin_drain()). Never throws.
void let_backend_threads_finish() noexcept;

// Answers and releases the requests that the models of `server` keep
// open without answering (`model`; null: every model), once a drain ran
// out of time: the in-process python backend's
// (fail_open_python_requests), handed over by module.cc; nothing before.
// Called without the GIL; never throws.
using OpenRequestsRelease = void (*)(TRITONSERVER_Server* server,
                                     const char* model) noexcept;
void set_open_requests_release(OpenRequestsRelease release) noexcept;
void release_open_requests(TRITONSERVER_Server* server,
                           const char* model) noexcept;

struct BackgroundUnload;

// An unload begun: the model's requests in flight waited for (at most the
// exit timeout; past it the requests its model keeps open are answered
// with an error and released, release_open_requests, and the unload goes
// on, as the core does it), then
// TRITONSERVER_ServerUnloadModel(AndDependents), on a thread of its own.
// Until that call has returned the model is drained (ModelDrain: new
// requests refused, readiness false, "UNLOADING" in the index); from then
// on the core's own state says the same. Dropping this object, or waiting
// for it only in part (a Ctrl-C between slices), leaves the unload to go on
// in the background: it ends on its own (a server's stop meanwhile closes
// the handle it needs, and it ends with UNAVAILABLE). In a child of fork()
// it is done and does nothing: the unload's thread is the parent's.
class UnloadInProgress {
 public:
  explicit UnloadInProgress(std::shared_ptr<BackgroundUnload> unload) noexcept;
  // Waits at most `timeout_s`; true once the unload is done. Call without
  // the GIL.
  bool wait(double timeout_s);
  // Done: raises the core's error if its unload failed. Not done: nothing.
  void finish();

 private:
  BackgroundUnload* ours() const noexcept;

  std::shared_ptr<BackgroundUnload> unload_;
  uint64_t fork_generation_;
};

// Begins unloading `model` of the server behind `handle` (see
// UnloadInProgress): its drain begins before this returns. Throws only
// when it could not begin (nothing then begun).
UnloadInProgress begin_model_unload(std::shared_ptr<ServerHandle> handle,
                                    std::shared_ptr<InflightRequests> inflight,
                                    const std::string& model,
                                    bool unload_dependents,
                                    double drain_timeout_s);

}  // namespace tsb
