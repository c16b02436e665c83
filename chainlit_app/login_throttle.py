"""Login throttling: failed password logins are counted per account and address, per account, and per address.

Within ``AGENT_MEMORY_UI_LOGIN_WINDOW_SECONDS`` (default 900), an account may fail
``AGENT_MEMORY_UI_LOGIN_MAX_FAILURES`` times (default 5) from one client address, and four times that many from
all addresses together; one address may fail four times that many over all accounts. Beyond any of these,
attempts are answered ``429 {"detail": "too many failed logins: try again in N s"}`` without checking the
password (the right password too) until the oldest counted failure leaves the window. So a stranger's guesses
lock an account only for their own address until they come from several addresses, and a guesser with many
addresses still gets no more than the account's total.

An attempt counts from the moment its password check starts (the check is slow on purpose): guesses sent at
once are checked only as far as the limits have room, and the others are refused at once. A successful login
clears its account's counts (not its address's). The counts live in the UI process (one process serves the
UI). The client address is the TCP peer, or the client a trusted proxy names (:mod:`chainlit_app.peers`).
Refusals are answered after a second (a tarpit): a client flooding the login then gets one answer per
connection per second, so the flood costs the server almost nothing and other users do not notice it.

Example:
    >>> t = LoginThrottle(max_failures=2, window_s=60, clock=lambda: 0.0)
    >>> t.record_failure("alice", "10.0.0.1"); t.record_failure("alice", "10.0.0.1")
    >>> t.retry_after("alice", "10.0.0.1"), t.retry_after("alice", "10.0.0.9")
    (60, 0)
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence

from chainlit.server import login as chainlit_login
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.security import OAuth2PasswordRequestForm

from chainlit_app.peers import Network, client_address

LOGIN_PATH = "/login"
ACCOUNT_FACTOR = 4  # an account's failures over all addresses: bounds guessing from many addresses
ADDRESS_FACTOR = 4  # one address may try several accounts (a shared office NAT), but not without bound
TARPIT_SECONDS = 1.0
BUSY_RETRY_SECONDS = 1  # the limit is taken by checks under way: their outcome comes within about a second

Key = tuple[str, str, str]  # (kind, account, address)


class LoginThrottle:
    """Sliding-window counts of failed logins, and of logins being checked, per account and address."""

    def __init__(self, *, max_failures: int = 5, window_s: float = 900, clock: Callable[[], float] = time.monotonic):
        if max_failures < 1 or window_s <= 0:
            raise ValueError("max_failures must be >= 1 and window_s > 0")
        self.max_failures = max_failures
        self.window_s = window_s
        self.clock = clock
        self._failures: dict[Key, deque[float]] = {}
        self._checking: Counter[Key] = Counter()

    @classmethod
    def from_env(cls) -> LoginThrottle:
        failures = int(os.environ.get("AGENT_MEMORY_UI_LOGIN_MAX_FAILURES", "5"))
        window = float(os.environ.get("AGENT_MEMORY_UI_LOGIN_WINDOW_SECONDS", "900"))
        return cls(max_failures=failures, window_s=window)

    def _limits(self, account: str, address: str) -> tuple[tuple[Key, int], ...]:
        n = self.max_failures
        return (
            (("pair", account, address), n),
            (("account", account, ""), n * ACCOUNT_FACTOR),
            (("address", "", address), n * ADDRESS_FACTOR),
        )

    def _recent(self, key: Key) -> deque[float]:
        times = self._failures.get(key)
        if times is None:
            return deque()
        cutoff = self.clock() - self.window_s
        while times and times[0] <= cutoff:
            times.popleft()
        if not times:
            del self._failures[key]
        return times

    def retry_after(self, account: str, address: str) -> int:
        """Seconds until a login may be tried again for this account from this address (0: now)."""
        wait = 0.0
        for key, limit in self._limits(account, address):
            times = self._recent(key)
            if len(times) >= limit:
                wait = max(wait, times[len(times) - limit] + self.window_s - self.clock())
            elif len(times) + self._checking[key] >= limit:
                wait = max(wait, BUSY_RETRY_SECONDS)
        return math.ceil(wait) if wait > 0 else 0

    def reserve(self, account: str, address: str) -> int:
        """Count an attempt as under way before its password is checked; or, when there is no room for it, the
        seconds to wait (nothing reserved). A reservation ends with :meth:`release`."""
        wait = self.retry_after(account, address)
        if not wait:
            self._checking.update(key for key, _ in self._limits(account, address))
        return wait

    def release(self, account: str, address: str) -> None:
        """The reserved attempt is over; its outcome is recorded (or not) separately."""
        for key, _ in self._limits(account, address):
            self._checking[key] -= 1
            if self._checking[key] <= 0:
                del self._checking[key]

    def record_failure(self, account: str, address: str) -> None:
        now = self.clock()
        for key, _ in self._limits(account, address):
            self._failures.setdefault(key, deque()).append(now)

    def record_success(self, account: str, address: str) -> None:
        for key, _ in self._limits(account, address)[:2]:  # the account's counts; the address's stay
            self._failures.pop(key, None)


def mount(app: FastAPI, throttle: LoginThrottle, proxies: Sequence[Network] = ()) -> None:
    """Answer ``POST /login`` before Chainlit's own route: refuse while throttled, count failures.

    ``proxies``: the trusted proxies whose ``X-Forwarded-For`` names the client address.
    """

    async def throttled_login(request: Request) -> Response:
        form = await request.form()
        username = str(form.get("username") or "").strip().lower()
        peer = request.client.host if request.client else None
        address = client_address(peer, request.headers.getlist("x-forwarded-for"), proxies)
        wait = throttle.reserve(username, address)  # no await before it: concurrent guesses see each other
        if wait:
            await asyncio.sleep(TARPIT_SECONDS)  # a waiting coroutine is cheap; answering a flood at once is not
            return JSONResponse(
                {"detail": f"too many failed logins: try again in {wait} s"},
                status_code=429,
                headers={"Retry-After": str(wait)},
            )
        credentials = OAuth2PasswordRequestForm(
            username=str(form.get("username") or ""), password=str(form.get("password") or "")
        )
        try:
            response: Response = await chainlit_login(request, Response(), credentials)
        except HTTPException as exc:
            if exc.status_code != 401:
                raise
            throttle.record_failure(username, address)
            # Chainlit's detail is "credentialssignin", which its login page shows as is.
            raise HTTPException(status_code=401, detail="wrong user name or password") from None
        finally:
            throttle.release(username, address)
        throttle.record_success(username, address)
        return response

    if any(getattr(r, "path", None) == LOGIN_PATH and getattr(r, "name", "") == "throttled_login"
           for r in app.router.routes):  # fmt: skip
        return
    app.router.routes.insert(0, APIRoute(LOGIN_PATH, throttled_login, methods=["POST"], name="throttled_login"))
