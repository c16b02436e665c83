"""Queries before the backlog: one forward pass of a local model at a time, and a waiting search query goes first.

The background writer embeds stored memories in batches; a search embeds one short query and is waited on by a
user. Both share one model (and the machine's cores), so without an order a query waited behind the whole
backlog, timed out and silently fell back to lexical search. With :class:`QueriesFirst`, the writer takes the
model one small batch at a time and yields to any query that is waiting, so a query waits at most for the batch
in flight.

Example:
    >>> turns = QueriesFirst()
    >>> with turns.turn(query=True):
    ...     turns.busy
    True
    >>> turns.busy
    False
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class QueriesFirst:
    """A lock for model passes where waiting queries are served before waiting background batches."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.busy = False
        self.queries_waiting = 0
        self.batches_waiting = 0

    @contextmanager
    def turn(self, *, query: bool) -> Iterator[None]:
        """Hold the model for one pass (blocking: call it from a worker thread, never on the event loop)."""
        with self._cond:
            if query:
                self.queries_waiting += 1
            else:
                self.batches_waiting += 1
            try:
                while self.busy or (not query and self.queries_waiting):
                    self._cond.wait()
            finally:
                if query:
                    self.queries_waiting -= 1
                else:
                    self.batches_waiting -= 1
            self.busy = True
        try:
            yield
        finally:
            with self._cond:
                self.busy = False
                self._cond.notify_all()
