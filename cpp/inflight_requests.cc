#include "inflight_requests.h"

#include <algorithm>
#include <chrono>
#include <map>

namespace tsb {

namespace {
std::atomic<uint32_t> g_live{0};
}  // namespace

uint32_t live_requests() noexcept {
  return g_live.load(std::memory_order_relaxed);
}

bool InflightRequests::add(InflightEntry* state) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::string& model : draining_) {
    if (model == state->model_name) return false;
  }
  if (state->inflight_listed) return true;
  state->inflight_prev = nullptr;
  state->inflight_next = head_;
  if (head_ != nullptr) head_->inflight_prev = state;
  head_ = state;
  state->inflight_listed = true;
  g_live.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void InflightRequests::unlink_locked(InflightEntry* state) noexcept {
  if (!state->inflight_listed) return;
  if (state->inflight_prev != nullptr) {
    state->inflight_prev->inflight_next = state->inflight_next;
  } else {
    head_ = state->inflight_next;
  }
  if (state->inflight_next != nullptr) {
    state->inflight_next->inflight_prev = state->inflight_prev;
  }
  state->inflight_prev = state->inflight_next = nullptr;
  state->inflight_listed = false;
  g_live.fetch_sub(1, std::memory_order_relaxed);
  removed_.notify_all();
}

void InflightRequests::remove(InflightEntry* state) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  unlink_locked(state);
}

std::vector<std::shared_ptr<InflightEntry>> InflightRequests::live_locked() {
  std::vector<std::shared_ptr<InflightEntry>> live;
  for (InflightEntry* s = head_; s != nullptr; s = s->inflight_next) {
    if (auto state = s->weak_from_this().lock()) live.push_back(std::move(state));
  }
  return live;
}

std::vector<std::shared_ptr<InflightEntry>>
InflightRequests::live_or_none() noexcept {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    return live_locked();
  } catch (...) {
    return {};  // out of memory: the server's stop reports what is left
  }
}

void InflightRequests::discard_unsubmitted() noexcept {
  for (const auto& state : live_or_none()) state->discard();
}

void InflightRequests::cancel_model_code_requests() noexcept {
  for (const auto& state : live_or_none()) {
    if (state->submitted && state->from_model_code) state->cancel();
  }
}

void InflightRequests::begin_drain(const std::string& model) {
  std::vector<std::shared_ptr<InflightEntry>> unsubmitted;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    draining_.push_back(model);
    for (InflightEntry* s = head_; s != nullptr; s = s->inflight_next) {
      if (s->model_name != model || s->submitted) continue;
      if (auto state = s->weak_from_this().lock()) {
        unsubmitted.push_back(std::move(state));
      }
    }
  }
  // A submit() in progress finishes first (discard waits for it); the
  // request is then in flight, and waited for below.
  for (const auto& state : unsubmitted) state->discard();
  unsubmitted.clear();  // outside the lock: a last reference unlinks
}

bool InflightRequests::draining(const std::string& model) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::string& name : draining_) {
    if (name == model) return true;
  }
  return false;
}

std::vector<std::string> InflightRequests::draining_models() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> models;
  for (const std::string& name : draining_) {
    if (std::find(models.begin(), models.end(), name) == models.end()) {
      models.push_back(name);
    }
  }
  return models;
}

void InflightRequests::refuse_if_draining(const std::string& model,
                                          int64_t version) {
  if (!draining(model)) return;
  if (version < 0) {
    raise(TRITONSERVER_ERROR_NOT_FOUND, "Request for unknown model: '" + model +
                                            "' has no available versions");
  }
  raise(TRITONSERVER_ERROR_UNAVAILABLE,
        "Request for unknown model: '" + model + "' version " +
            std::to_string(version) + " is not at ready state");
}

bool InflightRequests::wait_submitted(double timeout_s) {
  return wait_submitted(nullptr, timeout_s);
}

bool InflightRequests::wait_submitted(const std::string* model,
                                      double timeout_s) {
  std::unique_lock<std::mutex> lock(mutex_);
  return removed_.wait_for(
      lock, std::chrono::duration<double>(timeout_s), [&] {
        for (InflightEntry* s = head_; s != nullptr; s = s->inflight_next) {
          if (s->submitted && (model == nullptr || s->model_name == *model)) {
            return false;
          }
        }
        return true;
      });
}

std::vector<std::pair<std::string, size_t>>
InflightRequests::submitted_per_model() {
  std::map<std::string, size_t> counts;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (InflightEntry* s = head_; s != nullptr; s = s->inflight_next) {
      if (s->submitted) ++counts[s->model_name];
    }
  }
  return {counts.begin(), counts.end()};
}

void InflightRequests::end_drain(const std::string& model) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = draining_.begin(); it != draining_.end(); ++it) {
    if (*it == model) {
      draining_.erase(it);
      return;
    }
  }
}

void InflightRequests::fail_all(const std::string& message) {
  // Declared outside the lock: dropping the last reference to a state
  // removes it from this list, which takes the lock.
  std::vector<std::shared_ptr<InflightEntry>> live;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    live = live_locked();
    while (head_ != nullptr) unlink_locked(head_);
  }
  for (const auto& state : live) {
    if (!state->submitted) continue;
    auto data = std::make_shared<ResponseData>();
    data->final = true;
    data->has_error = true;
    data->error_code = TRITONSERVER_ERROR_UNAVAILABLE;
    data->error_message = message;
    state->deliver(std::move(data));
  }
}

}  // namespace tsb
