// The physical floor: the same Triton core driven directly from C++, on the
// same models, with a malloc response allocator (large blocks reused). Our binding's
// benchmarks are reported as ratios against this program's numbers.
//
//   c_api_floor --library libtritonserver.so [--companion lib.so ...]
//               --repository DIR --backends DIR --model NAME
//               [--input NAME ...] [--elements N]
//               [--inflight N] [--requests N] [--stream-count N]
//               [--client-work-us X] [--wait block|spin] [--rounds N]
//
// --inflight 1 is "one request at a time" (latency); N keeps N outstanding
// (throughput). --stream-count sends COUNT=N to a decoupled model and counts
// responses. --client-work-us X busy-waits X us on the submitting thread
// before each request, standing for a client's own per-request work (the
// asyncio reference column uses it). --wait says how the submitting thread
// waits for completions: `block` sleeps on a condition variable (each
// completion then wakes it: a futex wake, and on an idle core an
// inter-processor interrupt), `spin` polls an atomic counter (no wake-up
// on the way back; the thread keeps its core busy). --rounds N repeats the
// measured run N times in the same process (one JSON line each).
//
// Each JSON line: requests/s, responses/s, p50/p99 (us) from submission to
// the final response's callback, p50/p99 "seen" from the start of building
// the request to the submitting thread seeing it complete (what a client
// observes; --inflight 1 only), and the submitting thread's cost per
// request (time inside submit(), and its CPU time).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "../cpp/errors.h"
#include "../cpp/triton_library.h"

using namespace tsb;
using Clock = std::chrono::steady_clock;

namespace {

// TRITONSERVER_MODEL_CONTROL_EXPLICIT: cpp/triton_api.h declares only the
// enumerators the package itself passes to the core.
constexpr auto kModelControlExplicit =
    static_cast<TRITONSERVER_ModelControlMode>(2);

struct Args {
  std::string library, repository, backends, model;
  std::vector<std::string> inputs;  // default: INPUT0
  std::vector<std::string> companions;
  size_t elements = 16;
  int inflight = 1;
  int requests = 2000;
  int stream_count = 0;
  double client_work_us = 0;  // busy time spent before each submit
  bool spin = false;          // --wait spin
  int rounds = 1;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--library") a.library = v;
    else if (k == "--companion") a.companions.push_back(v);
    else if (k == "--repository") a.repository = v;
    else if (k == "--backends") a.backends = v;
    else if (k == "--model") a.model = v;
    else if (k == "--input") a.inputs.push_back(v);
    else if (k == "--elements") a.elements = std::stoull(v);
    else if (k == "--inflight") a.inflight = std::stoi(v);
    else if (k == "--requests") a.requests = std::stoi(v);
    else if (k == "--stream-count") a.stream_count = std::stoi(v);
    else if (k == "--client-work-us") a.client_work_us = std::stod(v);
    else if (k == "--wait" && (v == "spin" || v == "block")) a.spin = v == "spin";
    else if (k == "--rounds") a.rounds = std::max(1, std::stoi(v));
    else {
      std::fprintf(stderr, "unknown argument %s\n", k.c_str());
      std::exit(2);
    }
  }
  if (a.inputs.empty()) a.inputs.push_back("INPUT0");
  return a;
}

// Freed blocks of 1 MiB and more are kept for reuse (as the binding's
// allocator does, cpp/host_pool.cc): a fresh large malloc faults its pages
// in again on every response, which would make the floor a poor reference
// for large tensors.
constexpr size_t kReuseFrom = 1 << 20;
std::mutex free_mutex;
std::vector<std::pair<size_t, void*>> free_blocks;

void* take_block(size_t size) {
  if (size >= kReuseFrom) {
    std::lock_guard<std::mutex> lock(free_mutex);
    for (size_t i = 0; i < free_blocks.size(); ++i) {
      if (free_blocks[i].first == size) {
        void* p = free_blocks[i].second;
        free_blocks[i] = free_blocks.back();
        free_blocks.pop_back();
        return p;
      }
    }
  }
  return std::malloc(size);
}

void give_block(void* p, size_t size) {
  if (p != nullptr && size >= kReuseFrom) {
    std::lock_guard<std::mutex> lock(free_mutex);
    if (free_blocks.size() < 16) {
      free_blocks.emplace_back(size, p);
      return;
    }
  }
  std::free(p);
}

