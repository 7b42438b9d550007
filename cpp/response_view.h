// Python's view of a response and of its output buffers: the last step of
// a response's walk (response_queue.h hands the plain C++ data over; this
// turns it into the tuples and objects tritonserver._api reads).
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>

#include "allocator.h"
#include "request.h"
#include "response_queue.h"

namespace tsb {

// One output buffer held by Python (bound as Buffer, the `owner` of its
// MemoryBuffer): a reference plus the tensor's extent in it.
struct BufferHandle {
  BufferRef ref;
  size_t size;

  BufferHandle(BufferRef r, size_t extent) : ref(std::move(r)), size(extent) {}
  BufferHandle(const BufferHandle&) = default;
  BufferHandle(BufferHandle&&) = default;
  uintptr_t data_ptr() const noexcept {
    return reinterpret_cast<uintptr_t>(ref->data);
  }
  // The last reference to GPU or pinned memory frees it with cudaFree /
  // cudaFreeHost, which may wait for the device: never with the GIL held.
  // (A BufferHandle lives only in Python objects and binding temporaries,
  // so it is always destroyed with the GIL held.)
  ~BufferHandle();
};

// The tritonserver.MemoryBuffer of `size` bytes of `buffer` (its owner a
// Buffer holding the reference): an output is handed to Python once, as
// the official API's object.
nanobind::object memory_buffer(BufferRef buffer, size_t size);

// A copy of `size` bytes at `src` (memory of `src_type`) in a new buffer of
// the given kind, as a MemoryBuffer; the GIL is released while copying.
nanobind::object copy_buffer(uintptr_t src, size_t size, int src_type,
                             int memory_type, int64_t memory_type_id);

// One response (bound as Response; the data stays shared with other
// holders).
struct ResponseHandle {
  ResponsePtr data;

  bool final() const noexcept { return data->final; }
};

// The tritonserver.InferenceResponse of `data`, made by the classes' own
// constructors (Tensor per output, InferenceResponse; its error also in
// `error_out` when given), as
// tritonserver._api._response used to in Python: the request id falls back
// to `inference_request.request_id`; a final response of a cancelled
// request without outputs or error carries CancelledError.
nanobind::object inference_response(const ResponseData& data,
                                     nanobind::handle model,
                                     nanobind::handle inference_request,
                                     bool cancelled,
                                     nanobind::object* error_out = nullptr);

// The error `data` carries as a tritonserver error object (for a cancelled
// request's final response without outputs, CancelledError), or None.
nanobind::object response_error(const ResponseData& data, bool cancelled);
// Raises `error` (from response_error) unless it is None.
void raise_if_error(const nanobind::object& error);

// The native state of a blocking response iterator (bound as
// ResponseStream, the base of tritonserver.ResponseIterator). Its `for`
// loop steps in C (tp_iter/tp_iternext in response_stream_slots): no Python
// frame per step, and the end of the loop raises no StopIteration.
struct ResponseStream {
  nanobind::object model, request, inference_request;
  Request* native_request;  // of `request`, which keeps it alive
  bool raise_on_error, complete = false, cancelled = false;

  ResponseStream(nanobind::object model_, nanobind::object request_,
                 nanobind::object inference_request_, bool raise);
  virtual ~ResponseStream() = default;
  // The InferenceResponse of `response`; after the final one the stream is
  // complete; an error response raises its error when raise_on_error.
  // (kserve_infer.h's stream delivers an HTTP body instead.)
  virtual nanobind::object deliver(const ResponseData& response);
  // Asks Triton to cancel the request (if in flight); the stream then ends
  // at once: its next response is the final one, with CancelledError,
  // and what the backend still sends is dropped.
  void cancel();
  int traverse(visitproc visit, void* arg);
  void clear() noexcept;
};
extern PyType_Slot response_stream_slots[];

// A Response object, or None for a null pointer (a timed-out wait).
nanobind::object response_to_python(ResponsePtr response);

// The next (token, Response) of the user-queue dispatch queue, waiting at
// most `timeout_s` without the GIL; None on timeout.
nanobind::object dispatch_pop_from_python(double timeout_s);

}  // namespace tsb
