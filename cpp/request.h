// Building an inference request from Python inputs, submitting it, and
// keeping everything Triton reads alive until its release callback.
#pragma once

#include <nanobind/nanobind.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "allocator.h"
#include "inflight_requests.h"
#include "response_queue.h"
#include "server_handle.h"
#include "triton_api.h"

namespace tsb {

// Shared by the Python handle and, while in flight, by Triton's callbacks
// (the response callback sees it as its ResponseTarget).
struct RequestState final : InflightEntry {
  RequestState() noexcept;
  ~RequestState();
  // Deletes the core request if it was never submitted. Never throws. Waits
  // for a setter or submit() in progress (build_mutex).
  void discard() noexcept override;
  // Request::cancel() without raising (a failure of the core's cancel is
  // dropped): a server's stop past its exit timeout.
  void cancel() noexcept override;
  // The same, with build_mutex held by the caller.
  void discard_locked() noexcept;

  // Held by whoever passes `handle` to the core to build or submit the
  // request (the setters, submit() across ServerInferAsync) and by
  // discard(): stop() cannot delete the handle under them. Triton's
  // callbacks never take it (they may run during ServerInferAsync).
  std::mutex build_mutex;
  // Guards `handle` and the self references against the callbacks: taken
  // by them, by cancel(), and briefly by the holders of build_mutex.
  std::mutex mutex;
  // Deleted at release, or at the final response when that comes later
  // (cancel() reaches a released request's response factory through it).
  TRITONSERVER_InferenceRequest* handle = nullptr;
  bool released = false;    // the core's release callback ran (mutex)
  bool final_done = false;  // the final response was delivered (mutex)
  const uint64_t fork_generation;  // see fork.h
  AllocationPolicy policy;
  // Core callbacks still to come once submitted: release and final response.
  // The request stays registered as live until both have run.
  std::atomic<int> pending_callbacks{0};
  std::shared_ptr<InflightRequests> inflight;
  std::vector<nanobind::object> owners;  // input memory owners (build_mutex)
  // Host inputs of at most kCopiedInputMaxBytes, copied at build: the
  // caller may refill its array as soon as the request is built (build_mutex).
  std::vector<std::unique_ptr<char[]>> input_copies;
  // Self references held on Triton's behalf until the release callback and
  // the final response callback.
  std::shared_ptr<RequestState> held_for_release;
  std::shared_ptr<RequestState> held_for_response;

 private:
  // After the final response: Triton's hold for it ends.
  void final_delivered() noexcept override;
};

// Host inputs up to this size are copied when the request is built; larger
// ones (and device memory) are handed to Triton by pointer. A copy this
// small costs nothing measurable per request (benchmarks/NOTES.md).
constexpr size_t kCopiedInputMaxBytes = 64 * 1024;

class Request {
 public:
  // A request of `model_name` on the server behind `server`, listed in
  // that server's `inflight` registry.
  Request(std::shared_ptr<ServerHandle> server,
          std::shared_ptr<InflightRequests> inflight,
          const std::string& model_name, int64_t model_version);

  void set_id(const std::string& id);
  void set_flags(uint32_t flags);
  void set_correlation_id(uint64_t id);
  void set_correlation_id_string(const std::string& id);
  void set_priority(uint64_t priority);
  void set_timeout_us(uint64_t timeout_us);
  void set_string_parameter(const std::string& key, const std::string& v);
  void set_int_parameter(const std::string& key, int64_t v);
  void set_bool_parameter(const std::string& key, bool v);
  void set_double_parameter(const std::string& key, double v);

