"""A local https web for `fetch_bench.py --mode https`: sites on 127.0.0.x behind a delay line.

One asyncio process serves every site: a TLS server (a certificate from a local authority for
each site's address) that answers like the http server, after a fixed server time; and in front
of it, on 127.0.0.1..N, a delay line: a TCP relay that holds every chunk half a round trip in each
direction and a whole round trip before a new connection carries anything, so TCP set-up, each
TLS handshake flight and each request/response pay the round trip as on the real web.

Pages are spread over sites by Zipf's law (a few big sites, many small ones), and
`floor_child` fetches them with a bare keep-alive httpx loop under the same limits: the network
floor of the run. `downloads_child` fetches them with tlmscore's own request side (the guarded
transport, limits and request loop) reading bodies without extracting them, which compares the
network part of tlmscore with the floor whatever the CPU is doing.
"""

from __future__ import annotations

import asyncio
import json
import random
import ssl
import sys
import time
from pathlib import Path


def site_of_pages(pages: int, sites: int, seed: int = 11) -> list[int]:
    """The site (0-based) of each page: every site has one, the rest drawn with weight 1/rank."""
    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(sites)]
    chosen = list(range(min(sites, pages))) + rng.choices(range(sites), weights, k=max(0, pages - sites))
    rng.shuffle(chosen)
    return chosen


def https_url(index: int, site: int, port: int) -> str:
    return f"https://127.0.0.{1 + site}:{port}/{index}/article-{index}.html"


def write_authority(folder: Path, sites: int) -> tuple[Path, Path, Path]:
    """A local CA (PEM) and a certificate + key for the addresses 127.0.0.1..N."""
    import trustme

    authority = trustme.CA()
    issued = authority.issue_cert(*(f"127.0.0.{n}" for n in range(1, sites + 1)))
    ca, cert, key = folder / "ca.pem", folder / "cert.pem", folder / "key.pem"
    authority.cert_pem.write_to_path(str(ca))
    issued.cert_chain_pems[0].write_to_path(str(cert))
    issued.private_key_pem.write_to_path(str(key))
    return ca, cert, key


async def _relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    """Copy `reader` to `writer`, each chunk `delay` seconds after it was read, in order."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def send() -> None:
        while True:
            due, chunk = await queue.get()
            if not chunk:
                break
            await asyncio.sleep(max(0.0, due - loop.time()))
            writer.write(chunk)
            await writer.drain()

    sender = asyncio.ensure_future(send())
    try:
        while chunk := await reader.read(65536):
            queue.put_nowait((loop.time() + delay, chunk))
    except ConnectionError:
        pass
    queue.put_nowait((0.0, b""))
    try:
        await sender
        writer.close()
    except ConnectionError:
        pass


def serve_https(port_out, counter, ready, options: dict) -> None:
    """Child process: the TLS server on a private port and the delay line in front of it."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _page_sets import bodies as load_bodies

    bodies, _ = load_bodies(options["pageset"], options["count"])
    rtt, server_time, sites = options["rtt"], options["server_time"], options["sites"]
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(options["cert"], options["key"])

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
                with counter.get_lock():
                    counter.value += 1
                await asyncio.sleep(server_time)
                parts = line.split()[1].decode().split("/")
                body = bodies[int(parts[1]) % len(bodies)] if len(parts) > 2 and parts[1].isdigit() else b""
                status = "200 OK" if body else "404 Not Found"
                writer.write(f"HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\n"
                             f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
                await writer.drain()
        except (ConnectionError, ssl.SSLError, IndexError):
            pass
        finally:
            writer.close()

    async def front(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One delayed connection: a round trip to set up, then half a round trip each way."""
        await asyncio.sleep(rtt)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", backend_port)
        await asyncio.gather(_relay(reader, up_writer, rtt / 2), _relay(up_reader, writer, rtt / 2))

    async def main() -> None:
        nonlocal backend_port
        backend = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context, backlog=1024)
        backend_port = backend.sockets[0].getsockname()[1]
        first = await asyncio.start_server(front, "127.0.0.1", 0, backlog=1024)
        port = first.sockets[0].getsockname()[1]
        fronts = [first] + [await asyncio.start_server(front, f"127.0.0.{n}", port, backlog=1024)
                            for n in range(2, sites + 1)]
        port_out.value = port
        ready.set()
        await asyncio.gather(backend.serve_forever(), *(s.serve_forever() for s in fronts))

    backend_port = 0
    asyncio.run(main())


def floor_child(urls_file: Path, ca: str, concurrency: int, per_host: int) -> None:
    """Fetch every URL once with a bare keep-alive httpx loop under the same limits; print JSON.

    `ca` is the authority's file for an https web ("" for a plain-http one)."""
    import httpx

    urls = json.loads(urls_file.read_text())

    async def run() -> dict:
        context = ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
        limit = asyncio.Semaphore(concurrency)
        hosts: dict[str, asyncio.Semaphore] = {}
        start = time.perf_counter()
        async with httpx.AsyncClient(verify=context, limits=httpx.Limits(max_connections=None)) as client:

            async def one(url: str) -> int:
                host = httpx.URL(url).host
                async with hosts.setdefault(host, asyncio.Semaphore(per_host)), limit:
                    response = await client.get(url)
                    return len(response.content)

            sizes = await asyncio.gather(*(one(u) for u in urls))
        return {"seconds": time.perf_counter() - start, "bytes": sum(sizes)}

    print(json.dumps(asyncio.run(run())))


def downloads_child(urls_file: Path, ca: str, concurrency: int, sites: int) -> None:
    """Fetch every URL once with tlmscore's `Downloader` (bodies read, not extracted); print JSON.

    Private modules, on purpose: the figure is tlmscore's request side alone (guarded transport, limits, request
    loop) against the bare client, which no public call runs without the extraction and rendering after it.
    """
    from tlmscore.evidence._download import Downloader
    from tlmscore.evidence._guard import system_resolver
    from tlmscore.evidence._reply import Reply
    from tlmscore.settings import Settings

    urls = json.loads(urls_file.read_text())
    settings = Settings(cache_dir=urls_file.parent / "unused-cache", concurrency=concurrency,
                        ca_bundle=Path(ca) if ca else None,
                        allow_hosts={f"127.0.0.{n}" for n in range(1, sites + 1)})

    async def read(url, response) -> Reply:
        body = await response.aread()
        return Reply(url, response.status_code, response.reason_phrase, None, body=body)

    async def run() -> dict:
        downloader = Downloader(settings, system_resolver, client=None, headers={}, read=read)
        start = time.perf_counter()
        replies = await asyncio.gather(*(downloader.download(u) for u in urls))
        seconds = time.perf_counter() - start
        await downloader.aclose()
        return {"seconds": seconds, "bytes": sum(len(r.body or b"") for r in replies)}

    print(json.dumps(asyncio.run(run())))
