"""A TCP proxy in front of the test PostgreSQL server whose cable a test can cut: a real outage, on demand.

The proxy runs its own event loop in a thread, so it keeps forwarding while the test's loop (or a subprocess)
talks through it. ``cut()`` closes every connection and stops listening (new connections are refused, as with
a stopped server); ``restore()`` listens again on the same port.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


def _target_of(url: str) -> tuple[str | None, str, int]:
    """(unix socket path or None, host, port) that ``url`` connects to."""
    parts = urlsplit(url)
    params = dict(parse_qsl(parts.query))
    port = int(params.get("port") or parts.port or 5432)
    host = params.get("host") or parts.hostname or "localhost"
    if host.startswith("/"):
        return f"{host}/.s.PGSQL.{port}", host, port
    return None, host, port


def url_through(url: str, port: int) -> str:
    """``url`` (credentials, database, other options) connecting to 127.0.0.1:``port`` instead."""
    parts = urlsplit(url)
    params = [(k, v) for k, v in parse_qsl(parts.query) if k not in ("host", "port")]
    userinfo = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urlunsplit(parts._replace(netloc=f"{userinfo}127.0.0.1:{port}", query=urlencode(params)))


class DatabaseProxy:
    def __init__(self, server_url: str) -> None:
        self.socket_path, self.host, self.port = _target_of(server_url)
        self.server_url = server_url
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()
        self.listen_port = 0

    @property
    def url(self) -> str:
        return url_through(self.server_url, self.listen_port)

    def start(self) -> None:
        self.thread.start()
        self._run(self._listen())

    def cut(self) -> None:
        self._run(self._cut())

    def restore(self) -> None:
        self._run(self._listen())

    def stop(self) -> None:
        self._run(self._cut())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)

    def _run(self, coro: object) -> None:
        asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)  # type: ignore[arg-type]

    async def _listen(self) -> None:
        self.server = await asyncio.start_server(self._forward, "127.0.0.1", self.listen_port)
        self.listen_port = self.server.sockets[0].getsockname()[1]

    async def _cut(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        for writer in list(self.writers):
            writer.transport.abort()
        self.writers.clear()

    async def _forward(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            if self.socket_path:
                server_reader, server_writer = await asyncio.open_unix_connection(self.socket_path)
            else:
                server_reader, server_writer = await asyncio.open_connection(self.host, self.port)
        except OSError:
            client_writer.transport.abort()
            return
        self.writers.update((client_writer, server_writer))
        await asyncio.gather(
            self._pipe(client_reader, server_writer), self._pipe(server_reader, client_writer), return_exceptions=True
        )

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        finally:
            with contextlib.suppress(Exception):
                writer.close()
            self.writers.discard(writer)


@contextmanager
def database_proxy(server_url: str) -> Iterator[DatabaseProxy]:
    proxy = DatabaseProxy(server_url)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
