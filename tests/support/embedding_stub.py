"""A stand-in embedding endpoint for tests: the real ``openai`` client against a tiny local HTTP server.

It returns deterministic vectors: words of one concept group share a dimension, so "storage exhausted" lands
near "disk full"; every other word lands on a hashed dimension of its own (a little weight each).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agent_memory.search import OpenAIEmbedder

# Words of one group map to one dimension: the stand-in model's notion of meaning.
CONCEPTS = [
    {"disk", "storage", "space", "filesystem", "df"},
    {"full", "exhausted", "left", "100%", "ran", "out"},
    {"cache", "caching", "redis", "memcached", "session", "sessions"},
    {"deploy", "deployment", "ship", "release", "production", "freeze"},
    {"npm", "javascript", "dependency", "dependencies", "package", "packages", "install"},
]
_WORD = re.compile(r"[a-z0-9%]+")


def stub_vector(text: str, dim: int) -> list[float]:
    vec = [0.0] * dim
    for word in _WORD.findall(text.lower()):
        for i, group in enumerate(CONCEPTS):
            if word in group:
                vec[i] += 1.0
                break
        else:
            vec[len(CONCEPTS) + int(hashlib.md5(word.encode()).hexdigest(), 16) % (dim - len(CONCEPTS))] += 0.3
    vec[-1] += 0.05  # never the zero vector
    return vec


@dataclass
class StubServer:
    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    gate: threading.Event = field(default_factory=threading.Event)
    fail: bool = False


class _Handler(BaseHTTPRequestHandler):
    stub: StubServer

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.stub.requests.append(body)
        self.stub.gate.wait(30)
        if self.stub.fail or not self.path.endswith("/embeddings"):
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b'{"error": {"message": "model crashed"}}')
            return
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dim = int(body.get("dimensions") or 64)
        data = []
        for i, text in enumerate(inputs):
            vec = stub_vector(text, dim)
            if body.get("encoding_format") == "base64":
                emb: Any = base64.b64encode(struct.pack(f"<{dim}f", *vec)).decode()
            else:
                emb = vec
            data.append({"object": "embedding", "index": i, "embedding": emb})
        payload = json.dumps(
            {"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": 1, "total_tokens": 1}}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@contextmanager
def serve_stub() -> Iterator[StubServer]:
    """A running stand-in embedding endpoint (OpenAI-compatible ``/v1/embeddings``) on a free local port."""
    handler = type("Handler", (_Handler,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    state = StubServer(url=f"http://127.0.0.1:{server.server_address[1]}/v1")
    state.gate.set()
    handler.stub = state
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.gate.set()
        server.shutdown()
        server.server_close()


def stub_embedder(stub: StubServer, **kwargs: Any) -> OpenAIEmbedder:
    """The real OpenAI-compatible embedder, pointed at the stand-in."""
    return OpenAIEmbedder(model="stub-embed", base_url=stub.url, api_key="test", **kwargs)
