#include "request.h"

#include <chrono>
#include <cstring>

#include "deferred_release.h"
#include "element_types.h"
#include "errors.h"
#include "fork.h"
#include "thread_state.h"
#include "triton_library.h"

namespace nb = nanobind;

namespace tsb {
namespace {

// Raises `err` (if any) as about `what` `name` ("input 'x'"); the context
// is built only on failure (this runs per input of every request).
void check_input(TRITONSERVER_Error* err, const char* what, const std::string& name) {
  if (err != nullptr) check(err, (std::string(what) + " '" + name + "'").c_str());
}

void on_release(TRITONSERVER_InferenceRequest* request, const uint32_t,
                void* userp) noexcept {
  auto* state = static_cast<RequestState*>(userp);
  std::shared_ptr<RequestState> keep;
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(state->mutex);
    // A request released before its final response (a decoupled model
    // that answers after execute() returned) stays, so that cancel() still
    // reaches the response factory the backend answers with; the final
    // response's callback deletes it.
    last = state->final_done;
    if (last) state->handle = nullptr;
    state->released = true;
    keep = std::move(state->held_for_release);
  }
  if (last) ignore_error(triton().InferenceRequestDelete(request));
  defer_release(std::move(state->owners));
  if (state->pending_callbacks.fetch_sub(1) == 1 && state->inflight) {
    state->inflight->remove(state);
  }
  // `keep` may drop the last reference here: nothing Python-owned is left.
}

}  // namespace

void RequestState::final_delivered() noexcept {
  std::shared_ptr<RequestState> keep;
  TRITONSERVER_InferenceRequest* released_handle = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex);
    final_done = true;
    if (released) std::swap(released_handle, handle);  // kept for cancel()
    keep = std::move(held_for_response);
  }
  // Before the request leaves the registry: stop() may delete the server
  // once it is empty.
  if (released_handle) ignore_error(triton().InferenceRequestDelete(released_handle));
  if (pending_callbacks.fetch_sub(1) == 1 && inflight) inflight->remove(this);
}

RequestState::RequestState() noexcept
    : fork_generation(::tsb::fork_generation()) {}

RequestState::~RequestState() {
  // In a child of fork(), the parent's request is left alone: its locks may
  // have been held by the parent's threads (see fork.h).
  if (inherited_from_parent(fork_generation)) return;
  discard();
  if (inflight) inflight->remove(this);
}

void RequestState::discard() noexcept {
  if (inherited_from_parent(fork_generation)) return;
  std::lock_guard<std::mutex> build(build_mutex);
  discard_locked();
}

void RequestState::discard_locked() noexcept {
  TRITONSERVER_InferenceRequest* h = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (submitted || handle == nullptr) return;
    h = handle;
    handle = nullptr;
  }
  ignore_error(triton().InferenceRequestDelete(h));
  defer_release(std::move(owners));
}

Request::Request(std::shared_ptr<ServerHandle> server,
                 std::shared_ptr<InflightRequests> inflight,
                 const std::string& model_name, int64_t model_version)
    : server_(std::move(server)),
      inflight_(std::move(inflight)),
      state_(std::make_shared<RequestState>()) {
  // Listed before the server can close: its stop() discards it.
  ServerHandle::Use use(*server_);
  check(triton().InferenceRequestNew(&state_->handle, use.get(),
                                     model_name.c_str(), model_version));
  state_->inflight = inflight_;
  state_->model_name = model_name;
  if (!inflight_->add(state_.get())) {
    // Refused as the core refuses a model being unloaded (what NVIDIA's
    // binary answers meanwhile).
    inflight_->refuse_if_draining(model_name, model_version);
    raise(TRITONSERVER_ERROR_NOT_FOUND, "Request for unknown model: '" +
                                            model_name +
                                            "' has no available versions");
  }
}

TRITONSERVER_InferenceRequest* Request::live_handle() {
  if (inherited_from_parent(state_->fork_generation)) {
    raise(TRITONSERVER_ERROR_UNAVAILABLE, kForkedMessage);
  }
  if (state_->submitted) {
    raise(TRITONSERVER_ERROR_INVALID_ARG,
          "this request was already submitted; create a new one");
  }
  if (state_->handle == nullptr) {
    raise(TRITONSERVER_ERROR_UNAVAILABLE,
          "this request was discarded (its server stopped, its model was "
          "unloaded, or building it failed); create a new one");
  }
  return state_->handle;
}

