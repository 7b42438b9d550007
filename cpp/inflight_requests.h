// The server-wide registry of live requests (InflightRequests), what it
// reads of each request (InflightEntry, the base of request.h's
// RequestState), and the drain of one model's requests before its unload
// (ModelDrain).
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

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
  // discards those not submitted, and waits at most `timeout_s` for those
  // in flight to finish; false when some were still in flight. The 2.51
  // core can crash when a model is destroyed by the end of its last
  // request (SIGSEGV in StopBackendThread, on its ModelDeleter thread);
  // drained, the model is destroyed by the unload itself, idle. Call
  // end_drain() afterwards (see ModelDrain).
  bool drain(const std::string& model, double timeout_s);
  void end_drain(const std::string& model) noexcept;

  // Before the server stops (its handle closed: no request can be built or
  // submitted any more): waits at most `timeout_s` for the submitted
  // requests to finish; false when some were still in flight. The core's
  // own stop counts only queued requests as in flight, not those a backend
  // is executing, and unloads the models under them: the crash that
  // drain() avoids for one model (seen as a SIGSEGV in the stop race test).
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

// InflightRequests::drain() for the lifetime of this object.
class ModelDrain {
 public:
  ModelDrain(InflightRequests& inflight, std::string model, double timeout_s)
      : inflight_(inflight), model_(std::move(model)),
        drained_(inflight.drain(model_, timeout_s)) {}
  ~ModelDrain() { inflight_.end_drain(model_); }
  ModelDrain(const ModelDrain&) = delete;
  ModelDrain& operator=(const ModelDrain&) = delete;
  bool drained() const noexcept { return drained_; }

 private:
  InflightRequests& inflight_;
  std::string model_;
  bool drained_;
};

}  // namespace tsb
