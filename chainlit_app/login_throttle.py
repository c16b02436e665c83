"""Login throttling: failed password logins are counted per account and per client address.

After ``AGENT_MEMORY_UI_LOGIN_MAX_FAILURES`` failures (default 5) for one account, or four times that many from
one address, within ``AGENT_MEMORY_UI_LOGIN_WINDOW_SECONDS`` (default 900), further attempts are answered
``429 {"detail": "too many failed logins: try again in N s"}`` without checking the password (the right
password too) until the oldest counted failure leaves the window. A successful login clears its account's
count. The count lives in the UI process (one process serves the UI). Refusals are answered after a
second (a tarpit): a client flooding the login then gets one answer per connection per second, so the flood
costs the server almost nothing and other users do not notice it.

Example:
    >>> t = LoginThrottle(max_failures=2, window_s=60, clock=lambda: 0.0)
    >>> t.record_failure("alice", "10.0.0.1"); t.record_failure("alice", "10.0.0.1")
    >>> t.retry_after("alice", "10.0.0.9")
    60
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections import deque
from collections.abc import Callable

from chainlit.server import login as chainlit_login
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.security import OAuth2PasswordRequestForm

LOGIN_PATH = "/login"
ADDRESS_FACTOR = 4  # one address may try several accounts (a shared office NAT), but not without bound
TARPIT_SECONDS = 1.0


class LoginThrottle:
    """Sliding-window counts of failed logins per account and per address."""

    def __init__(self, *, max_failures: int = 5, window_s: float = 900, clock: Callable[[], float] = time.monotonic):
        if max_failures < 1 or window_s <= 0:
            raise ValueError("max_failures must be >= 1 and window_s > 0")
        self.max_failures = max_failures
        self.window_s = window_s
        self.clock = clock
        self._failures: dict[str, deque[float]] = {}

    @classmethod
    def from_env(cls) -> LoginThrottle:
        failures = int(os.environ.get("AGENT_MEMORY_UI_LOGIN_MAX_FAILURES", "5"))
        window = float(os.environ.get("AGENT_MEMORY_UI_LOGIN_WINDOW_SECONDS", "900"))
        return cls(max_failures=failures, window_s=window)

    def _recent(self, key: str) -> deque[float]:
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
        for key, limit in ((f"u:{account}", self.max_failures), (f"a:{address}", self.max_failures * ADDRESS_FACTOR)):
            times = self._recent(key)
            if len(times) >= limit:
                wait = max(wait, times[len(times) - limit] + self.window_s - self.clock())
        return math.ceil(wait) if wait > 0 else 0

    def record_failure(self, account: str, address: str) -> None:
        now = self.clock()
        for key in (f"u:{account}", f"a:{address}"):
            self._failures.setdefault(key, deque()).append(now)

    def record_success(self, account: str) -> None:
        self._failures.pop(f"u:{account}", None)


def mount(app: FastAPI, throttle: LoginThrottle) -> None:
    """Answer ``POST /login`` before Chainlit's own route: refuse while throttled, count failures."""

    async def throttled_login(request: Request) -> Response:
        form = await request.form()
        username = str(form.get("username") or "").strip().lower()
        address = request.client.host if request.client else "unknown"
        wait = throttle.retry_after(username, address)
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
        throttle.record_success(username)
        return response

    if any(getattr(r, "path", None) == LOGIN_PATH and getattr(r, "name", "") == "throttled_login"
           for r in app.router.routes):  # fmt: skip
        return
    app.router.routes.insert(0, APIRoute(LOGIN_PATH, throttled_login, methods=["POST"], name="throttled_login"))
