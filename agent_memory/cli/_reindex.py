"""``agent-memory reindex``: backfill dense vectors for the configured embedder, with a progress bar.

Embeds every memory that has no vector in the current vector space (model + dimension): after enabling an
embedder on an existing database, after changing the model or its dimension, or after the background writer
failed (endpoint down). ``--prune`` also deletes vectors of other spaces. Without pgvector there is nothing
to index and search stays lexical (exit 2 with an explanation).

Examples::

    AGENT_MEMORY_EMBEDDER=local agent-memory reindex --all-users
    agent-memory reindex --user alice --embedder openai --model text-embedding-3-small --prune --json
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import TextIO

from ..config import get_settings
from ..search import Embedder, EmbeddingError, embedder_from_settings
from ..store import MemoryStore
from ._main import EXIT_OK, EXIT_USAGE, Cli, UsageError, _common


class ProgressBar:
    """A one-line progress bar on a terminal (``\\r`` redraw); plain periodic lines when not a TTY."""

    def __init__(self, stream: TextIO = sys.stderr, width: int = 30) -> None:
        self.stream = stream
        self.width = width
        self.tty = stream.isatty()
        self.start = time.monotonic()
        self._last_line = -1.0

    def __call__(self, done: int, total: int) -> None:
        frac = 1.0 if total == 0 else min(1.0, done / total)
        elapsed = time.monotonic() - self.start
        rate = done / elapsed if elapsed > 0 else 0.0
        filled = int(frac * self.width)
        line = f"reindex [{'#' * filled}{'.' * (self.width - filled)}] {done}/{total} {frac * 100:5.1f}%  {rate:.0f}/s"
        if self.tty:
            self.stream.write("\r" + line)
        elif done in (0, total) or time.monotonic() - self._last_line >= 2.0:
            self.stream.write(line + "\n")
            self._last_line = time.monotonic()
        self.stream.flush()

    def finish(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _embedder(args: argparse.Namespace) -> Embedder:
    settings = get_settings()
    if args.embedder:
        settings = settings.model_copy(update={"embedder": args.embedder})
    if args.model:
        settings = settings.model_copy(update={"embedding_model": args.model})
    return embedder_from_settings(settings)


async def cmd_reindex(args: argparse.Namespace, cli: Cli) -> int:
    user: str | None = args.user or os.environ.get("AGENT_MEMORY_USER")
    if args.all_users:
        if args.user:
            raise UsageError("pass either --user or --all-users, not both")
        user = None
    elif not user:
        raise UsageError("no user given: pass --user NAME, or --all-users to index everyone")
    embedder = _embedder(args)
    if not embedder.enabled:
        raise UsageError(
            "no embedder is configured: set AGENT_MEMORY_EMBEDDER=local (or openai) or pass --embedder local"
        )
    store = await MemoryStore.open(embedder=embedder)
    try:
        service = store.embeddings
        if service is None or not service.available:
            cli.error("this database has no pgvector extension: there are no vectors to build; search stays lexical")
            return EXIT_USAGE
        try:
            await embedder.embed(["reindex probe"])  # a missing model or a dead endpoint fails once, up front
        except EmbeddingError as exc:
            raise UsageError(f"embedding failed: {exc}") from exc
        bar = None if (cli.json or args.quiet) else ProgressBar()
        try:
            report = await store.reindex(user_id=user, batch_size=args.batch_size, prune=args.prune, progress=bar)
        except EmbeddingError as exc:
            raise UsageError(f"embedding failed: {exc}") from exc
        finally:
            if bar is not None:
                bar.finish()
        text = (
            f"embedded {report.embedded} memories with {report.model}"
            + (f", {report.failed} failed (run reindex again)" if report.failed else "")
            + (f", pruned {report.pruned} vectors of other models" if args.prune else "")
        )
        cli.emit(report.model_dump(), text)
        return EXIT_OK if report.failed == 0 else EXIT_USAGE
    finally:
        await store.close()


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``reindex`` to the ``agent-memory`` command."""
    p = sub.add_parser("reindex", help="embed memories that have no current vector for the configured embedder")
    _common(p)
    p.add_argument("--all-users", action="store_true", help="index every user's memories")
    p.add_argument("--embedder", choices=["local", "openai"], help="override AGENT_MEMORY_EMBEDDER")
    p.add_argument("--model", help="override AGENT_MEMORY_EMBEDDING_MODEL")
    p.add_argument("--batch-size", type=int, default=64, help="memories per model call (default 64)")
    p.add_argument("--prune", action="store_true", help="delete vectors of other models/dimensions")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.set_defaults(handler=cmd_reindex)
