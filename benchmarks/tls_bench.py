"""CPU per new TLS connection with the system trust store: `truststore`'s context against tlmscore's.

A TLS server on loopback with a certificate from a local authority that the system's store does
not list; each attempt connects, handshakes and is refused the certificate, as a connection to a
site is verified against the whole system bundle. The CPU (user + system, client and server in this
one process) per attempt is printed for `truststore.SSLContext` (which loads the system's bundle
into the context again for every connection it wraps, on Linux) and for the context
`tlmscore.evidence._transport.tls_context` makes for `--trust-store system` (loaded once), in turn.

    python benchmarks/tls_bench.py --connections 60 --rounds 2
"""

from __future__ import annotations

import argparse
import socket
import ssl
import threading
import time
from pathlib import Path

import trustme
import truststore

from tlmscore.evidence._transport import tls_context
from tlmscore.settings import Settings


def serve(listener: socket.socket, context: ssl.SSLContext) -> None:
    """Accept connections and handshake on each until the process ends (a daemon thread)."""
    while True:
        conn, _ = listener.accept()
        try:
            with context.wrap_socket(conn, server_side=True) as tls:
                tls.recv(1)
        except (ssl.SSLError, OSError):
            pass


def attempt(context: ssl.SSLContext, port: int) -> None:
    """One new connection and handshake; the certificate is refused (the store lacks its authority)."""
    with socket.create_connection(("127.0.0.1", port)) as raw:
        try:
            with context.wrap_socket(raw, server_hostname="127.0.0.1"):
                pass
        except ssl.SSLCertVerificationError:
            pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    authority = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server_context)
    listener = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=serve, args=(listener, server_context), daemon=True).start()
    port = listener.getsockname()[1]
    contexts = {
        "truststore.SSLContext": truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT),
        "tlmscore, --trust-store system": tls_context(Settings(cache_dir=Path("unused"), trust_store="system")),
    }
    print(f"CPU per new TLS connection, ms (client + server in one process; {args.connections} connections)")
    for _ in range(args.rounds):
        for label, context in contexts.items():  # in turn, so a change in the machine's load hits both
            attempt(context, port)
            start = time.process_time()
            for _ in range(args.connections):
                attempt(context, port)
            print(f"  {label:<34}{(time.process_time() - start) / args.connections * 1000:>8.1f}")


if __name__ == "__main__":
    main()
