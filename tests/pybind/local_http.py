"""Helpers of the footprint monitor tests (test_carbon_monitor.py, test_price_monitor.py): a quiet
HTTP request handler that answers JSON, a threaded HTTP server on a loopback port for a fake web
service, and what both tests pass to and compute from the monitors."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Type

# No framework to synchronize with on simulated GPUs.
NO_SYNC = {"sync_execution_with": lambda gpus: None}


def kwh(joules: float) -> float:
    return joules / 3.6e6


class QuietHandler(BaseHTTPRequestHandler):
    """A handler that logs nothing; subclasses write do_GET with these answers."""

    def log_message(self, *args):
        pass

    def send_status(self, status: int) -> None:
        """An answer of only a status line (and no body)."""
        self.send_response(status)
        self.end_headers()

    def send_json(self, body) -> None:
        """A 200 answer: `body` as JSON, or a str sent as it is (for malformed JSON). A client
        that gave up (timed out) before it came is no error of the server's."""
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass


class LocalHTTPServer:
    """`handler` served on 127.0.0.1 at a port the kernel picks, from a daemon thread (and a
    daemon thread per request) until stop()."""

    def __init__(self, handler: Type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Stops serving and closes the port: a request after this is refused."""
        self.server.shutdown()
        self.server.server_close()


class HostileService:
    """A service on 127.0.0.1 that misbehaves on every connection, from a daemon thread each:
    "trickle" sends a head announcing 1 MB and then one body byte every `interval` s (never a
    read timeout, never the end); "huge" announces 4 GiB and sends `flood_bytes` as fast as the
    client takes them, then closes (a client without a cap holds them all)."""

    def __init__(self, mode: str, interval: float = 0.1, flood_bytes: int = 256 << 20) -> None:
        import socket

        self.mode = mode
        self.interval = interval
        self.flood_bytes = flood_bytes
        self.connections = 0
        self.stopping = threading.Event()
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.listener.settimeout(0.1)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                continue
            self.connections += 1
            threading.Thread(target=self._misbehave, args=(conn,), daemon=True).start()

    def _misbehave(self, conn) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        try:
            conn.settimeout(5.0)
            request = b""
            while b"\r\n\r\n" not in request:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                request += chunk
            if self.mode == "trickle":
                conn.sendall(head + b"Content-Length: 1000000\r\n\r\n[")
                while not self.stopping.wait(self.interval):
                    conn.sendall(b" ")
            else:
                conn.sendall(head + b"Content-Length: 4294967296\r\n\r\n[")
                block = b" " * (1 << 20)
                sent = 0
                while sent < self.flood_bytes and not self.stopping.is_set():
                    conn.sendall(block)
                    sent += len(block)
        except OSError:
            pass  # the client gave up, as it should
        finally:
            conn.close()

    def stop(self) -> None:
        self.stopping.set()
        self.listener.close()