TRITONSERVER_Error* alloc_fn(TRITONSERVER_ResponseAllocator*, const char*,
                             size_t size, TRITONSERVER_MemoryType, int64_t,
                             void*, void** buffer, void** buffer_userp,
                             TRITONSERVER_MemoryType* type,
                             int64_t* type_id) {
  *buffer = size ? take_block(size) : nullptr;
  *buffer_userp = nullptr;
  *type = TRITONSERVER_MEMORY_CPU;
  *type_id = 0;
  return nullptr;
}

TRITONSERVER_Error* release_fn(TRITONSERVER_ResponseAllocator*, void* buffer,
                               void*, size_t size, TRITONSERVER_MemoryType,
                               int64_t) {
  give_block(buffer, size);
  return nullptr;
}

// Completion bookkeeping shared by all requests.
struct Tracker {
  std::mutex mutex;
  std::condition_variable done;
  bool spin = false;  // the submitting thread polls `completed`: no notify
  std::atomic<int> completed{0};
  long responses = 0;
  std::vector<double> latencies_us;
};

struct InFlight {
  Tracker* tracker;
  Clock::time_point start;
};

void release_request(TRITONSERVER_InferenceRequest* request, const uint32_t,
                     void*) {
  triton().InferenceRequestDelete(request);
}

void on_response(TRITONSERVER_InferenceResponse* response,
                 const uint32_t flags, void* userp) {
  auto* f = static_cast<InFlight*>(userp);
  Tracker* tracker = f->tracker;
  if (response != nullptr) {
    if (TRITONSERVER_Error* err = triton().InferenceResponseError(response)) {
      std::fprintf(stderr, "response error: %s\n", triton().ErrorMessage(err));
      std::exit(1);
    }
    triton().InferenceResponseDelete(response);
  }
  std::lock_guard<std::mutex> lock(tracker->mutex);
  if (response != nullptr) tracker->responses++;
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) {
    tracker->latencies_us.push_back(
        std::chrono::duration<double, std::micro>(Clock::now() - f->start)
            .count());
    delete f;
    tracker->completed.fetch_add(1, std::memory_order_release);
    if (!tracker->spin) tracker->done.notify_all();
  }
}

