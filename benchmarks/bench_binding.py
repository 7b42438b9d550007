"""One workload through this binding, in a fresh process; prints one JSON
line in the same shape as c_api_floor.

    python bench_binding.py --repository DIR --backends DIR --model NAME
        [--elements N] [--inflight N] [--requests N] [--stream-count N] [--threads N]
        [--python-models auto|in-process|stub] [--bind] [--asyncio]

--inflight 1 runs one blocking request at a time (with --asyncio: one
async_infer at a time); N > 1 keeps N requests in flight with asyncio; --stream-count N sends COUNT=N to a decoupled model.
--threads N (with --inflight 1) runs N Python threads, each sending one
blocking request at a time, sharing the request count. --python-models
chooses how python-backend models run; --bind serves an add_sub function
with `Server.bind` instead of the repository's python model (--model add_sub).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import threading
import time

import numpy

import tritonserver


def inputs_for(args: argparse.Namespace) -> dict[str, numpy.ndarray]:
    if args.stream_count:
        return {"COUNT": numpy.array([args.stream_count], dtype=numpy.int32)}
    data = numpy.ones(args.elements, dtype=numpy.float32)
    names = ["INPUT0", "INPUT1"] if args.model == "add_sub" else ["INPUT0"]
    return {name: data for name in names}


def bind_add_sub(server: tritonserver.Server) -> tritonserver.Model:
    """The repository's add_sub (tests/models/add_sub/1/model.py) as a bound
    function: the same tensors, the same work."""
    def add_sub(INPUT0: numpy.ndarray, INPUT1: numpy.ndarray) -> dict[str, numpy.ndarray]:
        return {"OUTPUT0": INPUT0 + INPUT1, "OUTPUT1": INPUT0 - INPUT1}

    spec = tritonserver.TensorSpec
    return server.bind("add_sub_bound", add_sub,
                       inputs=[spec("INPUT0", numpy.float32, (-1,)), spec("INPUT1", numpy.float32, (-1,))],
                       outputs=[spec("OUTPUT0", numpy.float32, (-1,)), spec("OUTPUT1", numpy.float32, (-1,))])


def run_sync(model: tritonserver.Model, inputs: dict, count: int) -> tuple[list[float], int]:
    latencies, responses = [], 0
    for _ in range(count):
        start = time.perf_counter()
        for response in model.infer(inputs=inputs):
            responses += 1 if response.outputs else 0
            del response  # like the floor: outputs are released once seen
        latencies.append(time.perf_counter() - start)
    return latencies, responses


def run_threads(model: tritonserver.Model, inputs: dict, count: int, threads: int) -> tuple[list[float], int]:
    """`threads` threads send blocking requests, `count` in all."""
    results: list[tuple[list[float], int]] = []
    share = [count // threads + (1 if t < count % threads else 0) for t in range(threads)]

    def work(n: int) -> None:
        results.append(run_sync(model, inputs, n))

    pool = [threading.Thread(target=work, args=(n,)) for n in share]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return [x for latencies, _ in results for x in latencies], sum(r for _, r in results)


async def run_async(model: tritonserver.Model, inputs: dict, count: int,
                    inflight: int) -> tuple[list[float], int, list[int]]:
    """`inflight` coroutines take requests from one shared count; also
    returns how many each completed (equal shares when asyncio is fair)."""
    latencies: list[float] = []
    responses = 0
    remaining = count
    completed = [0] * inflight

    async def worker(index: int) -> None:
        nonlocal remaining, responses
        while remaining > 0:
            remaining -= 1
            start = time.perf_counter()
            async for response in model.async_infer(inputs=inputs):
                responses += 1 if response.outputs else 0
                del response  # like the floor: outputs are released once seen
            latencies.append(time.perf_counter() - start)
            completed[index] += 1

    await asyncio.gather(*(worker(i) for i in range(inflight)))
    return latencies, responses, completed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repository", required=True)
    parser.add_argument("--backends", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--elements", type=int, default=16)
    parser.add_argument("--inflight", type=int, default=1)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--stream-count", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--python-models", default="auto", choices=("auto", "in-process", "stub"))
    parser.add_argument("--bind", action="store_true", help="serve add_sub as a bound Python function")
    parser.add_argument("--asyncio", action="store_true", help="async_infer even with --inflight 1")
    args = parser.parse_args()
    if args.bind and args.model != "add_sub":
        parser.error("--bind serves add_sub only")

    server = tritonserver.Server(
        model_repository=args.repository,
        backend_directory=args.backends,
        model_control_mode=tritonserver.ModelControlMode.EXPLICIT,
        log_error=True,
        python_models=args.python_models,
    ).start(wait_until_ready=True)
    model = bind_add_sub(server) if args.bind else server.load(args.model)
    inputs = inputs_for(args)

    def run(count: int) -> tuple[list[float], int, float, float, float, list[int]]:
        start, cpu, process = time.perf_counter(), time.thread_time(), resource.getrusage(resource.RUSAGE_SELF)
        completed: list[int] = []
        if args.asyncio:
            latencies, responses, completed = asyncio.run(run_async(model, inputs, count, args.inflight))
        elif args.inflight == 1 and args.threads > 1:
            latencies, responses = run_threads(model, inputs, count, args.threads)
        elif args.inflight == 1:
            latencies, responses = run_sync(model, inputs, count)
        else:
            latencies, responses, completed = asyncio.run(run_async(model, inputs, count, args.inflight))
        end = resource.getrusage(resource.RUSAGE_SELF)
        process_cpu = end.ru_utime + end.ru_stime - process.ru_utime - process.ru_stime
        return latencies, responses, time.perf_counter() - start, time.thread_time() - cpu, process_cpu, completed

    run(max(20, args.requests // 10))  # warm-up
    latencies, responses, seconds, cpu, process_cpu, completed = run(args.requests)
    latencies.sort()
    pick = lambda p: latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1e6  # noqa: E731
    print(json.dumps({
        "requests_per_s": args.requests / seconds,
        "responses_per_s": responses / seconds,
        "p50_us": pick(0.5),
        "p99_us": pick(0.99),
        "seconds": seconds,
        "requests": args.requests,
        # CPU time of the thread that submits and waits (the event loop's).
        "thread_cpu_us": cpu / args.requests * 1e6 if args.threads == 1 else None,
        # CPU time (user + sys) of the whole process, all its threads (getrusage).
        "process_cpu_us": process_cpu / args.requests * 1e6,
        # Completions per coroutine (asyncio): fair shares are all equal.
        "completed_min": min(completed, default=None),
        "completed_max": max(completed, default=None),
    }))
    server.stop()


if __name__ == "__main__":
    main()