template <typename... Args, typename... Values>
void Request::set(TRITONSERVER_Error* (*setter)(TRITONSERVER_InferenceRequest*,
                                                Args...),
                  Values... values) {
  std::lock_guard<std::mutex> build(state_->build_mutex);
  check(setter(live_handle(), static_cast<Args>(values)...));
}

void Request::set_id(const std::string& id) {
  set(triton().InferenceRequestSetId, id.c_str());
}
void Request::set_flags(uint32_t flags) {
  set(triton().InferenceRequestSetFlags, flags);
}
void Request::set_correlation_id(uint64_t id) {
  set(triton().InferenceRequestSetCorrelationId, id);
}
void Request::set_correlation_id_string(const std::string& id) {
  set(triton().InferenceRequestSetCorrelationIdString, id.c_str());
}
void Request::set_priority(uint64_t priority) {
  set(triton().InferenceRequestSetPriorityUInt64, priority);
}
void Request::set_timeout_us(uint64_t timeout_us) {
  set(triton().InferenceRequestSetTimeoutMicroseconds, timeout_us);
}
void Request::set_string_parameter(const std::string& key,
                                   const std::string& v) {
  set(triton().InferenceRequestSetStringParameter, key.c_str(), v.c_str());
}
void Request::set_int_parameter(const std::string& key, int64_t v) {
  set(triton().InferenceRequestSetIntParameter, key.c_str(), v);
}
void Request::set_bool_parameter(const std::string& key, bool v) {
  set(triton().InferenceRequestSetBoolParameter, key.c_str(), v);
}
void Request::set_double_parameter(const std::string& key, double v) {
  set(TRITON_NEED(InferenceRequestSetDoubleParameter), key.c_str(), v);
}

void Request::add_input_dims(const std::string& name, int datatype,
                             const int64_t* shape, size_t ndim,
                             uintptr_t data_ptr, size_t byte_size,
                             int memory_type, int64_t memory_type_id,
                             nb::object owner) {
  std::lock_guard<std::mutex> build(state_->build_mutex);
  TRITONSERVER_InferenceRequest* h = live_handle();
  check_input(triton().InferenceRequestAddInput(
                  h, name.c_str(), static_cast<TRITONSERVER_DataType>(datatype), shape, ndim),
              "input", name);
  append_input_data(h, name, data_ptr, byte_size, memory_type, memory_type_id, std::move(owner));
}

void Request::add_raw_input(const std::string& name, uintptr_t data_ptr, size_t byte_size,
                            nb::object owner) {
  std::lock_guard<std::mutex> build(state_->build_mutex);
  TRITONSERVER_InferenceRequest* h = live_handle();
  check_input(triton().InferenceRequestAddRawInput(h, name.c_str()), "raw input", name);
  append_input_data(h, name, data_ptr, byte_size, TRITONSERVER_MEMORY_CPU, 0, std::move(owner));
}

void Request::append_input_data(TRITONSERVER_InferenceRequest* h, const std::string& name,
                                uintptr_t data_ptr, size_t byte_size, int memory_type,
                                int64_t memory_type_id, nb::object owner) {
  if (byte_size == 0) return;
  const TritonApi& api = triton();
  const bool host = memory_type == TRITONSERVER_MEMORY_CPU ||
                    memory_type == TRITONSERVER_MEMORY_CPU_PINNED;
  if (host && byte_size <= kCopiedInputMaxBytes) {
    // A private copy: the caller's array may change once this returns.
    std::unique_ptr<char[]> copy(new char[byte_size]);
    std::memcpy(copy.get(), reinterpret_cast<const void*>(data_ptr), byte_size);
    check_input(api.InferenceRequestAppendInputData(
                    h, name.c_str(), copy.get(), byte_size, TRITONSERVER_MEMORY_CPU, 0),
                "input", name);
    state_->input_copies.push_back(std::move(copy));
    return;
  }
  check_input(api.InferenceRequestAppendInputData(
                  h, name.c_str(), reinterpret_cast<const void*>(data_ptr), byte_size,
                  static_cast<TRITONSERVER_MemoryType>(memory_type), memory_type_id),
              "input", name);
  state_->owners.push_back(std::move(owner));
}

