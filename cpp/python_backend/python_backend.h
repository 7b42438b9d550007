// The in-process python backend: the functions the backend library
// (shim.cc) forwards the core's entry points to. A model
// instance is a Python object made by tritonserver._python_models._runtime
// (it imports model.py and calls TritonPythonModel), kept as the
// instance's state; execute hands it the requests as BackendRequest
// objects (backend_request.h).
#pragma once

#include <string>

#include <cstdint>

#include "../triton_api.h"
#include "table.h"

namespace tsb {

// Hands this extension's table to the backend library at `library` (the
// package's libtriton_python.so), loading it for good. "" when done, else
// why not. Needs the core loaded (the library takes TRITONSERVER_ErrorNew
// from it). `live_requests` counts the requests of this package in flight
// (the client's registry, inflight_requests.h): the hint by which a model's
// worker takes a batch or leaves it to the core's thread (instance_worker.h).
using LiveRequests = uint32_t (*)() noexcept;
std::string attach_python_backend(const std::string& library,
                                  LiveRequests live_requests);

// What a model's unload (or a server's stop) does once its drain ran out
// of time (model_unload.h, where module.cc hands it over): each request
// that the in-process python models of `model` (null: every model) of
// `server` left open gets an error saying so and is released
// (fail_open_requests, backend_request.h), so that the core can finalize
// the instances. Called without the GIL, on any thread; never throws.
void fail_open_python_requests(TRITONSERVER_Server* server,
                               const char* model) noexcept;

}  // namespace tsb
