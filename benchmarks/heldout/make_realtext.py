"""Real-text retrieval sets from this machine: Debian man pages and Python standard-library functions.

Written once, frozen under ``benchmarks/heldout/`` (held-out) and ``benchmarks/dev/`` (development, tuning only);
the ranking is never imported here. A page or function goes to exactly one of the two sets, by a hash of its
name, so tuning on the dev set never sees a held-out document or query.

* man pages: query = the NAME line's one-line summary ("list directory contents"), document = the DESCRIPTION
  section rendered as text (``groff -man -Tutf8``), description = ``name(section)``. The summary never appears in the
  document as stored (the NAME section is not part of it).
* stdlib: query = the first line of a function's docstring ("Return the canonical path of the specified
  filename"), document = the function's source with its docstring removed, description = ``module.qualname``.

    python benchmarks/heldout/make_realtext.py      # rewrites the four files; the manifest test then fails
                                                   # until benchmarks/heldout/MANIFEST.sha256 is regenerated
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import json
import re
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEV = HERE.parent / "dev"
MAN_DIRS = [Path("/usr/share/man/man1"), Path("/usr/share/man/man8")]
STDLIB_MODULES = [
    "argparse", "ast", "asyncio/base_events", "asyncio/streams", "asyncio/tasks", "base64", "bisect", "calendar",
    "cgi", "codecs", "collections/__init__", "configparser", "contextlib", "copy", "csv", "dataclasses", "datetime",
    "difflib", "email/utils", "email/message", "enum", "filecmp", "fnmatch", "fractions", "ftplib", "functools",
    "genericpath", "getopt", "gettext", "glob", "gzip", "hashlib", "heapq", "hmac", "html/__init__", "http/client",
    "http/cookiejar", "imaplib", "inspect", "ipaddress", "json/decoder", "json/encoder", "locale", "logging/__init__",
    "logging/handlers", "mailbox", "mimetypes", "ntpath", "nntplib", "optparse", "os", "pathlib", "pickle",
    "pkgutil", "platform", "plistlib", "poplib", "posixpath", "pprint", "queue", "random", "re/_parser",
    "reprlib", "sched", "secrets", "selectors", "shlex", "shutil", "smtplib", "socket", "socketserver",
    "statistics", "string", "subprocess", "tarfile", "tempfile", "textwrap", "threading", "timeit", "tokenize",
    "trace", "traceback", "types", "typing", "unittest/case", "urllib/parse", "urllib/request", "uuid", "warnings",
    "wave", "weakref", "zipfile", "zipimport",
]  # fmt: skip
MAX_DOC_CHARS = 60_000


def bucket(name: str) -> str:
    """'heldout' for 4 of 5 names, 'dev' for the rest (stable: sha256 of the name)."""
    return "dev" if hashlib.sha256(name.encode()).digest()[0] % 5 == 0 else "heldout"


def _render(path: Path) -> str:
    roff = gzip.decompress(path.read_bytes()).decode("utf-8", "replace")
    proc = subprocess.run(
        ["groff", "-man", "-Tutf8", "-rHY=0", "-rLL=2000n", "-P-cbou"],
        input=roff, capture_output=True, text=True, timeout=20, check=False,
    )  # fmt: skip
    return proc.stdout


def _sections(text: str) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if re.match(r"^[A-Z][A-Z /-]+$", line.strip()) and not line.startswith(" "):
            current = line.strip()
            out[current] = []
        elif current is not None:
            out[current].append(line.strip())
    return {k: re.sub(r"\n{3,}", "\n\n", "\n".join(v)).strip() for k, v in out.items()}


def man_pages() -> dict[str, list[dict[str, Any]]]:
    sets: dict[str, list[dict[str, Any]]] = {"heldout": [], "dev": []}
    seen_summaries: set[str] = set()
    for directory in MAN_DIRS:
        for path in sorted(directory.glob("*.gz")):
            if path.is_symlink():
                continue
            name_sec = path.name[: -len(".gz")]
            name, _, section = name_sec.rpartition(".")
            if not name or not re.fullmatch(r"[a-z0-9][a-z0-9._+-]*", name):
                continue
            # a deterministic ~1/4 sample keeps rendering time and set size reasonable
            # a deterministic ~1/4 sample keeps rendering time and set size reasonable; gcloud's ~10,000 generated
            # pages (near-identical templates) are thinned to ~1/40 so they do not dominate the set
            draw = hashlib.sha256(("sample:" + name).encode()).digest()
            if draw[0] % 4 or (name.startswith("gcloud") and draw[1] % 10):
                continue
            secs = _sections(_render(path))
            name_line = " ".join(secs.get("NAME", "").split())
            desc = secs.get("DESCRIPTION", "")
            m = re.match(r"^(.+?)\s+[-\u2010\u2013\u2014]+\s+(.+)$", name_line)
            if not m or len(desc) < 200:
                continue
            summary = m[2].strip().rstrip(".")
            words = re.findall(r"[A-Za-z]{2,}", summary)
            key = summary.lower()
            if len(words) < 3 or key in seen_summaries or "manual page" in key or len(summary) > 160:
                continue
            seen_summaries.add(key)
            sets[bucket("man:" + name)].append(
                {"id": f"man:{name}.{section}", "description": f"{name}({section})",
                 "content": desc[:MAX_DOC_CHARS], "query": summary}
            )  # fmt: skip
    return sets


def _docstring_node(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.Expr | None:
    first = fn.body[0] if fn.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first
    return None


def stdlib_functions() -> dict[str, list[dict[str, Any]]]:
    root = Path(sysconfig.get_paths()["stdlib"])
    sets: dict[str, list[dict[str, Any]]] = {"heldout": [], "dev": []}
    seen: set[str] = set()
    for mod in STDLIB_MODULES:
        path = root / f"{mod}.py"
        if not path.exists():
            continue
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        tree = ast.parse(source)
        modname = mod.replace("/__init__", "").replace("/", ".")
        stack: list[tuple[ast.AST, str]] = [(tree, "")]
        while stack:
            node, prefix = stack.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.ClassDef):
                    stack.append((child, f"{prefix}{child.name}."))
                elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                    doc = _docstring_node(child)
                    if doc is None or child.name.startswith("__"):
                        continue
                    summary = " ".join(str(doc.value.value).strip().split("\n\n")[0].split())  # type: ignore[attr-defined]
                    summary = summary.split(". ")[0].rstrip(".")
                    body_start, body_end = doc.end_lineno or doc.lineno, child.end_lineno or child.lineno
                    head = lines[child.lineno - 1 : doc.lineno - 1]
                    body = lines[body_start:body_end]
                    code = "\n".join([*head, *body])
                    qual = f"{modname}.{prefix}{child.name}"
                    if len(body) < 4 or len(re.findall(r"[A-Za-z]{2,}", summary)) < 4 or len(summary) > 200:
                        continue
                    if summary.lower() in seen or "-->" in summary or summary.startswith(child.name):
                        continue
                    if hashlib.sha256(("sample:" + qual).encode()).digest()[0] % 2:
                        continue  # a deterministic half: ~600 functions
                    seen.add(summary.lower())
                    sets[bucket("py:" + qual)].append(
                        {"id": f"py:{qual}", "description": f"{modname}.py: {prefix}{child.name}",
                         "content": code, "query": summary}
                    )  # fmt: skip
    return sets


def dump(path: Path, payload: dict[str, Any]) -> None:
    """Deterministic gzip JSON (no timestamp in the header), so the manifest hash is reproducible."""
    raw = json.dumps(payload, ensure_ascii=False, indent=0, sort_keys=True).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh, gzip.GzipFile(fileobj=fh, mode="wb", mtime=0, filename="") as gz:
        gz.write(raw)


def main() -> None:
    man = man_pages()
    py = stdlib_functions()
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    for where, folder in (("heldout", HERE), ("dev", DEV)):
        dump(folder / "manpages.json.gz", {"source": "Debian man pages (man1, man8), summary -> DESCRIPTION",
                                           "docs": man[where]})  # fmt: skip
        dump(folder / "stdlib.json.gz", {"source": f"Python {python} standard library, docstring summary -> "
                                         "function source without its docstring", "docs": py[where]})  # fmt: skip
        print(where, "man", len(man[where]), "stdlib", len(py[where]))


if __name__ == "__main__":
    main()
