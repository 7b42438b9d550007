#include "server.h"

#include <chrono>
#include <mutex>
#include <thread>

#include "errors.h"
#include "request.h"
#include "triton_library.h"

namespace tsb {
namespace {

// Owns a list of TRITONSERVER_Parameter handles.
class ParameterList {
 public:
  ~ParameterList() {
    for (TRITONSERVER_Parameter* p : params_) triton().ParameterDelete(p);
  }
  void add(TRITONSERVER_Parameter* p) {
    if (p == nullptr) {
      raise(TRITONSERVER_ERROR_INTERNAL, "failed to create a parameter");
    }
    params_.push_back(p);
  }
  const TRITONSERVER_Parameter** data() {
    return const_cast<const TRITONSERVER_Parameter**>(params_.data());
  }
  size_t size() const { return params_.size(); }

 private:
  std::vector<TRITONSERVER_Parameter*> params_;
};

// Serializes a core message to a string and deletes it.
std::string take_json(TRITONSERVER_Message* message) {
  const TritonApi& api = triton();
  const char* base = nullptr;
  size_t size = 0;
  TRITONSERVER_Error* err = api.MessageSerializeToJson(message, &base, &size);
  std::string out = err == nullptr ? std::string(base, size) : std::string();
  api.MessageDelete(message);
  check(err);
  return out;
}

std::mutex g_stopped_mutex;
std::vector<std::pair<TRITONSERVER_Server*, std::shared_ptr<InflightRequests>>>
    g_stopped;

}  // namespace

void Server::reap_stopped(double timeout_s) {
  std::vector<std::pair<TRITONSERVER_Server*, std::shared_ptr<InflightRequests>>>
      stopped;
  {
    std::lock_guard<std::mutex> lock(g_stopped_mutex);
    stopped.swap(g_stopped);
  }
  const TritonApi& api = triton();
  for (auto& [server, inflight] : stopped) {
    inflight->wait_idle(timeout_s);
    // Stop again now that nothing runs (models unload, backend threads
    // join), then delete. The core delivers a final response before its
    // backend thread has left the model's execute: let that settle first.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    if (TRITONSERVER_Error* e = api.ServerStop(server)) api.ErrorDelete(e);
    if (TRITONSERVER_Error* e = api.ServerDelete(server)) api.ErrorDelete(e);
  }
}

ServerOptions::ServerOptions() { check(triton().ServerOptionsNew(&options_)); }

ServerOptions::~ServerOptions() {
  if (options_ != nullptr) {
    if (TRITONSERVER_Error* e = triton().ServerOptionsDelete(options_)) {
      triton().ErrorDelete(e);
    }
  }
}

Server::Server(ServerOptions& options)
    : inflight_(std::make_shared<InflightRequests>()) {
  check(triton().ServerNew(&server_, options.get()));
}

Server::~Server() {
  if (server_ != nullptr) {
    if (TRITONSERVER_Error* e = triton().ServerDelete(server_)) {
      triton().ErrorDelete(e);
    }
  }
}

TRITONSERVER_Server* Server::handle() const {
  if (server_ == nullptr) {
    raise(TRITONSERVER_ERROR_UNAVAILABLE, "the server is stopped");
  }
  return server_;
}

void Server::stop() {
  TRITONSERVER_Server* s = handle();
  server_ = nullptr;
  const TritonApi& api = triton();
  inflight_->discard_unsubmitted();
  TRITONSERVER_Error* stop_err = api.ServerStop(s);
  if (stop_err != nullptr) {
    // The exit timeout expired with requests still executing: deleting the
    // server now would pull it from under the backend threads still running
    // them (a crash, seen with Triton 2.51). It is kept until they are done
    // (reap_stopped); they complete normally and reach their waiters.
    {
      std::lock_guard<std::mutex> lock(g_stopped_mutex);
      g_stopped.emplace_back(s, inflight_);
    }
    check(stop_err);
  }
  if (TRITONSERVER_Error* e = api.ServerDelete(s)) api.ErrorDelete(e);
  // Anything the core dropped without a final response must not hang a
  // waiter.
  inflight_->fail_all("the server stopped before this request completed");
}

bool Server::is_live() {
  bool live = false;
  check(triton().ServerIsLive(handle(), &live));
  return live;
}

bool Server::is_ready() {
  bool ready = false;
  check(triton().ServerIsReady(handle(), &ready));
  return ready;
}

std::string Server::metadata() {
  TRITONSERVER_Message* m = nullptr;
  check(triton().ServerMetadata(handle(), &m));
  return take_json(m);
}

std::string Server::model_index(uint32_t flags) {
  TRITONSERVER_Message* m = nullptr;
  check(triton().ServerModelIndex(handle(), flags, &m));
  return take_json(m);
}

bool Server::model_is_ready(const std::string& name, int64_t version) {
  bool ready = false;
  check(triton().ServerModelIsReady(handle(), name.c_str(), version, &ready));
  return ready;
}

uint32_t Server::model_batch_properties(const std::string& name,
                                        int64_t version) {
  uint32_t flags = 0;
  void* voidp = nullptr;
  check(triton().ServerModelBatchProperties(handle(), name.c_str(), version,
                                            &flags, &voidp));
  return flags;
}

uint32_t Server::model_transaction_properties(const std::string& name,
                                              int64_t version) {
  uint32_t flags = 0;
  void* voidp = nullptr;
  check(triton().ServerModelTransactionProperties(handle(), name.c_str(),
                                                  version, &flags, &voidp));
  return flags;
}

std::string Server::model_metadata(const std::string& name, int64_t version) {
  TRITONSERVER_Message* m = nullptr;
  check(triton().ServerModelMetadata(handle(), name.c_str(), version, &m));
  return take_json(m);
}

std::string Server::model_statistics(const std::string& name,
                                     int64_t version) {
  TRITONSERVER_Message* m = nullptr;
  check(triton().ServerModelStatistics(handle(), name.c_str(), version, &m));
  return take_json(m);
}

std::string Server::model_config(const std::string& name, int64_t version,
                                 uint32_t config_version) {
  TRITONSERVER_Message* m = nullptr;
  check(triton().ServerModelConfig(handle(), name.c_str(), version,
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
  check(api.ServerLoadModelWithParameters(handle(), name.c_str(), list.data(),
                                          list.size()));
}

void Server::unload_model(const std::string& name, bool unload_dependents) {
  if (unload_dependents) {
    check(triton().ServerUnloadModelAndDependents(handle(), name.c_str()));
  } else {
    check(triton().ServerUnloadModel(handle(), name.c_str()));
  }
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
      handle(), path.c_str(), list.data(), static_cast<uint32_t>(list.size())));
}

void Server::unregister_model_repository(const std::string& path) {
  check(triton().ServerUnregisterModelRepository(handle(), path.c_str()));
}

void Server::poll_model_repository() {
  check(triton().ServerPollModelRepository(handle()));
}

std::string Server::metrics(int format) {
  const TritonApi& api = triton();
  TRITONSERVER_Metrics* metrics = nullptr;
  check(api.ServerMetrics(handle(), &metrics));
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