namespace {

// The Triton type of a buffer-protocol element (struct-module format, as
// NumPy exports it), or INVALID: byte-swapped, or no Triton equivalent.
TRITONSERVER_DataType buffer_data_type(const char* format, Py_ssize_t size) {
  if (format == nullptr) return TRITONSERVER_TYPE_UINT8;  // plain bytes
  switch (*format) {
    case '@':
    case '=':
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    case '<':
#else
    case '>':
    case '!':
#endif
      ++format;
      break;
    default:
      break;
  }
  if (format[0] == '\0' || format[1] != '\0') return TRITONSERVER_TYPE_INVALID;
  const char c = format[0];
  char kind = 0;
  if (c == '?') kind = 'b';
  if (c == 'e' || c == 'f' || c == 'd') kind = 'f';
  if (c == 'b' || c == 'h' || c == 'i' || c == 'l' || c == 'q') kind = 'i';
  if (c == 'B' || c == 'H' || c == 'I' || c == 'L' || c == 'Q') kind = 'u';
  return element_type_of(kind, static_cast<size_t>(size));
}

}  // namespace

bool Request::add_host_array(const std::string& name, nb::handle array) {
  Py_buffer view;
  if (PyObject_GetBuffer(array.ptr(), &view,
                         PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) {
    PyErr_Clear();
    return false;
  }
  const TRITONSERVER_DataType datatype =
      buffer_data_type(view.format, view.itemsize);
  if (datatype == TRITONSERVER_TYPE_INVALID) {
    PyBuffer_Release(&view);
    return false;
  }
  // The shape is read from the view (Triton copies it) while it is held: no
  // vector per input. `array` stays the owner of the data.
  static_assert(sizeof(Py_ssize_t) == sizeof(int64_t), "shape as int64_t");
  struct Release {
    Py_buffer* view;
    ~Release() { PyBuffer_Release(view); }
  } release{&view};
  const int64_t* shape = reinterpret_cast<const int64_t*>(view.shape);
  const size_t ndim = view.shape != nullptr ? static_cast<size_t>(view.ndim) : 0;
  add_input_dims(name, datatype, shape, ndim,
                 reinterpret_cast<uintptr_t>(view.buf),
                 static_cast<size_t>(view.len), TRITONSERVER_MEMORY_CPU, 0,
                 nb::borrow(array));
  return true;
}

void Request::add_requested_output(const std::string& name) {
  set(triton().InferenceRequestAddRequestedOutput, name.c_str());
}

void Request::set_output_memory(int memory_type, int64_t memory_type_id) {
  std::lock_guard<std::mutex> build(state_->build_mutex);
  live_handle();
  state_->policy = make_policy(
      static_cast<TRITONSERVER_MemoryType>(memory_type), memory_type_id);
}

void Request::set_from_model_code() { state_->from_model_code = true; }

void Request::set_dispatch_token(uint64_t token) {
  std::lock_guard<std::mutex> build(state_->build_mutex);
  live_handle();
  state_->dispatch_token = token;
}

void Request::set_response_sink(std::shared_ptr<ResponseSink> sink) {
  std::lock_guard<std::mutex> build(state_->build_mutex);
  live_handle();
  state_->queue.set_sink(std::move(sink));
}

void Request::submit() {
  // Lock order: the server's use, then build_mutex (stop() closes the
  // server, waiting for its uses, before it discards requests).
  ServerHandle::Use use(*server_);
  std::lock_guard<std::mutex> build(state_->build_mutex);
  TRITONSERVER_InferenceRequest* h = live_handle();
  const TritonApi& api = triton();
  RequestState* raw = state_.get();
  check(api.InferenceRequestSetReleaseCallback(h, on_release, raw));
  check(api.InferenceRequestSetResponseCallback(
      h, response_allocator(), &raw->policy, on_response,
      static_cast<ResponseTarget*>(raw)));
  {
    std::lock_guard<std::mutex> lock(raw->mutex);
    raw->held_for_release = state_;
    raw->held_for_response = state_;
    raw->submitted = true;
    raw->pending_callbacks.store(2);
  }
  // Triton's callbacks may run before this returns, on its threads: they
  // take raw->mutex, not build_mutex.
  TRITONSERVER_Error* err = api.ServerInferAsync(use.get(), h, nullptr);
  if (err != nullptr) {
    // Triton did not take the request: no callback will come. Delete it
    // now, so that nothing (an exception kept by the caller, say) holds the
    // model until the server stops.
    std::shared_ptr<RequestState> for_release, for_response;
    {
      std::lock_guard<std::mutex> lock(raw->mutex);
      for_release = std::move(raw->held_for_release);
      for_response = std::move(raw->held_for_response);
      raw->submitted = false;
    }
    raw->discard_locked();
    check(err);
  }
}

void Request::submit_from_python(
    const std::shared_ptr<LoopNotifier>& notifier) {
  if (notifier) state_->queue.set_notifier(notifier);
  drain_deferred();
  try {
    if (!python_under_core_locks()) {
      // The core's submission only queues the request (it waits for no
      // other request and for no Python), so the GIL is kept. Let go, it
      // would pass to a waiting model thread once per request (the thread
      // wake-ups of python_backend/instance_worker.h): an asyncio loop that
      // submits many requests in one pass would hand it over once per
      // request instead of once per pass, and a sync caller, which lets it
      // go anyway to wait for its response, would take it back once more
      // per request, queued behind the other threads. A core thread that
      // runs Python (a log callback) could hold a core lock the submission
      // needs while it waits for the GIL: then it is let go.
      submit();
    } else {
      GilRelease release;
      submit();
    }
  } catch (...) {
    drain_deferred();  // a refused request's inputs go now
    throw;
  }
}

void Request::discard_from_python() {
  state_->discard();
  drain_deferred();  // its inputs are released now, not later
}

std::shared_ptr<ResponseQueue> Request::submitted_queue() const {
  if (!state_->submitted) {
    raise(TRITONSERVER_ERROR_INVALID_ARG, "the request was not submitted");
  }
  return queue();
}

ResponsePtr Request::next(double timeout_s, bool poll) {
  if (!state_->submitted) {
    raise(TRITONSERVER_ERROR_INVALID_ARG, "the request was not submitted");
  }
  if (waiting_.exchange(true)) {
    throw nb::value_error(
        "another thread is already waiting on this response iterator; "
        "iterate it from one thread at a time");
  }
  struct Reset {
    std::atomic<bool>& flag;
    ~Reset() { flag.store(false); }
  } reset{waiting_};
  return state_->queue.pop(timeout_s, poll);
}

ResponsePtr Request::next_from_python(double timeout_s) {
  constexpr double kSliceS = 0.1;
  bool first = true;
  for (double left = timeout_s;; first = false) {
    const bool last = left >= 0 && left <= kSliceS;
    ResponsePtr p;
    {
      GilRelease release;
      p = next(last ? left : kSliceS, first);  // one poll per wait
    }
    const bool interrupted = PyErr_CheckSignals() != 0;
    if (p && interrupted) {
      // A signal came during the wait: its handler raised here, not in the
      // Python code that makes the response (which would lose it).
      state_->queue.put_back(std::move(p));
    }
    if (interrupted) {
      // KeyboardInterrupt (or what a handler raised): end the request in
      // the core; this Request keeps owning it and releases it when the
      // cancelled request completes. Its queued responses come first.
      try {
        cancel();
      } catch (...) {  // the signal's exception is what matters
      }
      throw nb::python_error();
    }
    if (p || last) {
      drain_deferred();  // what Triton released meanwhile goes with the GIL
      return p;
    }
    if (left >= 0) left -= kSliceS;
  }
}

namespace {

// Request::cancel() on `state`; a failure of the core's cancel raises
// with `raise`, else is dropped.
bool cancel_in_flight(RequestState& state, bool raise) {
  std::lock_guard<std::mutex> lock(state.mutex);
  if (!state.submitted || state.handle == nullptr) return false;
  TRITONSERVER_Error* error = triton().InferenceRequestCancel(state.handle);
  if (raise) {
    check(error);
  } else {
    ignore_error(error);
  }
  // The consumer need not wait for the backend, which may not look at the
  // cancellation at all: its stream ends at this end (a waiter wakes).
  state.queue.push(cancelled_end());
  return true;
}

}  // namespace

bool Request::cancel() { return cancel_in_flight(*state_, true); }

void RequestState::cancel() noexcept {
  try {
    cancel_in_flight(*this, false);
  } catch (...) {  // a failed lock: nothing to cancel safely
  }
}

std::function<void()> Request::canceller() const {
  return [state = state_] { state->cancel(); };
}

}  // namespace tsb
