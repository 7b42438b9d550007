// The nanobind module: bindings only. Logic lives in the concern files;
// what a lambda here does is adapt an argument or a result, nothing more.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "allocator.h"
#include "asyncio_waiters.h"
#include "cuda_runtime.h"
#include "custom_metrics.h"
#include "deferred_release.h"
#include "dlpack.h"
#include "errors.h"
#include "fork.h"
#include "fork_hooks.h"
#include "host_pool.h"
#ifdef TRITONSERVER_NATIVE_GRPC
#include "grpc_transport.h"
#endif
#ifdef TRITONSERVER_NATIVE_HTTP
#include "http_transport.h"
#endif
#include "inflight_requests.h"
#include "kserve_infer.h"
#include "log_callback.h"
#include "python_backend/bindings.h"
#include "request.h"
#include "response_view.h"
#include "server.h"
#include "spin_wait.h"
#include "triton_library.h"
#include "thread_state.h"

namespace nb = nanobind;
using namespace nb::literals;
using namespace tsb;

// Bind ServerOptions setters; `field` is the Options field named in errors.
#define OPTION(py_name, core_fn, field, T)                                 \
  .def(py_name, [](ServerOptions& o, T value) {                           \
    o.apply(triton().core_fn, field, value);                              \
  })
#define OPTION_STR(py_name, core_fn, field)                                \
  .def(py_name, [](ServerOptions& o, const std::string& value) {          \
    o.apply(triton().core_fn, field, value.c_str());                      \
  })
#define OPTION_TRIPLE(py_name, core_fn, field)                             \
  .def(py_name, [](ServerOptions& o, const std::string& a,                \
                   const std::string& b, const std::string& c) {          \
    o.apply(triton().core_fn, field, a.c_str(), b.c_str(), c.c_str());    \
  })

