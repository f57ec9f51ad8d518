"""A slowloris client, run as its own process: `python -m tests.integration.api.slowloris
PORT COUNT SECONDS`.

Opens COUNT connections to 127.0.0.1:PORT, each sending a request head one byte at a time
(a byte every 0.5 s, never the blank line that ends it), prints `opened` once all are
connected, keeps trickling for SECONDS, then prints one JSON line: for each connection,
how long after it opened the server closed it (null: still open) and the status line it
answered with (null: none).
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import time

HEAD = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 4000


async def _one(port: int, result: dict[str, object], opened: asyncio.Event) -> None:
    result["closed_after_s"] = None
    result["answer"] = None
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        result["answer"] = f"connect failed: {exc}"
        opened.set()
        return
    started = time.monotonic()

    async def trickle() -> None:
        for index in range(len(HEAD)):
            writer.write(HEAD[index : index + 1])
            await asyncio.sleep(0.5)

    sender = asyncio.create_task(trickle())
    opened.set()
    try:
        data = await reader.read(4096)  # b"" (or an error) once the server closes it
        while data and not reader.at_eof():
            if result["answer"] is None:
                result["answer"] = data.split(b"\r\n", 1)[0].decode("latin-1")
            data = await reader.read(4096)
        if data and result["answer"] is None:
            result["answer"] = data.split(b"\r\n", 1)[0].decode("latin-1")
    except (ConnectionError, OSError):
        pass
    result["closed_after_s"] = round(time.monotonic() - started, 2)
    sender.cancel()
    writer.close()


async def main(port: int, count: int, seconds: float) -> None:
    results: list[dict[str, object]] = [{} for _ in range(count)]
    tasks = []
    for index in range(count):
        opened = asyncio.Event()
        tasks.append(asyncio.create_task(_one(port, results[index], opened)))
        await opened.wait()
    print("opened", flush=True)
    await asyncio.wait(tasks, timeout=seconds)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    print(json.dumps(results), flush=True)


if __name__ == "__main__":
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])))
