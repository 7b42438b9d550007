// The server-wide registry of live requests (InflightRequests), what it
// reads of each request (InflightEntry, the base of request.h's
// RequestState), and the drain of one model's requests before its unload
// (ModelDrain), during which the model reads as being unloaded.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "errors.h"
#include "response_queue.h"

namespace tsb {

// The requests of this package alive now, in every server: created and not
// yet finished (a hint for scheduling: python_backend/instance_worker.h, handed over by module.cc).
uint32_t live_requests() noexcept;

// A request as the registry sees it: its model, whether it was submitted,
// and its links in the registry's list. A failed request is ended through
// its ResponseTarget (deliver()).
class InflightEntry : public ResponseTarget,
                      public std::enable_shared_from_this<InflightEntry> {
 public:
  std::string model_name;  // set before it is listed
  std::atomic<bool> submitted{false};
  // Sent by in-process python model code (BLS): cancelled by a stop past
  // its exit timeout (InflightRequests::cancel_model_code_requests()).
  std::atomic<bool> from_model_code{false};
  // Deletes the core request if it was never submitted. Never throws.
  virtual void discard() noexcept = 0;
  // A submitted request: asks the core to cancel it and ends its
  // consumer's stream (a waiter wakes), as Request::cancel(). Never throws.
  virtual void cancel() noexcept = 0;

 protected:
  InflightEntry() = default;
  ~InflightEntry() = default;

 private:
  friend class InflightRequests;
  // Links of the registry's list (guarded by its mutex).
  InflightEntry* inflight_prev = nullptr;
  InflightEntry* inflight_next = nullptr;
  bool inflight_listed = false;
};

// The live requests of one server: created and not yet finished. Before the
// server stops, requests never submitted are discarded (their core handles
// hold the model, which would stall the stop, and must not outlive the
// server); after it stops, submitted requests the core did not finish end
// with an UNAVAILABLE error, so no waiter hangs.
//
// An intrusive list through the states themselves: registering a request
// allocates nothing (this runs for every request).
class InflightRequests {
 public:
  // False, adding nothing, while the entry's model is being drained.
  bool add(InflightEntry* entry) noexcept;
  void remove(InflightEntry* entry) noexcept;
  void discard_unsubmitted() noexcept;
  // Cancels every submitted request sent by model code
  // (InflightEntry::cancel()).
  void cancel_model_code_requests() noexcept;
  void fail_all(const std::string& message);

  // Before a model is unloaded: refuses its new requests (add() is false),
  // and discards those not submitted; wait_model() then waits for those in
  // flight. The 2.51 core can crash when a model is destroyed by the end of
  // its last request (SIGSEGV in StopBackendThread, on its ModelDeleter
  // thread); drained, the model is destroyed by the unload itself, idle.
  // Call end_drain() afterwards (see ModelDrain). A model may be drained by
  // several unloads at once: it is drained until each has ended its drain.
  void begin_drain(const std::string& model);
  void end_drain(const std::string& model) noexcept;
  // Whether `model` is being drained: it reads as being unloaded.
  bool draining(const std::string& model) noexcept;
  // The models being drained, each named once.
  std::vector<std::string> draining_models();
  // Raises what the core (so NVIDIA's binary) answers for a model being
  // unloaded when `model` is being drained: NOT_FOUND "...has no available
  // versions" for no version (`version` < 0), UNAVAILABLE "...version N is
  // not at ready state" for a version.
  void refuse_if_draining(const std::string& model, int64_t version);
  // Waits at most `timeout_s` for the submitted requests of `model` to
  // finish; false when some were still in flight.
  bool wait_model(const std::string& model, double timeout_s) {
    return wait_submitted(&model, timeout_s);
  }

  // Before the server stops (its handle closed: no request can be built or
  // submitted any more): waits at most `timeout_s` for the submitted
  // requests to finish; false when some were still in flight. The core's
  // own stop counts only queued requests as in flight, not those a backend
  // is executing, and unloads the models under them: the crash that
  // begin_drain() avoids for one model (seen as a SIGSEGV in the stop race test).
  bool wait_submitted(double timeout_s);

  // The submitted requests not finished yet, counted per model, ordered by
  // name: what a stop waits for, as it tells the user (Server.stop() at
  // interpreter exit or after a Ctrl-C).
  std::vector<std::pair<std::string, size_t>> submitted_per_model();

 private:
  // Strong references to the listed entries still alive (one being
  // destroyed is skipped: it removes itself).
  std::vector<std::shared_ptr<InflightEntry>> live_locked();
  // The same, taking the lock; none when out of memory.
  std::vector<std::shared_ptr<InflightEntry>> live_or_none() noexcept;
  void unlink_locked(InflightEntry* entry) noexcept;
  // Waits for the submitted requests of `model` (every model when null) to
  // finish, at most `timeout_s`; false on timeout.
  bool wait_submitted(const std::string* model, double timeout_s);

  std::mutex mutex_;
  std::condition_variable removed_;  // a state left the list
  InflightEntry* head_ = nullptr;
  std::vector<std::string> draining_;  // models being drained
};

// A model drained (InflightRequests::begin_drain()) for the lifetime of
// this object, which may end on another thread than the one that made it.
class ModelDrain {
 public:
  ModelDrain(std::shared_ptr<InflightRequests> inflight, std::string model)
      : inflight_(std::move(inflight)), model_(std::move(model)) {
    inflight_->begin_drain(model_);
  }
  ~ModelDrain() { inflight_->end_drain(model_); }
  ModelDrain(const ModelDrain&) = delete;
  ModelDrain& operator=(const ModelDrain&) = delete;
  // Waits at most `timeout_s` for the model's requests in flight; false
  // when some were still in flight.
  bool wait(double timeout_s) { return inflight_->wait_model(model_, timeout_s); }
  const std::string& model() const noexcept { return model_; }

 private:
  std::shared_ptr<InflightRequests> inflight_;
  std::string model_;
};

}  // namespace tsb