NB_MODULE(_native, m) {
  m.doc() = "The native module of the tritonserver package (private).";
#ifndef TRITONSERVER_LEAK_WARNINGS
  // Objects a user still holds at interpreter exit (a NumPy view of an
  // output, a Tensor, an iterator) are not freed by Python's teardown;
  // nanobind would call each a reference-counting bug on stderr. Builds
  // with -DTRITONSERVER_LEAK_WARNINGS=ON (tests/run_asan.sh) keep the
  // warnings to catch real leaks of the binding.
  nb::set_leak_warnings(false);
#endif

  nb::register_exception_translator(&translate_exception);
  install_fork_hooks();

  // --- loading libtritonserver and CUDA -------------------------------------------
  m.def(
      "load_triton",
      [](const std::string& path, const std::vector<std::string>& companions) {
        LoadedCore c;
        {
          GilRelease release;
          c = load_triton(path, companions);
        }
        return nb::make_tuple(c.path, c.api_major, c.api_minor);
      },
      "path"_a, "companions"_a,
      nb::sig("def load_triton(path: str, companions: collections.abc.Sequence[str]) "
              "-> tuple[str, int, int]"));
  m.def("triton_loaded", &triton_loaded);
  m.def("loaded_api_version", []() {
    const LoadedCore& c = loaded_core();
    return nb::make_tuple(c.api_major, c.api_minor);
  }, nb::sig("def loaded_api_version() -> tuple[int, int]"));
  m.def("missing_functions", &missing_functions,
        nb::sig("def missing_functions() -> list[tuple[str, str]]"));
  m.def("cuda_load", &cuda_load, "candidates"_a,
        nb::call_guard<tsb::GilRelease>());
  m.def("cuda_device_count", &cuda_device_count);
  m.def("cuda_status", &cuda_status);
  m.def("cuda_stream_wait_default", &cuda_stream_wait_default, "device"_a,
        "stream"_a);

  // --- buffers and DLPack ----------------------------------------------
  m.def("claim_releaser_start", &claim_releaser_start,
        "True once per needed start of the releaser thread (see run_releaser).");
  m.def("stop_releaser", &stop_deferred_releaser,
        "At interpreter exit, after the servers stopped: ends run_releaser (the caller then joins "
        "its thread) and drops what is parked.");
  m.def("run_releaser", &run_releaser,
        "The releaser thread's body, for a thread Python starts: drops parked references "
        "when Python does not drain them within 20 ms; returns at interpreter exit.");
  m.def("host_pool_trim", &host_pool_trim,
        nb::call_guard<tsb::GilRelease>());

  nb::class_<BufferHandle>(m, "Buffer")
      .def_prop_ro("data_ptr", &BufferHandle::data_ptr)
      .def_prop_ro("size", [](const BufferHandle& b) { return b.size; })
      .def_prop_ro("memory_type",
                   [](const BufferHandle& b) {
                     return static_cast<int>(b.ref->memory_type);
                   })
      .def_prop_ro("memory_type_id",
                   [](const BufferHandle& b) { return b.ref->memory_type_id; });
  m.def("copy", &copy_buffer, "src"_a, "size"_a, "src_type"_a,
        "memory_type"_a, "memory_type_id"_a,
        nb::sig("def copy(src: int, size: int, src_type: int, memory_type: int, "
                "memory_type_id: int) -> typing.Any"));

  m.def("export_dlpack", &export_dlpack, "owner"_a.none(), "data_ptr"_a, "nbytes"_a,
        "shape"_a,
        "code"_a, "bits"_a, "device_type"_a, "device_id"_a, "versioned"_a);

  nb::class_<DLPackView>(m, "DLPackView")
      .def_prop_ro("data_ptr", &DLPackView::data_ptr)
      .def_prop_ro("shape", &DLPackView::shape)
      .def_prop_ro("dtype_code", &DLPackView::dtype_code)
      .def_prop_ro("dtype_bits", &DLPackView::dtype_bits)
      .def_prop_ro("device_type", &DLPackView::device_type)
      .def_prop_ro("device_id", &DLPackView::device_id)
      .def_prop_ro("nbytes", &DLPackView::nbytes)
      .def_prop_ro("c_contiguous", &DLPackView::c_contiguous)
      .def("contiguous_copy", [](const DLPackView& v) {
        BufferRef copy = v.contiguous_copy();
        const size_t size = copy->size;
        return memory_buffer(std::move(copy), size);
      }, nb::sig("def contiguous_copy(self) -> typing.Any"));
  m.def("dlpack_capsule_device", &dlpack_capsule_device, "capsule"_a,
        nb::sig("def dlpack_capsule_device(capsule: object) -> tuple[int, int]"));
  m.def(
      "import_dlpack",
      [](nb::ndarray<nb::ro> array) { return DLPackView(std::move(array)); },
      "array"_a, nb::sig("def import_dlpack(array: object) -> DLPackView"));

  // --- server ------------------------------------------------------------
  nb::class_<ServerOptions>(m, "ServerOptions")
      .def(nb::init<>())
      OPTION_STR("set_server_id", ServerOptionsSetServerId, "server_id")
      OPTION_STR("set_model_repository", ServerOptionsSetModelRepositoryPath, "model_repository")
      OPTION("set_model_control_mode", ServerOptionsSetModelControlMode, "model_control_mode", int)
      OPTION_STR("set_startup_model", ServerOptionsSetStartupModel, "startup_models")
      OPTION("set_strict_model_config", ServerOptionsSetStrictModelConfig, "strict_model_config", bool)
      OPTION("set_rate_limiter_mode", ServerOptionsSetRateLimiterMode, "rate_limiter_mode", int)
      .def("set_rate_limiter_resource",
           [](ServerOptions& o, const std::string& name, size_t count,
              int device) {
             o.apply(triton().ServerOptionsAddRateLimiterResource,
                     "rate_limiter_resources", name.c_str(), count, device);
           })
      OPTION("set_pinned_memory_pool_size", ServerOptionsSetPinnedMemoryPoolByteSize, "pinned_memory_pool_size", uint64_t)
      .def("set_cuda_memory_pool_size",
           [](ServerOptions& o, int device, uint64_t size) {
             o.apply(triton().ServerOptionsSetCudaMemoryPoolByteSize,
                     "cuda_memory_pool_sizes", device, size);
           })
      .def("set_cache_config",
           [](ServerOptions& o, const std::string& name,
              const std::string& json) {
             o.apply(triton().ServerOptionsSetCacheConfig, "cache_config",
                     name.c_str(), json.c_str());
           })
      OPTION_STR("set_cache_directory", ServerOptionsSetCacheDirectory, "cache_directory")
      OPTION("set_min_supported_compute_capability", ServerOptionsSetMinSupportedComputeCapability, "min_supported_compute_capability", double)
      OPTION("set_exit_on_error", ServerOptionsSetExitOnError, "exit_on_error", bool)
      OPTION("set_strict_readiness", ServerOptionsSetStrictReadiness, "strict_readiness", bool)
      .def("set_exit_timeout", &ServerOptions::set_exit_timeout, "seconds"_a)
      OPTION("set_buffer_manager_thread_count", ServerOptionsSetBufferManagerThreadCount, "buffer_manager_thread_count", unsigned int)
      OPTION("set_model_load_thread_count", ServerOptionsSetModelLoadThreadCount, "model_load_thread_count", unsigned int)
      // A core without this setter never retries a load: 0 asks for no more.
      .def("set_model_load_retry_count",
           [](ServerOptions& o, unsigned int count) {
             if (count == 0 && triton().ServerOptionsSetModelLoadRetryCount == nullptr) return;
             o.apply(TRITON_NEED(ServerOptionsSetModelLoadRetryCount),
                     "model_load_retry_count", count);
           })
      OPTION("set_model_namespacing", ServerOptionsSetModelNamespacing, "model_namespacing", bool)
      // A core without this setter always enables peer access: only False
      // needs it.
      .def("set_enable_peer_access",
           [](ServerOptions& o, bool enable) {
             if (enable && triton().ServerOptionsSetEnablePeerAccess == nullptr) return;
             o.apply(TRITON_NEED(ServerOptionsSetEnablePeerAccess),
                     "enable_peer_access", enable);
           })
      OPTION_STR("set_log_file", ServerOptionsSetLogFile, "log_file")
      OPTION("set_log_info", ServerOptionsSetLogInfo, "log_info", bool)
      OPTION("set_log_warn", ServerOptionsSetLogWarn, "log_warn", bool)
      OPTION("set_log_error", ServerOptionsSetLogError, "log_error", bool)
      OPTION("set_log_format", ServerOptionsSetLogFormat, "log_format", int)
      OPTION("set_log_verbose", ServerOptionsSetLogVerbose, "log_verbose", int)
      OPTION("set_metrics", ServerOptionsSetMetrics, "metrics", bool)
      OPTION("set_gpu_metrics", ServerOptionsSetGpuMetrics, "gpu_metrics", bool)
      OPTION("set_cpu_metrics", ServerOptionsSetCpuMetrics, "cpu_metrics", bool)
      OPTION("set_metrics_interval", ServerOptionsSetMetricsInterval, "metrics_interval", uint64_t)
      OPTION_STR("set_backend_directory", ServerOptionsSetBackendDirectory, "backend_directory")
      OPTION_STR("set_repo_agent_directory", ServerOptionsSetRepoAgentDirectory, "repo_agent_directory")
      .def("set_model_load_device_limit",
           [](ServerOptions& o, int kind, int device, double fraction) {
             o.apply(triton().ServerOptionsSetModelLoadDeviceLimit,
                     "model_load_device_limits", kind, device, fraction);
           })
      OPTION_TRIPLE("set_backend_config", ServerOptionsSetBackendConfig, "backend_configuration")
      OPTION_TRIPLE("set_host_policy", ServerOptionsSetHostPolicy, "host_policies")
      OPTION_TRIPLE("set_metrics_config", ServerOptionsSetMetricsConfig, "metrics_configuration")
      .def(
          "set_log_callback",
          [](ServerOptions& o, nb::callable fn) {
            install_log_callback(o, std::move(fn));
          },
          nb::sig("def set_log_callback(self, fn: collections.abc.Callable[[int, str, int, str], None], /) -> None"));

  nb::class_<StopInProgress>(m, "StopInProgress")
      .def("wait", &StopInProgress::wait, "timeout_s"_a,
           nb::call_guard<tsb::GilRelease>())
      .def("inflight", &StopInProgress::inflight,
           nb::call_guard<tsb::GilRelease>())
      .def("finish", &StopInProgress::finish_from_python)
      .def("leave_running", &StopInProgress::leave_running);
  nb::class_<UnloadInProgress>(m, "UnloadInProgress")
      .def("wait", &UnloadInProgress::wait, "timeout_s"_a,
           nb::call_guard<tsb::GilRelease>())
      .def("finish", &UnloadInProgress::finish);
  nb::class_<Server>(m, "Server")
      .def(nb::init<ServerOptions&>(), "options"_a,
           nb::call_guard<tsb::GilRelease>())
      .def("handle_address",
           [](const Server& s) {
             TRITONSERVER_Server* h = s.handle()->peek();
             if (h == nullptr) {
               raise(TRITONSERVER_ERROR_UNAVAILABLE, "the server is stopped");
             }
             return reinterpret_cast<uintptr_t>(h);
           })
      .def("begin_stop", &Server::begin_stop_from_python)
      .def("is_live", &Server::is_live,
           nb::call_guard<tsb::GilRelease>())
      .def("is_ready", &Server::is_ready,
           nb::call_guard<tsb::GilRelease>())
      .def("metadata", &Server::metadata,
           nb::call_guard<tsb::GilRelease>())
      .def("model_index", &Server::model_index, "flags"_a,
           nb::call_guard<tsb::GilRelease>())
      .def("model_is_ready", &Server::model_is_ready,
           nb::call_guard<tsb::GilRelease>())
      .def("model_batch_properties", &Server::model_batch_properties,
           nb::call_guard<tsb::GilRelease>())
      .def("model_transaction_properties",
           &Server::model_transaction_properties,
           nb::call_guard<tsb::GilRelease>())
      .def("model_metadata", &Server::model_metadata,
           nb::call_guard<tsb::GilRelease>())
      .def("model_statistics", &Server::model_statistics,
           nb::call_guard<tsb::GilRelease>())
      .def("model_config", &Server::model_config,
           nb::call_guard<tsb::GilRelease>())
      .def("load_model", &Server::load_model_from_python,
           nb::sig("def load_model(self, name: str, parameters: dict[str, object], /) -> None"))
      .def("unload_model", &Server::unload_model,
           nb::call_guard<tsb::GilRelease>())
      .def("begin_unload", &Server::begin_unload_from_python)
      .def("draining_models", &Server::draining_models,
           nb::call_guard<tsb::GilRelease>())
      .def("register_model_repository", &Server::register_model_repository,
           nb::call_guard<tsb::GilRelease>())
      .def("unregister_model_repository",
           &Server::unregister_model_repository,
           nb::call_guard<tsb::GilRelease>())
      .def("poll_model_repository", &Server::poll_model_repository,
           nb::call_guard<tsb::GilRelease>())
      .def("metrics", &Server::metrics,
           nb::call_guard<tsb::GilRelease>())
      .def_static("reap_stopped", &Server::reap_stopped, "timeout_s"_a,
                  nb::call_guard<tsb::GilRelease>())
      .def_static("background_inflight", &Server::background_inflight,
                  nb::call_guard<tsb::GilRelease>());
  m.def("end_child_at_exit", &end_child_at_exit,
        "In a child of fork(): end with _exit() once Python finalized, when "
        "the parent had created a server (see cpp/fork.h).");

  // --- requests and responses -------------------------------------------
  nb::class_<ResponseHandle>(m, "Response")
      .def_prop_ro("final", &ResponseHandle::final)
      .def("inference_response",
           [](const ResponseHandle& h, nb::handle model, nb::handle inference_request,
              bool cancelled) {
             return inference_response(*h.data, model, inference_request, cancelled);
           },
           "model"_a, "inference_request"_a, "cancelled"_a = false,
           nb::sig("def inference_response(self, model: typing.Any, inference_request: typing.Any, "
                   "cancelled: bool = False) -> typing.Any"));

  // The base of tritonserver.ResponseIterator (iterated in C).
  nb::class_<ResponseStream>(m, "ResponseStream", nb::type_slots(response_stream_slots))
      .def(nb::init<nb::object, nb::object, nb::object, bool>(), "model"_a,
           "request"_a, "inference_request"_a, "raise_on_error"_a = false,
           nb::sig("def __init__(self, model: typing.Any, request: Request, "
                   "inference_request: typing.Any, raise_on_error: bool = False) -> None"))
      .def("cancel", &ResponseStream::cancel,
           "Ask Triton to cancel the request; the stream then ends promptly,\n"
           "with CancelledError (raise_on_error) or a response carrying it.");

  // The base of tritonserver.AsyncResponseIterator (__anext__ in C).
  nb::class_<AsyncResponseStream, ResponseStream>(
      m, "AsyncResponseStream", nb::type_slots(async_response_stream_slots))
      .def(nb::init<nb::object, nb::object, nb::object, bool, nb::object, nb::object>(),
           "model"_a, "request"_a, "inference_request"_a, "raise_on_error"_a,
           "loop"_a, "waiters"_a,
           nb::sig("def __init__(self, model: typing.Any, request: Request, "
                   "inference_request: typing.Any, raise_on_error: bool, "
                   "loop: typing.Any, waiters: AsyncioWaiters) -> None"));

  nb::class_<Request>(m, "Request", nb::is_weak_referenceable())
      .def("__init__",
           [](Request* r, const Server& server, const std::string& model_name,
              int64_t model_version) {
             new (r) Request(server.handle(), server.inflight(), model_name,
                             model_version);
           },
           "server"_a, "model_name"_a, "model_version"_a)
      .def("set_id", &Request::set_id)
      .def("set_flags", &Request::set_flags)
      .def("set_correlation_id", &Request::set_correlation_id)
      .def("set_correlation_id_string", &Request::set_correlation_id_string)
      .def("set_priority", &Request::set_priority)
      .def("set_timeout_us", &Request::set_timeout_us)
      .def("set_string_parameter", &Request::set_string_parameter)
      .def("set_int_parameter", &Request::set_int_parameter)
      .def("set_bool_parameter", &Request::set_bool_parameter)
      .def("set_double_parameter", &Request::set_double_parameter)
      .def("add_input", &Request::add_input, "name"_a, "datatype"_a,
           "shape"_a, "data_ptr"_a, "byte_size"_a, "memory_type"_a,
           "memory_type_id"_a, "owner"_a)
      .def("add_host_array", &Request::add_host_array, "name"_a, "array"_a)
      .def("add_raw_input", &Request::add_raw_input, "name"_a, "data_ptr"_a, "byte_size"_a, "owner"_a)
      .def("add_requested_output", &Request::add_requested_output)
      .def("set_output_memory", &Request::set_output_memory)
      .def("set_dispatch_token", &Request::set_dispatch_token)
      .def("set_from_model_code", &Request::set_from_model_code)
      .def("submit", [](Request& r) { r.submit_from_python(); })
      .def("cancel", &Request::cancel)
      .def("discard", &Request::discard_from_python);

  // What AsyncResponseStream.__anext__ returns: the awaitable of the next
  // response, with the coroutine protocol.
  nb::class_<NextResponse>(m, "NextResponse", nb::type_slots(next_response_slots))
      .def("send",
           [](NextResponse& n, nb::handle value) {
             PyObject* r = n.step(value.ptr());
             if (r == nullptr) throw nb::python_error();
             return nb::steal(r);
           },
           "value"_a.none(), nb::sig("def send(self, value: object, /) -> typing.Any"))
      .def("throw",
           [](NextResponse& n, nb::handle type, nb::handle value, nb::handle traceback) {
             n.throw_in(type.ptr(), value.ptr(), traceback.ptr());
             throw nb::python_error();
           },
           "type"_a, "value"_a.none() = nb::none(), "traceback"_a.none() = nb::none(),
           nb::sig("def throw(self, type: typing.Any, value: typing.Any = None, "
                   "traceback: typing.Any = None, /) -> typing.NoReturn"))
      .def("close", &NextResponse::abandon);

  // Used on the loop's thread only (the loop's own callbacks and tasks).
  nb::class_<AsyncioWaiters>(m, "AsyncioWaiters",
                             nb::type_slots(asyncio_waiters_slots))
      .def(nb::init<nb::object>(), "future_type"_a.none(),
           nb::sig("def __init__(self, future_type: type | None) -> None"))
      .def_prop_ro("fd", &AsyncioWaiters::fd)
      .def("submit",
           [](AsyncioWaiters& w, Request& r) {
             r.submit_from_python(w.notifier());
           })
      .def("on_ready", &AsyncioWaiters::on_ready)
      .def("poll_news", &AsyncioWaiters::poll_news, "epoll_fd"_a, "timeout_s"_a);

  // The KServe HTTP infer route's fast path (tritonserver/_kserve/fast_infer.py).
  nb::class_<KServeInferStream, AsyncResponseStream>(
      m, "KServeInferStream", nb::type_slots(async_response_stream_slots));
  m.def("kserve_infer", &kserve_infer, "server"_a, "model"_a, "model_name"_a,
        "model_version"_a, "body"_a, "header_length"_a,
        "route_parameters"_a.none(), "loop"_a, "waiters"_a,
        nb::sig("def kserve_infer(server: Server, model: typing.Any, model_name: str, "
                "model_version: int, body: object, header_length: int, "
                "route_parameters: object, loop: typing.Any, waiters: AsyncioWaiters) "
                "-> KServeInferStream | None"));

#ifdef TRITONSERVER_NATIVE_HTTP
  // KServeHttp's native HTTP/1.1 transport (tritonserver/frontend/_native_http.py).
  bind_http_transport(m);
#endif
#ifdef TRITONSERVER_NATIVE_GRPC
  // KServeGrpc's native gRPC transport (tritonserver/frontend/_native_grpc.py).
  bind_grpc_transport(m);
#endif

  m.def("dispatch_pop", &dispatch_pop_from_python, "timeout_s"_a,
        nb::sig("def dispatch_pop(timeout_s: float) -> tuple[int, Response] | None"));

  // --- custom metrics -----------------------------------------------------
  nb::class_<MetricFamily>(m, "MetricFamily")
      .def(nb::init<int, const std::string&, const std::string&>(), "kind"_a,
           "name"_a, "description"_a)
      .def_prop_ro("kind", &MetricFamily::kind);
  nb::class_<Metric>(m, "Metric")
      .def(nb::init<std::shared_ptr<MetricFamily>,
                    const std::vector<std::pair<std::string, std::string>>&>(),
           "family"_a, "labels"_a)
      .def_prop_ro("value", &Metric::value)
      .def_prop_ro("kind", &Metric::kind)
      .def("increment", &Metric::increment, "value"_a)
      .def("set_value", &Metric::set_value, "value"_a);

  // --- python models in-process (python_backend/) -------------------------
  bind_python_backend(m, live_requests);
  set_open_requests_release(&fail_open_python_requests);
  m.def("claim_state_maker_start", &claim_state_maker_start,
        "True once per needed start of the state maker thread (see run_state_maker).");
  m.def("run_state_maker", &run_state_maker,
        "The state maker's body (a threading.Thread): makes, holding the GIL, the thread states "
        "the core's threads keep; returns after stop_state_maker().");
  m.def("stop_state_maker", &stop_state_maker,
        "At interpreter exit: ends run_state_maker (the caller then joins its thread).");

#ifdef TRITONSERVER_TESTING
  // --- test hooks (built with -DTRITONSERVER_TESTING=ON only) ----------
  nb::module_ testing = m.def_submodule(
      "testing", "Test hooks (a build with -DTRITONSERVER_TESTING=ON only).");
  testing.def("live_buffer_count", &live_buffer_count);
  testing.def("live_buffer_addresses", &live_buffer_addresses);
  testing.def("drain_deferred", &drain_deferred);
  testing.def("deferred_release_wakes", &deferred_release_wakes);
  testing.def("host_pool_cached_bytes", &host_pool_cached_bytes);
  testing.def("elf_needed", &elf_needed);
  testing.def("spin_pollers_allowed", &SpinWait::pollers_allowed);
  testing.def("usable_cpus", &SpinWait::usable_cpus);
  testing.def("threads_waiting", &SpinWait::waiting_now);
  testing.def("asyncio_waiting", &AsyncioWaiters::waiting, "waiters"_a,
              "How many futures `waiters` has made that are not resolved.");
  testing.def(
      "response_queued",
      [](const ResponseStream& s) { return s.native_request->queue()->has_response(); },
      "stream"_a, "Whether a response of the stream's request is queued, not yet taken.");
  testing.def("loaded_core_path", []() {
    return triton_loaded() ? loaded_core().path : std::string();
  });
#endif
}
