"""One workload through tritonclient (gRPC or HTTP) against the `tritonserver`
binary of the same core, the out-of-process alternative; prints one JSON
line in the same shape as c_api_floor.

    python bench_client.py --protocol grpc|http --url HOST:PORT --model NAME
        [--elements N] [--inflight N] [--requests N]

--inflight N > 1 runs N threads, each with its own client, one request at a
time each.
"""

from __future__ import annotations

import argparse
import json
import threading
import time

import numpy


def make_client(protocol: str, url: str):
    if protocol == "grpc":
        import tritonclient.grpc as client
    else:
        import tritonclient.http as client
    return client, client.InferenceServerClient(url)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--protocol", choices=["grpc", "http"], required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--elements", type=int, default=16)
    parser.add_argument("--inflight", type=int, default=1)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()

    data = numpy.ones(args.elements, dtype=numpy.float32)
    names = ["INPUT0", "INPUT1"] if args.model == "add_sub" else ["INPUT0"]
    latencies: list[float] = []
    lock = threading.Lock()

    def worker(count: int, record: bool) -> None:
        module, client = make_client(args.protocol, args.url)
        inputs = []
        for name in names:
            tensor = module.InferInput(name, list(data.shape), "FP32")
            tensor.set_data_from_numpy(data)
            inputs.append(tensor)
        for _ in range(count):
            start = time.perf_counter()
            result = client.infer(args.model, inputs)
            result.as_numpy("OUTPUT0")
            if record:
                with lock:
                    latencies.append(time.perf_counter() - start)

    def run(count: int, record: bool) -> float:
        per_thread = max(1, count // args.inflight)
        threads = [threading.Thread(target=worker, args=(per_thread, record)) for _ in range(args.inflight)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return time.perf_counter() - start

    run(max(20, args.requests // 10), False)
    seconds = run(args.requests, True)
    latencies.sort()
    pick = lambda p: latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1e6  # noqa: E731
    done = len(latencies)
    print(json.dumps({
        "requests_per_s": done / seconds,
        "responses_per_s": done / seconds,
        "p50_us": pick(0.5),
        "p99_us": pick(0.99),
        "seconds": seconds,
        "requests": done,
    }))


if __name__ == "__main__":
    main()
