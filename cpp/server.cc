#include "server.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include <nanobind/stl/string.h>

#include "background_outcome.h"
#include "deferred_release.h"
#include "errors.h"
#include "fork.h"
#include "model_index.h"
#include "parameter_list.h"
#include "request.h"
#include "triton_library.h"
#include "thread_state.h"

namespace tsb {
// One TRITONSERVER_ServerStop, run to its end on a thread of ours.
//
// Why: the core's Stop() unloads the models only once no request is in
// flight; when its exit timeout expires first it returns an error with every
// model still loaded, and from then on it is a no-op (the server is marked
// exiting), as is ServerUnloadModel ("Server not ready"). ServerDelete would
// then drop the models, and Triton 2.51 destroys a dropped model on a
// detached thread (ModelDeleter) that goes on using the rate limiter and the
// model lifecycle that ServerDelete has just freed: ~TritonModel ->
// RateLimiter::UnregisterModel on freed memory, a SIGSEGV (seen at
// interpreter exit, about 1 run in 4). So the core gets exit_timeout +
// kStopGrace, stop() waits only exit_timeout for this thread, and the server
// is deleted only after its own Stop() succeeded: every model unloaded and
// destroyed. The waiter (StopInProgress) waits in slices, and may give up
// early (a Ctrl-C): the stop then goes on the same way.
//
// Before ServerStop, the requests submitted through this package are let
// finish (at most the exit timeout): the core's stop would otherwise unload
// the models under the requests its backends are executing (see
// InflightRequests::wait_submitted()); then the models are unloaded and
// waited for here, in milliseconds rather than the core's seconds
// (unload_models_first()).
struct BackgroundStop : BackgroundOutcome {
  BackgroundStop(TRITONSERVER_Server* s, std::shared_ptr<InflightRequests> r,
                 unsigned int exit_timeout_s)
      : server(s), inflight(std::move(r)), exit_timeout_s(exit_timeout_s) {}

  // The thread's body. Never throws (it is a thread entry point).
  void run() noexcept {
    const TritonApi& api = triton();
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::seconds(exit_timeout_s);
    if (inflight->wait_submitted(exit_timeout_s)) {
      let_backend_threads_finish();
      unload_models_first(server, deadline);
    } else {
      // Past the exit timeout the requests of model code (BLS) still in
      // flight are cancelled and their waiters woken: model code waiting on
      // a request of its own (an instance calling its own model, a
      // deadlock) gets its cancelled response and returns, so the core's
      // stop can end rather than give up with the model's thread still
      // running, into the process's exit (a heap corruption, seen at
      // interpreter exit). The user's requests go on to their end.
      inflight->cancel_model_code_requests();
      // The requests models keep open without answering are answered with
      // an error: the core's stop would wait for them past its own timeout.
      release_open_requests(server, nullptr);
    }
    TRITONSERVER_Error* err = api.ServerStop(server);
    const bool stop_failed = err != nullptr;
    TRITONSERVER_Error_Code err_code = TRITONSERVER_ERROR_INTERNAL;
    std::string err_message;
    if (err == nullptr) {
      ignore_error(api.ServerDelete(server));
    } else {
      // Even the grace did not suffice (a model that cannot unload, e.g. a
      // python model whose stub died). Deleting the server now is the crash
      // described above: it is left to the process, on purpose.
      err_code = api.ErrorCode(err);
      try {
        err_message = api.ErrorMessage(err);
      } catch (...) {
      }
      api.ErrorDelete(err);
    }
    try {
      // Anything the core dropped without a final response must not hang a
      // waiter.
      inflight->fail_all("the server stopped before this request completed");
    } catch (...) {
    }
    set(stop_failed, err_code, std::move(err_message));
  }

  TRITONSERVER_Server* const server;
  const std::shared_ptr<InflightRequests> inflight;
  const unsigned int exit_timeout_s;
  bool left_running = false;  // listed for reap_stopped() (under `mutex`)
};

namespace {

// Background stops still running after their stop() gave up. Allocated once
// and never destroyed, on purpose: nothing to order against threads still
// running at process exit.
struct BackgroundStops {
  std::mutex mutex;
  std::vector<std::shared_ptr<BackgroundStop>> running;
};

// A child of fork() starts with none: its parent's stop threads are not
// there, and the list's lock may have been held by one of them.
BackgroundStops*& background_stops_pointer() {
  static BackgroundStops* stops = [] {
    return new BackgroundStops();
  }();
  return stops;
}

BackgroundStops& background_stops() { return *background_stops_pointer(); }

// Releases the GIL, when the calling thread holds it, for its lifetime (the
// destructor of a Server runs in Python's deallocation, with the GIL).
class GilReleasedIfHeld {
 public:
  GilReleasedIfHeld() noexcept
      : saved_(holds_gil() ? PyEval_SaveThread() : nullptr) {}
  ~GilReleasedIfHeld() {
    if (saved_ == nullptr) return;
    restore_thread(saved_);
    try {
      drain_deferred();  // the inputs of the requests stop() discarded
    } catch (...) {
    }
  }
  GilReleasedIfHeld(const GilReleasedIfHeld&) = delete;
  GilReleasedIfHeld& operator=(const GilReleasedIfHeld&) = delete;

