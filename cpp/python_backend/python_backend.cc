#include "python_backend.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include <cxxabi.h>
#include <dlfcn.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "../errors.h"
#include "../thread_state.h"
#include "../triton_library.h"
#include "backend_request.h"
#include "instance_worker.h"
#include "pb_utils_bridge.h"

namespace nb = nanobind;

namespace tsb {
namespace {

// attach_python_backend's hint: the package's requests in flight.
LiveRequests g_live_requests = nullptr;

// One model instance: the runtime's object for it.
struct InstanceState {
  nb::object runner;
  std::string model_name;
  // Inputs in GPU memory stay there (FORCE_CPU_ONLY_INPUT_TENSORS "no").
  bool device_inputs = false;
  // Numeric inputs in host memory are read-only views of the request's
  // memory (ZERO_COPY_INPUTS "yes"), else private copies.
  bool zero_copy_inputs = false;
  // pb_utils.InferenceRequest, when execute() takes the requests as such
  // (None: it takes the BackendRequest objects), and the model's name.
  nb::object request_type;
  nb::object model_name_object;
  nb::object execute;  // runner.execute, looked up once
  // Decoupled: requests (and their senders) are the model's past execute().
  bool decoupled = false;
  // max_batch_size > 0: a batch's size is the sum of its requests' batch
  // sizes (batch_size_of), else its request count.
  bool batching = false;
  // The final responses of the batches run since they were last sent (one
  // batch at a time: the core's thread or the worker runs them), sent once
  // the GIL is let go.
  ResponseOutbox outbox;
  // Null when every batch runs on the core's thread (instance_worker.h).
  std::unique_ptr<InstanceWorker> worker;
  // The outputs' declared types, checked in every response.
  std::shared_ptr<DeclaredOutputs> declared_outputs;
  // The model's server: the requests left open are listed under it.
  TRITONSERVER_Server* server = nullptr;
};

void run_batch(TRITONBACKEND_ModelInstance* instance, InstanceState* state,
               TRITONBACKEND_Request** requests, uint32_t count) noexcept;

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// Runs `body`; any exception becomes a TRITONSERVER_Error (never crosses
// into the core).
template <typename Body>
TRITONSERVER_Error* guarded(const char* what, Body body) noexcept {
  try {
    body();
    return nullptr;
  } catch (abi::__forced_unwind&) {  // finalization ended this thread
    park_forever();
  } catch (TritonException& e) {
    return make_error(e.code(), e.what());
  } catch (nb::python_error& e) {
    std::string message = std::string(what) + ": " + e.what();
    return make_error(TRITONSERVER_ERROR_INTERNAL, message.c_str());
  } catch (std::exception& e) {
    std::string message = std::string(what) + ": " + e.what();
    return make_error(TRITONSERVER_ERROR_INTERNAL, message.c_str());
  } catch (...) {
    return make_error(TRITONSERVER_ERROR_INTERNAL, what);
  }
}

// The backend functions this core lacks (names), for the load error. The
// cancellation queries are left out: only is_cancelled() needs them, and it
// raises naming the function.
std::string missing_backend_functions() {
  const TritonApi& api = triton();
  std::string missing;
#define TSB_LIST_MISSING(name, ret, args)                          \
  if (api.TRITONBACKEND_##name == nullptr &&                       \
      std::string(#name).find("IsCancelled") == std::string::npos) { \
    if (!missing.empty()) missing += ", ";          \
    missing += "TRITONBACKEND_" #name;              \
  }
  TRITON_BACKEND_FUNCTIONS(TSB_LIST_MISSING)
#undef TSB_LIST_MISSING
  return missing;
}

std::string model_config_json(TRITONBACKEND_Model* model) {
  const TritonApi& api = triton();
  TRITONSERVER_Message* message = nullptr;
  check(api.TRITONBACKEND_ModelConfig(model, 1, &message));
  return take_json(message);
}

const char* kind_name(TRITONSERVER_InstanceGroupKind kind) {
  switch (static_cast<int>(kind)) {
    case 1: return "CPU";
    case 2: return "GPU";
    case 3: return "MODEL";
    default: return "AUTO";
  }
}

// Raises the runtime's (code, message) failure, if any (None: none).
void raise_failure(nb::handle failure) {
  if (failure.is_none()) return;
  auto [code, message] = nb::cast<std::pair<int, std::string>>(failure);
  raise(static_cast<TRITONSERVER_Error_Code>(code), message);
}

// The model's auto_complete_config(), when the core allows completing
// configs (strict_model_config off) and model.py defines one.
void auto_complete(TRITONBACKEND_Model* model) {
  const TritonApi& api = triton();
  bool allowed = false;
  check(api.TRITONBACKEND_ModelAutoCompleteConfig(model, &allowed));
  if (!allowed) return;
  const char* model_name = nullptr;
  uint64_t version = 0;
  TRITONBACKEND_ArtifactType artifact{};
  const char* repository = nullptr;
  check(api.TRITONBACKEND_ModelName(model, &model_name));
  check(api.TRITONBACKEND_ModelVersion(model, &version));
  check(api.TRITONBACKEND_ModelRepository(model, &artifact, &repository));
  nb::dict args;
  args["model_config"] = model_config_json(model);
  args["model_repository"] = repository;
  args["model_version"] = std::to_string(version);
  args["model_name"] = model_name;
  nb::tuple result = nb::cast<nb::tuple>(
      pb_utils_bridge().auto_complete(args));
  raise_failure(result[1]);
  if (result[0].is_none()) return;
  std::string json = nb::cast<std::string>(result[0]);
  TRITONSERVER_Message* message = nullptr;
  check(TRITON_NEED(MessageNewFromSerializedJson)(&message, json.data(),
                                                  json.size()));
  TRITONSERVER_Error* err = api.TRITONBACKEND_ModelSetConfig(model, 1, message);
  api.MessageDelete(message);
  check(err, "setting the config auto_complete_config() made");
}

TRITONSERVER_Error* model_initialize_with_gil(TRITONBACKEND_Model* model) {
  return guarded("in-process python backend", [&] {
    std::string missing = missing_backend_functions();
    if (!missing.empty()) {
      raise(TRITONSERVER_ERROR_UNSUPPORTED,
            "python models in-process need backend API functions this Triton "
            "core lacks (" + missing + "); run them with the stub: "
            "Options(python_models=\"stub\")");
    }
    auto_complete(model);
  });
}


TRITONSERVER_Error* instance_initialize_with_gil(TRITONBACKEND_ModelInstance* instance) {
  return guarded("in-process python model initialization", [&] {
    const TritonApi& api = triton();
    TRITONBACKEND_Model* model = nullptr;
    check(api.TRITONBACKEND_ModelInstanceModel(instance, &model));
    const char* model_name = nullptr;
    uint64_t version = 0;
    TRITONBACKEND_ArtifactType artifact{};
    const char* repository = nullptr;
    const char* instance_name = nullptr;
    TRITONSERVER_InstanceGroupKind kind{};
    int32_t device_id = 0;
    check(api.TRITONBACKEND_ModelName(model, &model_name));
    check(api.TRITONBACKEND_ModelVersion(model, &version));
    check(api.TRITONBACKEND_ModelRepository(model, &artifact, &repository));
    check(api.TRITONBACKEND_ModelInstanceName(instance, &instance_name));
    check(api.TRITONBACKEND_ModelInstanceKind(instance, &kind));
    check(api.TRITONBACKEND_ModelInstanceDeviceId(instance, &device_id));
    TRITONSERVER_Server* server = nullptr;
    check(api.TRITONBACKEND_ModelServer(model, &server));
    nb::dict args;
    args["model_config"] = model_config_json(model);
    args["model_instance_kind"] = kind_name(kind);
    args["model_instance_name"] = instance_name;
    args["model_instance_device_id"] = std::to_string(device_id);
    args["model_repository"] = repository;
    args["model_version"] = std::to_string(version);
    args["model_name"] = model_name;
    nb::object loaded = pb_utils_bridge().load_instance(
        args, reinterpret_cast<uintptr_t>(server));
    // (runner, None) or (None, (code, message)): the runtime words model
    // errors.
    nb::tuple result = nb::cast<nb::tuple>(loaded);
    raise_failure(result[1]);
    nb::object runner = nb::borrow(result[0]);
    RunnerFacts facts = runner_facts(runner);
    auto* state = new InstanceState{
        runner, model_name, facts.device_inputs, facts.zero_copy_inputs,
        facts.request_type, nb::str(model_name), facts.execute, facts.decoupled,
        facts.batching};
    TRITONSERVER_Error* err =
        api.TRITONBACKEND_ModelInstanceSetState(instance, state);
    if (err != nullptr) {
      finalize_runner(state->runner);
      delete state;
      check(err);
    }
    state->server = server;
    state->declared_outputs = std::make_shared<DeclaredOutputs>();
    state->declared_outputs->types = std::move(facts.declared_outputs);
    if (facts.hand_off) {
      state->worker = std::make_unique<InstanceWorker>(
          [instance, state](InstanceWorker::Batch& batch) {
            run_batch(instance, state, batch.data(),
                      static_cast<uint32_t>(batch.size()));
          },
          [state] { state->outbox.flush(); }, g_live_requests);
      InstanceWorker* worker = state->worker.get();
      try {
        start_worker(state->runner, nb::cpp_function([worker] { worker->run(); }));
      } catch (nb::python_error& e) {
        // No thread: every batch runs on the core's thread (offer() is
        // false until run() starts). Said, not fatal.
        e.discard_as_unraisable("tritonserver: starting a model's worker thread");
      }
    }
  });
}

InstanceState* state_of(TRITONBACKEND_ModelInstance* instance) {
  void* state = nullptr;
  check(triton().TRITONBACKEND_ModelInstanceState(instance, &state));
  return static_cast<InstanceState*>(state);
}

TRITONSERVER_Error* instance_finalize_with_gil(TRITONBACKEND_ModelInstance* instance) {
  return guarded("in-process python model finalize", [&] {
    std::unique_ptr<InstanceState> state(state_of(instance));
    if (state == nullptr) return;
    if (state->worker) {
      GilRelease release;
      state->worker->stop();  // runs what it was handed first
    }
    // The runtime logs the model's own finalize() errors.
    finalize_runner(state->runner);
  });
}

// The batch size the statistics count, as the stub counts it: for a
// batching model the first dimension of each request's first input (a
// request without one counts none), else one per request.
uint64_t batch_size_of(const InstanceState& state,
                       TRITONBACKEND_Request** requests, uint32_t count) noexcept {
  if (!state.batching) return count;
  const TritonApi& api = triton();
  uint64_t total = 0;
  for (uint32_t i = 0; i < count; ++i) {
    TRITONBACKEND_Input* input = nullptr;
    const int64_t* shape = nullptr;
    uint32_t dims = 0;
    TRITONSERVER_Error* err = api.TRITONBACKEND_RequestInputByIndex(requests[i], 0, &input);
    if (err == nullptr) {
      err = api.TRITONBACKEND_InputProperties(input, nullptr, nullptr, &shape,
                                              &dims, nullptr, nullptr);
    }
    if (err != nullptr) {
      api.ErrorDelete(err);
    } else if (dims > 0 && shape[0] > 0) {
      total += static_cast<uint64_t>(shape[0]);
    }
  }
  return total;
}

void run_batch(TRITONBACKEND_ModelInstance* instance, InstanceState* state,
               TRITONBACKEND_Request** requests, uint32_t count) noexcept {
  const TritonApi& api = triton();
  // Read before the model has the requests (it may release them).
  const uint64_t batch_size = batch_size_of(*state, requests, count);
  const uint64_t start = now_ns();
  // From here on the requests are ours: each BackendRequest releases its
  // own (and answers it if nothing did). `handles` are our references to
  // them; `batch`, the list the runtime is given, may be changed or kept.
  std::vector<nb::object> handles;
  try {
    nb::list batch;
    const bool wrap = !state->request_type.is_none();
    nb::list wrapped;
    for (uint32_t i = 0; i < count; ++i) {
      handles.push_back(nb::cast(
          new BackendRequest(requests[i],
                             std::make_shared<ResponseState>(state->model_name,
                                                             state->declared_outputs,
                                                             state->decoupled),
                             &state->outbox, state->device_inputs,
                             state->zero_copy_inputs),
          nb::rv_policy::take_ownership));
      batch.append(handles.back());
      if (wrap) {
        wrapped.append(wrap_request(handles.back(), state->model_name_object));
      }
    }
    state->execute(batch, wrap ? nb::object(wrapped) : nb::none());
  } catch (abi::__forced_unwind&) {
    // Finalization ended this thread inside the model's code (thread_state.h).
    park_forever();
  } catch (std::exception& e) {
    // The runtime answers the model's own failures; this is a fault of
    // the runtime itself (or no memory for the request objects).
    std::string message = "model '" + state->model_name +
                          "': in-process python backend failure: " +
                          e.what();
    for (uint32_t i = 0; i < count; ++i) {
      if (i < handles.size()) {
        try {
          nb::inst_ptr<BackendRequest>(handles[i])
              ->fail_if_unanswered(TRITONSERVER_ERROR_INTERNAL, message);
        } catch (...) {
        }
      } else {  // never wrapped: answered and released here
        fail_natively(requests[i], TRITONSERVER_ERROR_INTERNAL, message);
      }
    }
  }
  const uint64_t end = now_ns();
  for (const nb::object& handle : handles) {
    BackendRequest* request = nb::inst_ptr<BackendRequest>(handle);
    // A request only `handles` holds dies with them, below: it is released
    // (and answered, if nothing did) through the outbox, once the GIL is
    // let go. One the model still holds (an input view, the request object)
    // acts at once from now on, whenever it goes.
    const bool kept = Py_REFCNT(handle.ptr()) != 1;
    if (kept) request->detach_outbox();
    request->release_sender_after_final();
    // One left open (unanswered, or kept) is listed: an unload past its
    // drain's time answers and releases it (fail_open_python_requests).
    request->list_if_open(state->server, kept);
    TRITONSERVER_Error* report = api.TRITONBACKEND_ModelInstanceReportStatistics(
        instance, request->raw(), request->succeeded(), start, start, end, end);
    if (report != nullptr) api.ErrorDelete(report);
    // A request a non-decoupled model keeps (not for input views of its
    // memory) is released now if answered: kept, it would hold up the
    // model's unload; one left unanswered stays open, for the model to
    // answer later (as a decoupled model's). A rescheduled request goes back
    // to the core now, kept or not.
    if (request->rescheduled() || (kept && !state->decoupled &&
                                   !state->zero_copy_inputs &&
                                   request->final_sent())) {
      try {
        request->release_after_execute();
      } catch (...) {  // answered already; released in any case
      }
    }
  }
  TRITONSERVER_Error* report =
      api.TRITONBACKEND_ModelInstanceReportBatchStatistics(instance, batch_size,
                                                           start, start, end, end);
  if (report != nullptr) api.ErrorDelete(report);
}  // `handles` go, and with them the requests only they held

// Called without the GIL: the batch goes to the instance's worker, or runs
// here.
TRITONSERVER_Error* instance_execute(TRITONBACKEND_ModelInstance* instance,
                                     TRITONBACKEND_Request** requests,
                                     uint32_t count) {
  InstanceState* state = nullptr;
  TRITONSERVER_Error* err =
      guarded("in-process python model", [&] { state = state_of(instance); });
  if (err != nullptr || state == nullptr) {
    // The core keeps the requests when execute fails.
    return err != nullptr ? err
                          : make_error(TRITONSERVER_ERROR_INTERNAL,
                                       "in-process python model: no state");
  }
  if (state->worker && state->worker->offer(requests, count)) return nullptr;
  if (!python_usable()) {  // the program is exiting: no Python from here on
    for (uint32_t i = 0; i < count; ++i) {
      fail_natively(requests[i], TRITONSERVER_ERROR_UNAVAILABLE,
                    "model '" + state->model_name +
                        "': not run, the Python program is exiting");
    }
    return nullptr;
  }
  {
    ThreadGil gil;
    run_batch(instance, state, requests, count);
  }
  // The responses go out once this thread no longer holds the GIL: the
  // clients they wake need it next.
  state->outbox.flush();
  return nullptr;
}

// The entry points but execute: on the core's threads, without the GIL.
// Once the program is exiting no Python is entered (CPython would end a
// thread that takes the GIL now): loads fail, finalizers leave what they
// would free to the process's end.
TRITONSERVER_Error* exiting() {
  return make_error(TRITONSERVER_ERROR_UNAVAILABLE,
                    "the in-process python backend cannot run python models: "
                    "the Python program is exiting");
}

TRITONSERVER_Error* model_initialize(TRITONBACKEND_Model* model) {
  if (!python_usable()) return exiting();
  ThreadGil gil;
  return model_initialize_with_gil(model);
}

TRITONSERVER_Error* instance_initialize(TRITONBACKEND_ModelInstance* instance) {
  if (!python_usable()) return exiting();
  ThreadGil gil;
  return instance_initialize_with_gil(instance);
}

TRITONSERVER_Error* instance_finalize(TRITONBACKEND_ModelInstance* instance) {
  if (!python_usable()) return nullptr;
  ThreadGil gil;
  return instance_finalize_with_gil(instance);
}

}  // namespace

void fail_open_python_requests(TRITONSERVER_Server* server,
                               const char* model) noexcept {
  if (!python_usable()) return;
  AnyThreadGil gil;
  fail_open_requests(server, model);
}

namespace {

const PythonBackendTable kTable = {
    kPythonBackendTableVersion, model_initialize, instance_initialize,
    instance_finalize,          instance_execute,
};

}  // namespace

std::string attach_python_backend(const std::string& library,
                                  LiveRequests live_requests) {
  g_live_requests = live_requests;
  // Kept loaded for good: the core's dlopen() of the same file (through
  // the backend folder's link) finds this copy, table attached.
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return "the in-process python backend library " + library +
           " cannot be loaded: " + (why != nullptr ? why : "unknown reason");
  }
  using Attach = int (*)(const PythonBackendTable*);
  auto attach = reinterpret_cast<Attach>(dlsym(handle, "tsb_python_backend_attach"));
  if (attach == nullptr || attach(&kTable) != 0) {
    return "the in-process python backend library " + library +
           " and tritonserver._native come from different builds of the "
           "tritonserver package: reinstall it";
  }
  return "";
}

}  // namespace tsb
