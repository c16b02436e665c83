"""The auth wing of agent-memory."""

from ._accounts import (
    MIN_PASSWORD_CHARS,
    AccountExists,
    UserAccounts,
    auth_secret,
    check_password,
    hash_password,
    verify_password,
)
from ._tokens import StoreTokenVerifier, TokenInfo, TokenManager, TokenNotFound

__all__ = [
    "MIN_PASSWORD_CHARS",
    "AccountExists",
    "StoreTokenVerifier",
    "TokenInfo",
    "TokenManager",
    "TokenNotFound",
    "UserAccounts",
    "auth_secret",
    "check_password",
    "hash_password",
    "verify_password",
]
