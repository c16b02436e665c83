"""Vocabularies and per-user profiles for the synthetic held-out set (see make_synthetic.py).

Every user gets disjoint projects, hosts, network, people and cloud names, so a question built from another user's
words has no answer in this user's memories.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

# (name, what it is in plain words, language)
PROJECTS = [
    ("ledger-api", "billing backend", "py"),
    ("hermes-mailer", "email sending service", "py"),
    ("tundra-etl", "nightly data pipeline", "py"),
    ("juniper-ml", "model training code", "py"),
    ("kestrel-auth", "login service", "py"),
    ("orca-scheduler", "job scheduler", "py"),
    ("atlas-search", "search indexer", "py"),
    ("pulse-metrics", "metrics collector", "py"),
    ("storefront", "online shop frontend", "ts"),
    ("vega-dashboard", "analytics dashboard", "ts"),
    ("quill-docs", "documentation website", "ts"),
    ("mosaic-cms", "content editor", "ts"),
    ("harbor-sync", "file sync daemon", "rs"),
    ("nimbus-gateway", "API gateway", "go"),
    ("cobalt-cli", "command-line tool", "rs"),
    ("sparrow-push", "mobile push notifier", "go"),
]
USERS = {
    "synth-ana": ("Ana", "lumen.io", 14, (0, 1, 8, 12)),
    "synth-ben": ("Ben", "brightfield.net", 23, (2, 3, 9, 13)),
    "synth-chen": ("Chen", "tidewater.dev", 37, (4, 5, 10, 14)),
    "synth-dia": ("Dia", "quarrystack.cloud", 52, (6, 7, 11, 15)),
}
PEOPLE = [
    "Marta Queiroz",
    "Tomas Lindqvist",
    "Priya Raman",
    "Jonas Weber",
    "Aiko Tanaka",
    "Samuel Okafor",
    "Lucia Ferraro",
    "Mikael Virtanen",
    "Grace Mbeki",
    "Hugo Laurent",
    "Ines Castro",
    "Rafael Duarte",
    "Sofia Novak",
    "Kenji Morita",
    "Olga Petrova",
    "Daniel Reyes",
    "Fatima Haddad",
    "Erik Johansson",
    "Nadia Rahman",
    "Pablo Ortega",
    "Yuki Sato",
    "Chloe Bernard",
    "Arjun Mehta",
    "Leah Goldberg",
]
CITIES = [
    "Lisbon",
    "Porto",
    "Berlin",
    "Leipzig",
    "Toronto",
    "Montreal",
    "Osaka",
    "Kyoto",
    "Nairobi",
    "Austin",
    "Denver",
    "Valencia",
    "Tallinn",
    "Gdansk",
    "Ghent",
    "Bologna",
    "Utrecht",
    "Krakow",
    "Bristol",
    "Edinburgh",
]
PY_PKGS = [
    "requests",
    "sqlalchemy",
    "pydantic",
    "fastapi",
    "celery",
    "redis",
    "psycopg2-binary",
    "numpy",
    "pandas",
    "httpx",
    "uvicorn",
    "alembic",
    "boto3",
    "structlog",
    "tenacity",
    "orjson",
    "lxml",
    "pillow",
    "cryptography",
    "django",
    "django-filter",
    "marshmallow",
    "pyarrow",
    "scikit-learn",
    "gunicorn",
    "jinja2",
    "click",
    "rich",
    "kombu",
    "grpcio",
    "protobuf",
    "pyyaml",
    "sentry-sdk",
    "opentelemetry-api",
    "python-dateutil",
    "aiohttp",
    "asyncpg",
]
NPM_PKGS = [
    "react",
    "react-dom",
    "next",
    "vite",
    "typescript",
    "eslint",
    "@tanstack/react-query",
    "zod",
    "axios",
    "lodash",
    "date-fns",
    "tailwindcss",
    "@testing-library/react",
    "jest",
    "webpack",
    "esbuild",
    "prettier",
    "storybook",
    "react-router-dom",
    "redux",
    "@reduxjs/toolkit",
    "sass",
    "postcss",
    "msw",
    "i18next",
    "chart.js",
    "dayjs",
]
CRATES = ["serde", "tokio", "clap", "anyhow", "reqwest", "tracing", "rusqlite", "notify", "walkdir", "hyper", "rayon"]
GO_MODS = [
    "github.com/gin-gonic/gin",
    "go.uber.org/zap",
    "github.com/spf13/cobra",
    "google.golang.org/grpc",
    "github.com/jackc/pgx/v5",
    "github.com/redis/go-redis/v9",
    "github.com/stretchr/testify",
]
HOST_ROLES = ["db", "api", "worker", "cache", "build", "edge", "queue", "metrics", "bastion", "search"]
ENVS = ["prod", "staging", "dev", "qa"]
NOUNS = [
    "invoice",
    "refund",
    "session",
    "tenant",
    "webhook",
    "coupon",
    "payload",
    "cursor",
    "quota",
    "token",
    "schedule",
    "upload",
    "thumbnail",
    "digest",
    "retry",
    "cache",
    "locale",
    "export",
    "report",
    "batch",
]
VERBS = [
    "creates",
    "rejects",
    "rounds",
    "expires",
    "retries",
    "parses",
    "merges",
    "paginates",
    "renders",
    "signs",
    "validates",
    "dedupes",
    "streams",
    "serializes",
    "refreshes",
    "archives",
]
COMPONENTS = [
    "CartSummary",
    "CheckoutForm",
    "PriceTag",
    "NavBar",
    "UserMenu",
    "ChartPanel",
    "FilterBar",
    "DatePicker",
    "Toast",
    "EditorToolbar",
    "SidebarTree",
    "SearchBox",
    "Pagination",
    "AvatarStack",
    "InvoiceTable",
]
TABLES = [
    "orders",
    "invoices",
    "customers",
    "sessions",
    "events",
    "jobs",
    "payouts",
    "subscriptions",
    "audit_log",
    "shipments",
    "api_keys",
    "feature_flags",
]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]


@dataclass
class Project:
    name: str
    gloss: str
    lang: str


@dataclass
class Profile:
    user: str
    person: str
    domain: str
    net: int
    projects: list[Project]
    people: list[str]
    cities: list[str]
    hosts: dict[str, list[str]] = field(default_factory=dict)  # env -> hosts
    py: dict[str, str] = field(default_factory=dict)  # package -> version the user runs
    npm: dict[str, str] = field(default_factory=dict)
    rng: random.Random = field(default_factory=random.Random)
    clock: datetime = datetime(2025, 1, 6, 8, 0)
    pin: Project | None = None  # set while writing a near-duplicate of an earlier output

    def proj(self, lang: str | None = None) -> Project:
        if self.pin is not None and (
            lang is None or self.pin.lang == lang or (lang == "rsgo" and self.pin.lang in "rsgo")
        ):
            return self.pin
        pool = [p for p in self.projects if lang is None or p.lang == lang or (lang == "rsgo" and p.lang in "rsgo")]
        return self.rng.choice(pool or self.projects)

    def host(self, env: str | None = None, role: str | None = None) -> str:
        hosts = self.hosts[env or self.rng.choice(ENVS)]
        picked = [h for h in hosts if role is None or h.startswith(role)]
        return self.rng.choice(picked or hosts)

    def ip(self) -> str:
        return f"10.{self.net}.{self.rng.randint(0, 12)}.{self.rng.randint(2, 250)}"

    def tick(self) -> datetime:
        self.clock += timedelta(minutes=self.rng.randint(20, 900))
        return self.clock

    def stamp(self, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
        return self.clock.strftime(fmt)


def version(rng: random.Random, major: tuple[int, int] = (0, 9)) -> str:
    return f"{rng.randint(*major)}.{rng.randint(0, 30)}.{rng.randint(0, 15)}"


def hexid(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def podsuffix(rng: random.Random) -> str:
    return f"{hexid(rng, 9)}-{''.join(rng.choice('bcdfghjklmnpqrstvwxz2456789') for _ in range(5))}"


def make_profile(user: str) -> Profile:
    person, domain, net, proj_idx = USERS[user]
    rng = random.Random(f"synthetic-heldout-v1/{user}")
    order = list(USERS).index(user)
    people = PEOPLE[order * 6 : order * 6 + 6]
    cities = CITIES[order * 5 : order * 5 + 5]
    prof = Profile(user, person, domain, net, [Project(*PROJECTS[i]) for i in proj_idx], people, cities, rng=rng)
    short = domain.split(".")[0][:3]
    for env in ENVS:
        roles = rng.sample(HOST_ROLES, 6)
        prof.hosts[env] = [f"{r}-{env}-{short}{rng.randint(1, 9)}{rng.randint(0, 9)}.{domain}" for r in roles]
    prof.py = {p: version(rng, (0, 5)) for p in rng.sample(PY_PKGS, 24)}
    prof.npm = {p: version(rng, (1, 18)) for p in rng.sample(NPM_PKGS, 18)}
    return prof


def other_users_words(user: str) -> list[tuple[str, str]]:
    """(kind, word) pairs that occur only in the other users' memories: their projects and hosts."""
    words: list[tuple[str, str]] = []
    for other in USERS:
        if other == user:
            continue
        prof = make_profile(other)
        words += [("project", p.name) for p in prof.projects]
        words += [("host", h) for hosts in prof.hosts.values() for h in hosts[:2]]
    return words