 private:
  PyThreadState* saved_;
};

}  // namespace

void server_after_fork_in_child() noexcept {
  background_stops_pointer() = new BackgroundStops();
}

size_t Server::reap_stopped(double timeout_s) {
  BackgroundStops& stops = background_stops();
  std::vector<std::shared_ptr<BackgroundStop>> running;
  {
    std::lock_guard<std::mutex> lock(stops.mutex);
    running = stops.running;
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(timeout_s);
  size_t not_deleted = 0;
  for (const auto& stop : running) {
    const std::chrono::duration<double> remaining =
        deadline - std::chrono::steady_clock::now();
    if (!stop->wait(std::max(0.0, remaining.count()))) {
      ++not_deleted;
      continue;
    }
    std::lock_guard<std::mutex> lock(stop->mutex);
    if (stop->failed) ++not_deleted;
  }
  std::lock_guard<std::mutex> lock(stops.mutex);
  auto& v = stops.running;
  v.erase(std::remove_if(v.begin(), v.end(),
                         [](const std::shared_ptr<BackgroundStop>& stop) {
                           std::lock_guard<std::mutex> l(stop->mutex);
                           return stop->done;
                         }),
          v.end());
  return not_deleted;
}

std::vector<std::pair<std::string, size_t>> Server::background_inflight() {
  std::vector<std::shared_ptr<BackgroundStop>> running;
  {
    std::lock_guard<std::mutex> lock(background_stops().mutex);
    running = background_stops().running;
  }
  std::map<std::string, size_t> counts;
  for (const auto& stop : running) {
    for (const auto& [model, count] : stop->inflight->submitted_per_model()) {
      counts[model] += count;
    }
  }
  return {counts.begin(), counts.end()};
}

void ServerOptions::set_exit_timeout(unsigned int seconds) {
  const unsigned int core_seconds =
      seconds > std::numeric_limits<unsigned int>::max() - kStopGrace
          ? std::numeric_limits<unsigned int>::max()
          : seconds + kStopGrace;
  apply(triton().ServerOptionsSetExitTimeout, "exit_timeout", core_seconds);
  exit_timeout_s_ = seconds;
}

ServerOptions::ServerOptions() {
  check(triton().ServerOptionsNew(&options_));
  set_exit_timeout(exit_timeout_s_);
}

ServerOptions::~ServerOptions() {
  if (options_ != nullptr) {
    ignore_error(triton().ServerOptionsDelete(options_));
  }
}

Server::Server(ServerOptions& options)
    : inflight_(std::make_shared<InflightRequests>()),
      exit_timeout_s_(options.exit_timeout()) {
  watch_forks();
  TRITONSERVER_Server* server = nullptr;
  check(triton().ServerNew(&server, options.get()));
  handle_ = std::make_shared<ServerHandle>(server);
}

Server::~Server() {
  // A server dropped while running stops as begin_stop() does (never
  // deleted under its models, see BackgroundStop), without the GIL: other
  // Python threads go on meanwhile. A child of fork() leaves its parent's
  // server alone (see fork.h).
  if (!handle_ || handle_->inherited()) return;
  GilReleasedIfHeld unlocked;
  TRITONSERVER_Server* server = handle_->close();
  if (server == nullptr) return;
  try {
    StopInProgress stopping = start_stop(server);
    if (!stopping.wait(exit_timeout_s_)) stopping.leave_running();
  } catch (...) {
  }
}

StopInProgress Server::start_stop(TRITONSERVER_Server* server) {
  inflight_->discard_unsubmitted();
  auto stop = std::make_shared<BackgroundStop>(server, inflight_, exit_timeout_s_);
  try {
    std::thread([stop] { stop->run(); }).detach();
  } catch (const std::system_error&) {
    stop->run();  // no thread to be had: stop here, however long it takes
  }
  return StopInProgress(std::move(stop), exit_timeout_s_);
}

StopInProgress Server::begin_stop() {
  // In a child of fork() the server is the parent's, not this process's to
  // stop: nothing to do (see fork.h).
  if (handle_->inherited()) return StopInProgress(nullptr, exit_timeout_s_);
  // Waits for the calls into the core in progress (a request being built
  // or submitted among them); none can start after this.
  TRITONSERVER_Server* server = handle_->close();
  if (server == nullptr) {
    raise(TRITONSERVER_ERROR_UNAVAILABLE, "the server is stopped");
  }
  return start_stop(server);
}

StopInProgress Server::begin_stop_from_python() {
  std::optional<StopInProgress> stopping;
  {
    GilRelease release;
    stopping.emplace(begin_stop());
  }
  drain_deferred();
  return std::move(*stopping);
}

StopInProgress::StopInProgress(std::shared_ptr<BackgroundStop> stop,
                               unsigned int exit_timeout_s) noexcept
    : stop_(std::move(stop)),
      exit_timeout_s_(exit_timeout_s),
      fork_generation_(fork_generation()) {}

BackgroundStop* StopInProgress::ours() const noexcept {
  return inherited_from_parent(fork_generation_) ? nullptr : stop_.get();
}

bool StopInProgress::wait(double timeout_s) {
  BackgroundStop* stop = ours();
  return stop == nullptr || stop->wait(std::max(0.0, timeout_s));
}

std::vector<std::pair<std::string, size_t>> StopInProgress::inflight() const {
  BackgroundStop* stop = ours();
  if (stop == nullptr) return {};
  return stop->inflight->submitted_per_model();
}

void StopInProgress::leave_running() noexcept {
  BackgroundStop* stop = ours();
  if (stop == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(stop->mutex);
    if (stop->done || stop->left_running) return;
    stop->left_running = true;
  }
  // The work in flight outlives the wait. The core's stop goes on (the
  // requests complete and reach their waiters, then the models unload and
  // the server is deleted); reap_stopped() waits for it at interpreter
  // exit.
  BackgroundStops& stops = background_stops();
  try {
    std::lock_guard<std::mutex> lock(stops.mutex);
    stops.running.push_back(stop_);
  } catch (...) {  // out of memory: the stop still ends on its own
  }
}

void StopInProgress::finish() {
  BackgroundStop* stop = ours();
  if (stop == nullptr) return;
  if (!stop->wait(0)) {
    leave_running();
    raise(TRITONSERVER_ERROR_INTERNAL,
          "Exit timeout expired: the server did not stop within exit_timeout "
          "(" + std::to_string(exit_timeout_s_) +
              " s), requests still running or models still unloading; it "
              "finishes stopping in the background");
  }
  std::lock_guard<std::mutex> lock(stop->mutex);
  if (stop->failed) raise(stop->code, stop->message);
}

void StopInProgress::finish_from_python() {
  drain_deferred();  // what the requests that ended meanwhile parked
  finish();
}

bool Server::is_live() {
  bool live = false;
  check(triton().ServerIsLive(use().get(), &live));
  return live;
}

bool Server::is_ready() {
  bool ready = false;
  check(triton().ServerIsReady(use().get(), &ready));
  return ready;
}

std::string Server::metadata() {
  TRITONSERVER_Message* m = nullptr;
  check(triton().ServerMetadata(use().get(), &m));
  return take_json(m);
}

std::string Server::model_index(uint32_t flags) {
  TRITONSERVER_Message* m = nullptr;
  check(triton().ServerModelIndex(use().get(), flags, &m));
  return take_json(m);
}

bool Server::model_is_ready(const std::string& name, int64_t version) {
  bool ready = false;
  check(triton().ServerModelIsReady(use().get(), name.c_str(), version,
                                    &ready));
  return ready && !inflight_->draining(name);
}

uint32_t Server::model_batch_properties(const std::string& name,
                                        int64_t version) {
  uint32_t flags = 0;
  void* voidp = nullptr;
  check(triton().ServerModelBatchProperties(use().get(), name.c_str(), version,
                                            &flags, &voidp));
  return flags;
}

uint32_t Server::model_transaction_properties(const std::string& name,
                                              int64_t version) {
  uint32_t flags = 0;
  void* voidp = nullptr;
  check(triton().ServerModelTransactionProperties(use().get(), name.c_str(),
                                                  version, &flags, &voidp));
  return flags;
}

std::string Server::model_metadata(const std::string& name, int64_t version) {
  inflight_->refuse_if_draining(name, version);
  TRITONSERVER_Message* m = nullptr;
  check(triton().ServerModelMetadata(use().get(), name.c_str(), version, &m));
  return take_json(m);
}

std::string Server::model_statistics(const std::string& name,
                                     int64_t version) {
  TRITONSERVER_Message* m = nullptr;
  check(triton().ServerModelStatistics(use().get(), name.c_str(), version, &m));
  return take_json(m);
}

std::string Server::model_config(const std::string& name, int64_t version,
                                 uint32_t config_version) {
  inflight_->refuse_if_draining(name, version);
  TRITONSERVER_Message* m = nullptr;
  check(triton().ServerModelConfig(use().get(), name.c_str(), version,
                                   config_version, &m));
  return take_json(m);
}

void Server::load_model(const std::string& name,
                        const std::vector<LoadParameter>& parameters) {
  const TritonApi& api = triton();
  ParameterList list;
  for (const LoadParameter& p : parameters) {
    const char* key = p.name.c_str();
    if (auto* s = std::get_if<std::string>(&p.value)) {
      list.add(api.ParameterNew(key, TRITONSERVER_PARAMETER_STRING, s->c_str()));
    } else if (auto* i = std::get_if<int64_t>(&p.value)) {
      list.add(api.ParameterNew(key, TRITONSERVER_PARAMETER_INT, i));
    } else if (auto* b = std::get_if<bool>(&p.value)) {
      list.add(api.ParameterNew(key, TRITONSERVER_PARAMETER_BOOL, b));
    } else {
      const auto& bytes = std::get<std::vector<uint8_t>>(p.value);
      list.add(api.ParameterBytesNew(key, bytes.data(), bytes.size()));
    }
  }
  check(api.ServerLoadModelWithParameters(use().get(), name.c_str(),
                                          list.data(), list.size()));
}

void Server::load_model_from_python(const std::string& name,
                                    nanobind::dict parameters) {
  namespace nb = nanobind;
  std::vector<LoadParameter> params;
  for (auto [key, value] : parameters) {
    LoadParameter p;
    p.name = nb::cast<std::string>(key);
    if (nb::isinstance<nb::bool_>(value)) {
      p.value = nb::cast<bool>(value);
    } else if (nb::isinstance<nb::int_>(value)) {
      p.value = nb::cast<int64_t>(value);
    } else if (nb::isinstance<nb::str>(value)) {
      p.value = nb::cast<std::string>(value);
    } else if (nb::isinstance<nb::bytes>(value)) {
      nb::bytes b = nb::borrow<nb::bytes>(value);
      const auto* c = static_cast<const uint8_t*>(b.data());
      p.value = std::vector<uint8_t>(c, c + b.size());
    } else {
      raise(TRITONSERVER_ERROR_INVALID_ARG,
            "load parameter '" + p.name + "' must be str, int, bool or bytes");
    }
    params.push_back(std::move(p));
  }
  GilRelease release;
  load_model(name, params);
}

UnloadInProgress Server::begin_unload(const std::string& name,
                                      bool unload_dependents) {
  use();  // stopped: refused before anything begins
  return begin_model_unload(handle_, inflight_, name, unload_dependents,
                            exit_timeout_s_);
}

UnloadInProgress Server::begin_unload_from_python(const std::string& name,
                                                  bool unload_dependents) {
  std::optional<UnloadInProgress> unloading;
  {
    GilRelease release;
    unloading.emplace(begin_unload(name, unload_dependents));
  }
  drain_deferred();  // the inputs of the requests the drain discarded
  return std::move(*unloading);
}

void Server::unload_model(const std::string& name, bool unload_dependents) {
  UnloadInProgress unloading = begin_unload(name, unload_dependents);
  while (!unloading.wait(3600)) {
  }
  unloading.finish();
}

std::vector<std::string> Server::draining_models() {
  return inflight_->draining_models();
}

void Server::register_model_repository(
    const std::string& path,
    const std::vector<std::pair<std::string, std::string>>& mapping) {
  const TritonApi& api = triton();
  ParameterList list;
  for (const auto& [directory, model] : mapping) {
    list.add(api.ParameterNew(directory.c_str(), TRITONSERVER_PARAMETER_STRING,
                              model.c_str()));
  }
  check(api.ServerRegisterModelRepository(
      use().get(), path.c_str(), list.data(),
      static_cast<uint32_t>(list.size())));
}

void Server::unregister_model_repository(const std::string& path) {
  check(triton().ServerUnregisterModelRepository(use().get(), path.c_str()));
}

void Server::poll_model_repository() {
  check(triton().ServerPollModelRepository(use().get()));
}

std::string Server::metrics(int format) {
  const TritonApi& api = triton();
  TRITONSERVER_Metrics* metrics = nullptr;
  check(api.ServerMetrics(use().get(), &metrics));
  const char* base = nullptr;
  size_t size = 0;
  TRITONSERVER_Error* err = api.MetricsFormatted(
      metrics, static_cast<TRITONSERVER_MetricFormat>(format), &base, &size);
  std::string out = err == nullptr ? std::string(base, size) : std::string();
  api.MetricsDelete(metrics);
  check(err);
  return out;
}

}  // namespace tsb
