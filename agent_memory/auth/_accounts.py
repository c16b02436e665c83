"""Login accounts for the chat UI: password hashes (scrypt) and the Chainlit auth secret.

This module hashes and checks passwords and sets the rules; the rows (``agent_memory_credentials``, next to
the user's ``"User"`` row) are read and written by :class:`agent_memory.store.LoginStore`.
There is no default password; ``agent-memory user add NAME`` creates one.

Example:
    >>> import asyncio
    >>> from agent_memory.store import Database
    >>> from agent_memory.auth import UserAccounts
    >>> async def main() -> bool:
    ...     db = await Database.connect()
    ...     try:
    ...         accounts = UserAccounts(db)
    ...         await accounts.add("alice", "correct horse battery staple")
    ...         return await accounts.verify("alice", "correct horse battery staple")
    ...     finally:
    ...         await db.close()
    >>> asyncio.run(main())  # doctest: +SKIP
    True
    >>> verify_password("s3cret-pass", hash_password("s3cret-pass"))
    True
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os
import secrets
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel

from ..config import Settings, get_settings
from ..store import Database, LoginStore
from ..validation import check_user_id

MIN_PASSWORD_CHARS = 8
MAX_PASSWORD_CHARS = 1024

# scrypt cost: 2**15 * 8 * 128 bytes = 32 MiB of memory and ~0.1 s per hash on a laptop core.
_SCRYPT_N, _SCRYPT_R, _SCRYPT_P, _SCRYPT_LEN = 2**15, 8, 1, 32
_SCRYPT_MAXMEM = 64 * 1024 * 1024

AUTH_SECRET_FILE = "chainlit_auth_secret"


class AccountExists(ValueError):
    """``add`` was asked to create a login that already exists."""


class AccountInfo(BaseModel):
    """One user as ``agent-memory user list`` shows it."""

    identifier: str
    has_login: bool
    created_at: datetime
    memories: int
    threads: int


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def hash_password(password: str) -> str:
    """A self-describing scrypt hash: ``scrypt$N$r$p$salt$hash`` (base64)."""
    check_password(password)
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(
        password.encode("utf-8"), salt=salt, n=_SCRYPT_N, r=_SCRYPT_R, p=_SCRYPT_P, dklen=_SCRYPT_LEN,
        maxmem=_SCRYPT_MAXMEM,
    )  # fmt: skip
    return f"scrypt${_SCRYPT_N}${_SCRYPT_R}${_SCRYPT_P}${_b64(salt)}${_b64(digest)}"


def verify_password(password: str, encoded: str) -> bool:
    """True when ``password`` matches ``encoded`` (constant-time comparison)."""
    try:
        scheme, n, r, p, salt_b64, digest_b64 = encoded.split("$")
        if scheme != "scrypt":
            return False
        salt, expected = base64.b64decode(salt_b64), base64.b64decode(digest_b64)
        actual = hashlib.scrypt(
            password.encode("utf-8"), salt=salt, n=int(n), r=int(r), p=int(p), dklen=len(expected),
            maxmem=_SCRYPT_MAXMEM,
        )  # fmt: skip
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(actual, expected)


def check_password(password: object) -> str:
    if not isinstance(password, str):
        raise ValueError("password must be a string")
    if len(password) < MIN_PASSWORD_CHARS:
        raise ValueError(f"password is too short: use at least {MIN_PASSWORD_CHARS} characters")
    if len(password) > MAX_PASSWORD_CHARS:
        raise ValueError(f"password is too long: at most {MAX_PASSWORD_CHARS} characters")
    if "\x00" in password:
        raise ValueError("password contains a NUL character")
    return password


# A hash of a random password, checked when the user does not exist so that "no such user" and
# "wrong password" take the same time.
_DUMMY_HASH: str | None = None


def _dummy_hash() -> str:
    global _DUMMY_HASH
    if _DUMMY_HASH is None:
        _DUMMY_HASH = hash_password(secrets.token_urlsafe(16))
    return _DUMMY_HASH


class UserAccounts:
    """Create, check, list and remove UI logins on the agent-memory database."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.logins = LoginStore(db)

    async def add(self, identifier: str, password: str, *, replace: bool = False) -> None:
        """Give ``identifier`` a login (creating the user if needed).

        Raises :class:`AccountExists` when the user already has a password and ``replace`` is false.
        """
        identifier = check_user_id(identifier)
        encoded = await asyncio.to_thread(hash_password, password)
        if not await self.logins.set_password_hash(identifier, encoded, replace=replace):
            raise AccountExists(f"user {identifier!r} already has a login")

    async def verify(self, identifier: str, password: str) -> bool:
        """True when ``identifier`` has a login and ``password`` is its password."""
        try:
            identifier = check_user_id(identifier)
        except ValueError:
            identifier = ""
        encoded = None
        if identifier:
            encoded = await self.logins.password_hash(identifier)
        if not isinstance(password, str) or len(password) > MAX_PASSWORD_CHARS:
            return False
        ok = await asyncio.to_thread(verify_password, password, encoded or _dummy_hash())
        return ok and encoded is not None

    async def remove_login(self, identifier: str) -> bool:
        """Remove the password of ``identifier`` (their memories and threads stay). False when there was none."""
        identifier = check_user_id(identifier)
        return await self.logins.remove(identifier)

    async def session_version(self, identifier: str) -> int | None:
        """The version UI session tokens of ``identifier`` must carry; None when the user does not exist."""
        return await self.logins.session_version(identifier)

    async def end_sessions(self, identifier: str) -> int | None:
        """Log ``identifier`` out everywhere (logout does this): tokens issued before are refused from now on."""
        return await self.logins.end_sessions(identifier)

    async def count_logins(self) -> int:
        return await self.logins.count()

    async def list(self) -> list[AccountInfo]:
        """Every user known to the database, with login flag and counts, by identifier."""
        rows = await self.logins.users()
        return [
            AccountInfo(
                identifier=r["identifier"],
                has_login=r["has_login"],
                created_at=r["created_at"],
                memories=int(r["memories"]),
                threads=int(r["threads"]),
            )
            for r in rows
        ]


def auth_secret(settings: Settings | None = None) -> str:
    """The secret that signs UI session tokens: ``CHAINLIT_AUTH_SECRET``, else one kept under the home.

    The file ``$AGENT_MEMORY_HOME/chainlit_auth_secret`` is created (mode 0600) on first use, so sessions
    survive restarts without the user having to generate anything.
    """
    given = os.environ.get("CHAINLIT_AUTH_SECRET")
    if given:
        return given
    home: Path = (settings or get_settings()).resolved_home()
    home.mkdir(parents=True, exist_ok=True)
    path = home / AUTH_SECRET_FILE
    try:
        existing = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        existing = ""
    if existing:
        return existing
    secret = secrets.token_urlsafe(48)
    # O_EXCL: when two processes race, the loser reads the winner's secret.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text(encoding="utf-8").strip()
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(secret + "\n")
    return secret
