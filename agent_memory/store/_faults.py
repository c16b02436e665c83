"""Database faults as one clear error, logged once per outage.

An unreachable server, a statement that ran past ``AGENT_MEMORY_STATEMENT_TIMEOUT_SECONDS``, a full disk: asyncpg
reports these as a dozen exception types (a missing unix socket is a bare ``FileNotFoundError``). The pool of
:class:`~agent_memory.store.Database` turns each into :class:`~agent_memory.errors.DatabaseUnavailable` with what
happened and what to do, so every surface can answer it alike (CLI exit 3, MCP 503, a tool error) without a
traceback. The first fault of an outage is logged as a warning and the recovery as info; the faults in between,
one per request, are not logged again.

Example:
    >>> import asyncpg
    >>> print(database_fault(asyncpg.exceptions.DiskFullError("could not extend file")))
    the database server's disk is full (could not extend file), so nothing was written. Free space on the disk \
holding the server's data directory and try again; do not delete the data directory: it holds every memory.
    >>> database_fault(ValueError("not a fault")) is None
    True
"""

from __future__ import annotations

import logging
import time
from typing import Any

import asyncpg
from asyncpg.pool import Pool, PoolAcquireContext, PoolConnectionProxy

from ..errors import DatabaseUnavailable

log = logging.getLogger("agent_memory.database")

# Classes of SQLSTATE that mean "the server cannot serve this now", not "this request is wrong":
# 08 connection exception, 53 insufficient resources (disk full, out of memory, too many connections),
# 57 operator intervention (statement timeout / cancel, shutdown, cannot connect now), 58 system error (I/O).
_FAULT_SQLSTATE_CLASSES = ("08", "53", "57", "58")
_STATEMENT_TIMEOUT = "57014"
_DISK_FULL = "53100"


def database_fault(exc: BaseException, *, statement_timeout: float | None = None) -> DatabaseUnavailable | None:
    """The :class:`DatabaseUnavailable` that explains ``exc``, or None when ``exc`` is not a database fault."""
    if isinstance(exc, DatabaseUnavailable):
        return exc
    limit = f" within {statement_timeout:g} s" if statement_timeout else " in time"
    slow = (
        f"the database did not answer{limit} (AGENT_MEMORY_STATEMENT_TIMEOUT_SECONDS): it is overloaded or a "
        "long operation holds a lock. Nothing was changed; try again shortly."
    )
    if isinstance(exc, asyncpg.PostgresError):
        state = str(getattr(exc, "sqlstate", "") or "")
        if state == _STATEMENT_TIMEOUT:
            return DatabaseUnavailable(slow)
        if state == _DISK_FULL:
            return DatabaseUnavailable(
                f"the database server's disk is full ({_first_line(exc)}), so nothing was written. Free space on "
                "the disk holding the server's data directory and try again; do not delete the data directory: "
                "it holds every memory."
            )
        if state.startswith("08"):
            return _unreachable(exc)
        if state[:2] in _FAULT_SQLSTATE_CLASSES:
            return DatabaseUnavailable(
                f"the database server cannot serve requests now ({state}: {_first_line(exc)}). Try again shortly; "
                "if it persists, check the server's log."
            )
        return None
    if isinstance(exc, TimeoutError):
        return DatabaseUnavailable(slow)
    if isinstance(exc, (OSError, asyncpg.InterfaceError)):
        return _unreachable(exc)
    return None


def _unreachable(exc: BaseException) -> DatabaseUnavailable:
    return DatabaseUnavailable(
        f"the database is unreachable ({_first_line(exc) or type(exc).__name__}). Check that the PostgreSQL "
        "server is running (`agent-memory db status`); requests work again as soon as it is back."
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


class OutageLog:
    """Logs the first fault of an outage and its end; the faults in between stay out of the log."""

    def __init__(self) -> None:
        self.since: float | None = None

    def fault(self, error: DatabaseUnavailable) -> None:
        if self.since is None:
            self.since = time.monotonic()
            log.warning("%s (logged once until the database is back)", error)

    def ok(self) -> None:
        if self.since is not None:
            log.info("the database answers again, after %.1f s of faults", time.monotonic() - self.since)
            self.since = None


class _PoolRetrySpam(logging.Filter):
    """asyncpg logs a full traceback each time its pool fails to reconnect its idle connections (every few
    seconds while the server is down); the outage is already logged once by :class:`OutageLog`."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Failed to restore the pool connection floor" not in record.getMessage()


_asyncpg_pool_log = logging.getLogger("asyncpg.pool")
if not any(isinstance(f, _PoolRetrySpam) for f in _asyncpg_pool_log.filters):
    _asyncpg_pool_log.addFilter(_PoolRetrySpam())


class _GuardedAcquire(PoolAcquireContext):
    """Acquire a connection; a fault on the way in, or raised inside the ``async with`` block, becomes
    :class:`DatabaseUnavailable`. Other errors (a unique violation, bad input) pass unchanged."""

    __slots__ = ()

    pool: GuardedPool

    async def __aenter__(self) -> PoolConnectionProxy:
        try:
            return await super().__aenter__()
        except BaseException as exc:
            raise self.pool.translate(exc) from exc

    async def __aexit__(self, *exc_info: object) -> None:
        raised = exc_info[1] if len(exc_info) > 1 and isinstance(exc_info[1], BaseException) else None
        try:
            await super().__aexit__(*exc_info)
        except BaseException as exc:
            if raised is None:
                raise self.pool.translate(exc) from exc
        if raised is None:
            self.pool.outages.ok()
            return
        translated = self.pool.translate(raised)
        if translated is not raised:
            raise translated from raised


class GuardedPool(Pool):
    """An asyncpg pool whose faults are :class:`DatabaseUnavailable` errors, logged once per outage."""

    __slots__ = ("outages", "statement_timeout")

    def __init__(self, *args: Any, statement_timeout: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.outages = OutageLog()
        self.statement_timeout = statement_timeout

    def acquire(self, *, timeout: float | None = None) -> _GuardedAcquire:
        return _GuardedAcquire(self, timeout)

    def translate(self, exc: BaseException) -> BaseException:
        """``exc`` as :class:`DatabaseUnavailable` when it is a database fault (recorded), else ``exc`` itself."""
        error = database_fault(exc, statement_timeout=self.statement_timeout)
        if error is None:
            return exc
        self.outages.fault(error)
        return error