  // `data_ptr` stays valid as long as `owner` lives; owner is kept until
  // Triton releases the request. Host memory of at most
  // kCopiedInputMaxBytes is copied instead (owner is dropped at once).
  void add_input(const std::string& name, int datatype,
                 const std::vector<int64_t>& shape, uintptr_t data_ptr,
                 size_t byte_size, int memory_type, int64_t memory_type_id,
                 nanobind::object owner) {
    add_input_dims(name, datatype, shape.data(), shape.size(), data_ptr,
                   byte_size, memory_type, memory_type_id, std::move(owner));
  }
  // The same with the shape as a pointer (Triton copies it).
  void add_input_dims(const std::string& name, int datatype,
                      const int64_t* shape, size_t ndim, uintptr_t data_ptr,
                      size_t byte_size, int memory_type,
                      int64_t memory_type_id, nanobind::object owner);
  // A raw input (the core's TRITONSERVER_InferenceRequestAddRawInput): host
  // bytes that the core gives the model's only input, its datatype and
  // shape deduced from the model configuration and `byte_size` (KServe's
  // raw binary request: Inference-Header-Content-Length 0). The data as in
  // add_input.
  void add_raw_input(const std::string& name, uintptr_t data_ptr, size_t byte_size,
                     nanobind::object owner);
  // Fast path for C-contiguous host arrays (NumPy): pointer, shape and size
  // come from the buffer protocol; `array` itself is kept as the owner.
  // Returns false, adding nothing, when `array` exports no C-contiguous
  // buffer (the caller then takes the general path).
  // The Triton type comes from the buffer's format (native byte order
  // only); false too for a format with no Triton equivalent.
  bool add_host_array(const std::string& name, nanobind::handle array);
  void add_requested_output(const std::string& name);
  void set_output_memory(int memory_type, int64_t memory_type_id);
  void set_dispatch_token(uint64_t token);
  // Its responses go to `sink` instead of its queue (before submission).
  void set_response_sink(std::shared_ptr<ResponseSink> sink);
  // Marks a request of in-process python model code (BLS): a stop past its
  // exit timeout cancels it (see InflightRequests).
  void set_from_model_code();

  // Hands the request to Triton (call without the GIL).
  void submit();
  // The same from Python (call with the GIL): drops parked references
  // first, submits, and on refusal drops this request's inputs before the
  // exception reaches the caller. With `notifier` (an asyncio loop's), its
  // responses are also announced there, and the GIL is kept while the core
  // takes the request (see request.cc) unless Python runs on the core's
  // threads (a log callback).
  void submit_from_python(
      const std::shared_ptr<LoopNotifier>& notifier = nullptr);
  // Next response; blocks without the GIL. Null on timeout. `poll`: as
  // ResponseQueue::pop's.
  ResponsePtr next(double timeout_s, bool poll = true);
  // The same from Python (call with the GIL): a long wait runs in slices,
  // between which Python's signal handlers run, so Ctrl-C interrupts a wait
  // for a model that never answers (the request is then cancelled and the
  // handler's exception raised). A queued response, or a wait shorter than
  // a slice, is one uninterrupted pop. Parked references are dropped
  // before it returns.
  ResponsePtr next_from_python(double timeout_s);
  // Asks Triton to cancel and queues cancelled_end() for the consumer, whose
  // stream ends there at once; false (a no-op) when the request is not in
  // flight (not submitted, or already released).
  bool cancel();
  // cancel() for a holder without this Request (a native transport's
  // connection, cpp/http_transport.cc): callable from any thread without
  // the GIL, never throws (a failure of the core's cancel is dropped).
  std::function<void()> canceller() const;
  // Gives up an unsubmitted request now (e.g. after a validation error):
  // its core handle is deleted and its inputs released (call with the GIL).
  void discard_from_python();
  // The response queue, keeping the request's state alive. The submitted
  // variant raises INVALID_ARG for a request not submitted.
  std::shared_ptr<ResponseQueue> queue() const noexcept {
    return std::shared_ptr<ResponseQueue>(state_, &state_->queue);
  }
  std::shared_ptr<ResponseQueue> submitted_queue() const;

 private:
  // The core request, to be built on: call with state_->build_mutex held.
  TRITONSERVER_InferenceRequest* live_handle();
  // Appends input `name`'s data to `h` (copied or kept with `owner`, as
  // add_input says), build_mutex held.
  void append_input_data(TRITONSERVER_InferenceRequest* h, const std::string& name, uintptr_t data_ptr,
                         size_t byte_size, int memory_type, int64_t memory_type_id, nanobind::object owner);
  // Applies a core setter to the live request, build_mutex held.
  template <typename... Args, typename... Values>
  void set(TRITONSERVER_Error* (*setter)(TRITONSERVER_InferenceRequest*,
                                         Args...),
           Values... values);

  std::shared_ptr<ServerHandle> server_;
  std::shared_ptr<InflightRequests> inflight_;
  std::shared_ptr<RequestState> state_;
  std::atomic<bool> waiting_{false};
};

}  // namespace tsb
