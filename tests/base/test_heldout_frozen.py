"""The held-out evaluation sets are frozen: the ranking may never be tuned on them, and they never change."""

from __future__ import annotations

import hashlib
from pathlib import Path

HELDOUT = Path(__file__).resolve().parents[2] / "benchmarks" / "heldout"


def test_every_held_out_file_matches_its_frozen_checksum() -> None:
    lines = (HELDOUT / "MANIFEST.sha256").read_text(encoding="utf-8").split("\n")
    frozen = dict(reversed(line.split("  ", 1)) for line in lines if line.strip())
    assert frozen, "MANIFEST.sha256 lists no file"
    for name, digest in frozen.items():
        assert hashlib.sha256((HELDOUT / name).read_bytes()).hexdigest() == digest, f"{name} changed"


def test_every_held_out_set_is_in_the_manifest() -> None:
    listed = {line.split("  ", 1)[1] for line in (HELDOUT / "MANIFEST.sha256").read_text(encoding="utf-8").split("\n")
              if line.strip()}  # fmt: skip
    assert {p.name for p in HELDOUT.glob("*.json.gz")} <= listed
    assert "synthetic.json.gz" in listed