// CPU time of the calling thread: what submitting costs the thread that
// submits, whatever else runs on the machine.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Stands for a client's own per-request work (building its objects, its
// event loop) on the submitting thread: a busy wait, not a sleep.
void client_work(double us) {
  if (us <= 0) return;
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double, std::micro>(us));
  while (Clock::now() < end) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  load_triton(a.library, a.companions);
  const TritonApi& api = triton();

  TRITONSERVER_ServerOptions* options = nullptr;
  check(api.ServerOptionsNew(&options));
  check(api.ServerOptionsSetModelRepositoryPath(options, a.repository.c_str()));
  check(api.ServerOptionsSetBackendDirectory(options, a.backends.c_str()));
  check(api.ServerOptionsSetModelControlMode(
      options, kModelControlExplicit));
  check(api.ServerOptionsSetLogInfo(options, false));
  check(api.ServerOptionsSetLogWarn(options, false));
  check(api.ServerOptionsSetLogError(options, true));
  TRITONSERVER_Server* server = nullptr;
  check(api.ServerNew(&server, options));
  api.ServerOptionsDelete(options);
  check(api.ServerLoadModelWithParameters(server, a.model.c_str(), nullptr, 0));

  TRITONSERVER_ResponseAllocator* allocator = nullptr;
  check(api.ResponseAllocatorNew(&allocator, alloc_fn, release_fn, nullptr));

  const bool stream = a.stream_count > 0;
  // Streams send COUNT (INT32); every other workload sends FP32 data.
  TRITONSERVER_DataType dtype =
      stream ? TRITONSERVER_TYPE_INT32 : TRITONSERVER_TYPE_FP32;
  std::vector<int32_t> count_input{a.stream_count};
  std::vector<float> data(stream ? 0 : a.elements, 1.0f);
  const void* base = stream ? static_cast<const void*>(count_input.data())
                            : static_cast<const void*>(data.data());
  size_t bytes = stream ? sizeof(int32_t) : data.size() * sizeof(float);
  int64_t shape = stream ? 1 : static_cast<int64_t>(a.elements);

  Tracker tracker;
  tracker.spin = a.spin;
  auto submit = [&] {
    TRITONSERVER_InferenceRequest* request = nullptr;
    check(api.InferenceRequestNew(&request, server, a.model.c_str(), -1));
    for (const std::string& input : a.inputs) {
      check(api.InferenceRequestAddInput(request, input.c_str(), dtype, &shape,
                                         1));
      check(api.InferenceRequestAppendInputData(request, input.c_str(), base,
                                                bytes, TRITONSERVER_MEMORY_CPU,
                                                0));
    }
    check(api.InferenceRequestSetReleaseCallback(request, release_request,
                                                 nullptr));
    auto* f = new InFlight{&tracker, Clock::now()};
    check(api.InferenceRequestSetResponseCallback(request, allocator, nullptr,
                                                  on_response, f));
    check(api.ServerInferAsync(server, request, nullptr));
  };

  // Warm-up, then the measured run.
  auto percentile = [](std::vector<double>& l, double p) {
    if (l.empty()) return 0.0;
    std::sort(l.begin(), l.end());
    return l[std::min(l.size() - 1, static_cast<size_t>(p * l.size()))];
  };
  for (int phase = 0; phase <= a.rounds; ++phase) {
    int total = phase == 0 ? std::max(20, a.requests / 10) : a.requests;
    std::vector<double> seen_us;  // --inflight 1: as the client sees it
    seen_us.reserve(a.inflight == 1 ? total : 0);
    {
      std::lock_guard<std::mutex> lock(tracker.mutex);
      tracker.completed = 0;
      tracker.responses = 0;
      tracker.latencies_us.clear();
    }
    auto t0 = Clock::now();
    const double cpu0 = thread_cpu_seconds();
    double submit_seconds = 0;  // inside submit(), i.e. the core's own calls
    int submitted = 0;
    std::unique_lock<std::mutex> lock(tracker.mutex);
    Clock::time_point last_start;
    while (tracker.completed < total) {
      while (submitted < total && submitted - tracker.completed < a.inflight) {
        lock.unlock();
        auto s0 = Clock::now();
        // --inflight 1: the previous request was seen complete by now.
        if (a.inflight == 1 && submitted > 0) {
          seen_us.push_back(std::chrono::duration<double, std::micro>(s0 - last_start).count());
        }
        client_work(a.client_work_us);
        s0 = Clock::now();
        last_start = s0;
        submit();
        submit_seconds += std::chrono::duration<double>(Clock::now() - s0).count();
        ++submitted;
        lock.lock();
      }
      auto ready = [&] {
        const int c = tracker.completed.load(std::memory_order_acquire);
        return c == total || (submitted < total && submitted - c < a.inflight);
      };
      if (a.spin) {
        lock.unlock();
        while (!ready()) {
#if defined(__x86_64__) || defined(__i386__)
          __builtin_ia32_pause();
#endif
        }
        lock.lock();
      } else {
        tracker.done.wait(lock, ready);
      }
    }
    if (a.inflight == 1) {
      seen_us.push_back(
          std::chrono::duration<double, std::micro>(Clock::now() - last_start).count());
    }
    double seconds =
        std::chrono::duration<double>(Clock::now() - t0).count();
    const double cpu = thread_cpu_seconds() - cpu0;
    if (phase >= 1) {
      std::vector<double> l = tracker.latencies_us;
      lock.unlock();
      std::printf(
          "{\"requests_per_s\": %.1f, \"responses_per_s\": %.1f, "
          "\"p50_us\": %.1f, \"p99_us\": %.1f, \"seen_p50_us\": %.1f, "
          "\"seen_p99_us\": %.1f, \"seconds\": %.4f, "
          "\"requests\": %d, \"submit_us\": %.3f, \"submit_thread_cpu_us\": %.3f, "
          "\"wait\": \"%s\"}\n",
          total / seconds, tracker.responses / seconds, percentile(l, 0.5),
          percentile(l, 0.99), percentile(seen_us, 0.5), percentile(seen_us, 0.99),
          seconds, total, submit_seconds / total * 1e6, cpu / total * 1e6,
          a.spin ? "spin" : "block");
      std::fflush(stdout);
    }
  }
  check(api.ServerStop(server));
  api.ServerDelete(server);
  return 0;
}
