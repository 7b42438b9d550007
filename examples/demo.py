"""Demo: embed Triton in this process, list what it serves, and run real
inference three ways (blocking, asyncio, streaming) on the bundled example
models in examples/models.

Run it with `make demo` (sets up .venv, the Triton core and the build).
"""

from __future__ import annotations

import asyncio
import pathlib

import numpy

import tritonserver

MODELS = pathlib.Path(__file__).resolve().parent / "models"


def main() -> None:
    options = tritonserver.Options(model_repository=str(MODELS), server_id="demo")
    with tritonserver.Server(options) as server:
        print(f"Triton {server.metadata()['version']} embedded, core: {tritonserver.load_core()}")
        for (name, version), model in server.models(exclude_not_ready=True).items():
            print(f"  ready: {name} (version {version})")

        # Blocking inference: BYTES in, INT64 and BYTES out.
        text_stats = server.model("text_stats")
        texts = ["hello", "Grüße", ""]
        response = next(iter(text_stats.infer(inputs={"TEXT": texts})))
        lengths = numpy.from_dlpack(response.outputs["LENGTH"])  # zero-copy view
        upper = response.outputs["UPPER"].to_string_array()
        for text, length, up in zip(texts, lengths, upper):
            print(f"  text_stats({text!r}) -> length {length}, upper {up!r}")

        # asyncio: 16 requests in flight at once, each answered on this loop.
        async def many() -> list[int]:
            iterators = [text_stats.async_infer(inputs={"TEXT": ["x" * n]}) for n in range(16)]

            async def first_length(iterator: tritonserver.AsyncResponseIterator) -> int:
                async for r in iterator:
                    return int(numpy.from_dlpack(r.outputs["LENGTH"])[0])
                raise RuntimeError("no response")

            return await asyncio.gather(*(first_length(it) for it in iterators))

        print(f"  asyncio, 16 concurrent requests -> lengths {asyncio.run(many())}")

        # Streaming: a decoupled model sends one response per step.
        countdown = server.model("countdown")
        values = [
            int(numpy.from_dlpack(r.outputs["VALUE"])[0])
            for r in countdown.infer(inputs={"START": numpy.array([5], dtype=numpy.int32)})
            if r.outputs
        ]
        print(f"  countdown stream -> {values}")
    print("server stopped")


if __name__ == "__main__":
    main()
