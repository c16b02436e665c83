"""Command outputs for the synthetic held-out set: each generator writes one realistic output for a profile.

A generator returns an ``Out``: the description an agent would write, the content, and the questions it can
answer: ``exact`` (names the distinctive identifier ``token``), ``para`` (the same ask in other words; ``para_key``
says what it depends on, so it is only used when no other memory shares it) and, for a long output whose error
sits near its end, ``buried``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from _synthetic_vocab import COMPONENTS, CRATES, GO_MODS, NOUNS, TABLES, VERBS, Profile, hexid, version


@dataclass
class Out:
    description: str
    content: str
    exact: str
    token: str
    para: str
    para_key: tuple[str, ...]
    buried: str | None = None


def _fill(
    u: Profile, long: bool, head: list[str], filler: Callable[[int], str], err: list[str], tail: list[str]
) -> tuple[str, bool]:
    """Head, filler lines, the error block, a short tail. Long: 800-2,000 lines with the error in the last 6%."""
    total = u.rng.randint(800, 2000) if long else u.rng.randint(20, 220)
    n = max(3, total - len(head) - len(err) - len(tail))
    return "\n".join(head + [filler(i) for i in range(n)] + err + tail), long


def pytest_run(u: Profile, long: bool) -> Out:
    r, p = u.rng, u.proj("py")
    mod, noun, verb = (
        r.choice(["api", "core", "billing", "workers", "sync", "models"]),
        r.choice(NOUNS),
        r.choice(VERBS),
    )
    test = (
        f"test_{noun}_{verb}_{r.choice(['twice', 'on_empty', 'after_timeout', 'with_unicode', 'per_tenant', 'in_utc'])}"
    )
    path = f"{mod}/tests/test_{noun}s.py"
    excs = [
        ("AssertionError", f"assert {r.choice([404, 409, 500, 422])} == {r.choice([200, 201, 204])}", "a wrong status"),
        ("KeyError", f"'{noun}_id'", "a missing key"),
        (
            "sqlalchemy.exc.IntegrityError",
            f'duplicate key value violates unique constraint "{r.choice(TABLES)}_pkey"',
            "a duplicate key violation",
        ),
        (
            "ConnectionRefusedError",
            f"[Errno 111] Connect call failed ('{u.ip()}', {r.choice([5432, 6379, 5672])})",
            "a refused connection",
        ),
        (
            "TypeError",
            f"unsupported operand type(s) for +: 'NoneType' and '{r.choice(['int', 'Decimal', 'str'])}'",
            "a None added to a number",
        ),
    ]
    exc, msg, plain = r.choice(excs)
    names = [f"{mod}/tests/test_{r.choice(NOUNS)}s.py::test_{r.choice(NOUNS)}_{r.choice(VERBS)}" for _ in range(40)]
    head = [
        "============================= test session starts ==============================",
        f"platform linux -- Python 3.{r.randint(10, 12)}.{r.randint(1, 9)}, pytest-{version(r, (7, 8))}, pluggy-1.5.0",
        f"rootdir: /home/{u.person.lower()}/src/{p.name}",
        "configfile: pyproject.toml",
        f"plugins: asyncio-0.23.{r.randint(2, 8)}, cov-5.0.0, xdist-3.6.1",
        f"collected {r.randint(120, 900)} items",
        "",
    ]
    err = [
        "",
        "=================================== FAILURES ===================================",
        f"___________________________ {test} ___________________________",
        "",
        f"    def {test}({r.choice(['client', 'db_session', 'tmp_path', 'settings'])}):",
        f"        result = {noun}_service.{verb.rstrip('s')}(payload)",
        ">       assert result.ok",
        f"{path}:{r.randint(20, 400)}: ",
        f"{'_' * 60}",
        f"{p.name.replace('-', '_')}/{mod}/{noun}.py:{r.randint(30, 600)}: in {verb.rstrip('s')}",
        f"    raise {exc.split('.')[-1]}({msg!r})",
        f"E   {exc}: {msg}",
        "",
        "=========================== short test summary info ============================",
        f"FAILED {path}::{test} - {exc}: {msg}",
    ]
    tail = [f"==== 1 failed, {r.randint(100, 880)} passed, {r.randint(0, 9)} skipped in {r.uniform(4, 300):.2f}s ===="]
    content, _ = _fill(u, long, head, lambda i: f"{r.choice(names)} PASSED{'':>20}[{min(99, i // 9):>3}%]", err, tail)
    why = r.choice(["after refactor", "on main", "before release", "with -x", "after rebase", "in CI container"])
    desc = r.choice(
        [
            f"pytest run of {mod}/tests after {why}",
            f"pytest -v {p.name} ({why})",
            f"{p.name} test suite {why}",
            f"ran the {mod} tests in {p.name}",
        ]
    )
    return Out(
        desc,
        content,
        r.choice(
            [f"{test} failed with {exc.split('.')[-1]}", f"why does {test} fail", f"{exc.split('.')[-1]} in {test}"]
        ),
        test,
        f"which check broke in the {p.gloss} suite, the one about {plain}?",
        ("pytest", p.name, plain),
        f"which test hit {plain} at the bottom of the verbose {p.name} test log?" if long else None,
    )


def jest_run(u: Profile, long: bool) -> Out:
    r, p = u.rng, u.proj("ts")
    comp = r.choice(COMPONENTS)
    behav = r.choice(
        [
            "renders the total",
            "disables submit while loading",
            "shows an empty state",
            "formats the date",
            "debounces input",
            "keeps focus after close",
            "sorts by price",
        ]
    )
    exp, got = r.randint(1, 40), r.randint(41, 99)
    head = [f"> {p.name}@{version(r, (1, 4))} test", "> jest --ci --verbose", ""]
    err = [
        f"FAIL src/components/{comp}/{comp}.test.tsx",
        f"  ● {comp} › {behav}",
        "",
        "    expect(received).toBe(expected) // Object.is equality",
        "",
        f"    Expected: {exp}",
        f"    Received: {got}",
        "",
        f"      at Object.<anonymous> (src/components/{comp}/{comp}.test.tsx:{r.randint(12, 140)}:{r.randint(5, 40)})",
    ]
    tail = [
        f"Tests:       1 failed, {r.randint(60, 700)} passed, {r.randint(61, 701)} total",
        "Snapshots:   0 total",
        f"Time:        {r.uniform(3, 90):.3f} s",
        "Ran all test suites.",
    ]
    content, _ = _fill(
        u,
        long,
        head,
        lambda i: (
            f"PASS src/{r.choice(['utils', 'hooks', 'components'])}/{r.choice(COMPONENTS)}.test.tsx "
            f"({r.uniform(0.2, 4):.1f} s)"
            if i % 4 == 0
            else f"  ✓ {r.choice(NOUNS)} {r.choice(VERBS)} ({r.randint(1, 90)} ms)"
        ),
        err,
        tail,
    )
    desc = r.choice(
        [
            f"jest run in {p.name} after UI change",
            f"npm test for {p.name}",
            f"{p.name} jest --ci output",
            f"frontend tests ({p.name})",
        ]
    )
    return Out(
        desc,
        content,
        f"{comp} › {behav} expected {exp} received {got}",
        f"{comp} › {behav}",
        f"which UI test of the {p.gloss} got a different number than it wanted?",
        ("jest", p.name),
        f"which {comp} test failed at the end of the long jest log of {p.name}?" if long else None,
    )


def pip_install(u: Profile, long: bool) -> Out:
    r, p = u.rng, u.proj("py")
    pkgs = list(u.py.items())
    bad, badv = r.choice(pkgs)[0], version(r, (6, 9))
    kind = r.choice(["missing", "wheel", "conflict"])
    if kind == "missing":
        err = [
            f"ERROR: Could not find a version that satisfies the requirement {bad}=={badv} (from versions: "
            + ", ".join(version(r, (0, 5)) for _ in range(6))
            + ")",
            f"ERROR: No matching distribution found for {bad}=={badv}",
        ]
        exact, tok, plain = (
            f"No matching distribution found for {bad}=={badv}",
            f"{bad}=={badv}",
            "a version that does not exist",
        )
    elif kind == "wheel":
        err = [
            f"  Building wheel for {bad} (pyproject.toml) ... error",
            "  error: subprocess-exited-with-error",
            "",
            f"  × Building wheel for {bad} (pyproject.toml) did not run successfully.",
            "  │ exit code: 1",
            f"  ╰─> [{r.randint(40, 300)} lines of output]",
            f"      src/{bad.replace('-', '_')}/_speedups.c:{r.randint(10, 90)}:10: fatal error: Python.h: No "
            "such file or directory",
            "      compilation terminated.",
            f"  ERROR: Failed building wheel for {bad}",
        ]
        exact, tok, plain = (
            f"Failed building wheel for {bad} Python.h",
            f"Failed building wheel for {bad}",
            "a C header missing while compiling",
        )
    else:
        other = r.choice(pkgs)[0]
        err = [
            "ERROR: pip's dependency resolver does not currently take into account all the packages that are "
            "installed.",
            f"{other} {u.py[other]} requires {bad}<{badv}, but you have {bad} {version(r, (10, 12))} which is "
            "incompatible.",
        ]
        exact, tok, plain = (
            f"{other} requires {bad}<{badv} incompatible",
            f"requires {bad}<{badv}",
            "two packages disagreeing",
        )
    head = [
        f"$ pip install -r requirements{r.choice(['', '-dev', '-test'])}.txt",
        "Looking in indexes: https://pypi.org/simple",
    ]

    def filler(i: int) -> str:
        name, v = pkgs[i % len(pkgs)]
        return r.choice(
            [
                f"Collecting {name}=={v}",
                f"  Downloading {name}-{v}-py3-none-any.whl ({r.uniform(0.05, 9):.1f} MB)",
                f"Requirement already satisfied: {name}>={v.split('.')[0]}.0 in ./.venv/lib/python3.11/site-packages",
                f"     ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ {r.uniform(0.1, 9):.1f}/9.0 MB "
                f"{r.uniform(2, 40):.1f} MB/s eta 0:00:00",
            ]
        )

    content, _ = _fill(u, long, head, filler, err, [])
    desc = r.choice(
        [
            f"pip install -r requirements.txt in {p.name}",
            f"installing python deps for {p.name}",
            f"venv setup for {p.name} on {u.host('dev')}",
            f"pip install in {p.name} after bumping pins",
        ]
    )
    return Out(
        desc,
        content,
        exact,
        tok,
        f"setting up the {p.gloss}'s python libraries broke with {plain} — what was it?",
        ("pip", p.name, kind),
        f"what error ended the long pip install log for {p.name}?" if long else None,
    )


def npm_install(u: Profile, long: bool) -> Out:
    r, p = u.rng, u.proj("ts")
    pkgs = list(u.npm.items())
    a, av = r.choice(pkgs)
    kind = r.choice(["eresolve", "e404", "enospc", "audit"])
    if kind == "eresolve":
        peer = r.choice(["react", "typescript", "eslint", "webpack"])
        err = [
            "npm ERR! code ERESOLVE",
            "npm ERR! ERESOLVE unable to resolve dependency tree",
            "npm ERR!",
            f"npm ERR! While resolving: {p.name}@{version(r, (0, 3))}",
            f"npm ERR! Found: {peer}@{version(r, (4, 17))}",
            f'npm ERR! Could not resolve dependency: peer {peer}@"^{r.randint(18, 25)}.0.0" from {a}@{av}',
        ]
        exact, tok, plain = f"ERESOLVE peer {peer} from {a}@{av}", f"{a}@{av}", "a peer dependency clash"
    elif kind == "e404":
        ghost = f"@{u.domain.split('.')[0]}/{r.choice(NOUNS)}-{r.choice(['ui', 'kit', 'utils', 'icons'])}"
        err = [
            "npm ERR! code E404",
            f"npm ERR! 404 Not Found - GET https://registry.npmjs.org/{ghost.replace('/', '%2f')}",
            f"npm ERR! 404  '{ghost}@^{version(r, (1, 3))}' is not in this registry.",
        ]
        exact, tok, plain = f"E404 {ghost} not in this registry", ghost, "a package the registry does not know"
    elif kind == "enospc":
        err = [
            "npm ERR! code ENOSPC",
            "npm ERR! syscall write",
            "npm ERR! errno -28",
            f"npm ERR! nospc ENOSPC: no space left on device, write '/home/ci/.npm/_cacache/tmp/{hexid(r, 8)}'",
        ]
        exact, tok, plain = "ENOSPC npm install", f"_cacache/tmp/{err[-1][-9:-1]}", "the disk filling up"
    else:
        err = [
            f"added {r.randint(300, 2500)} packages, and audited {r.randint(300, 2500)} packages in "
            f"{r.randint(8, 120)}s",
            f"{r.randint(2, 19)} vulnerabilities ({r.randint(1, 5)} moderate, {r.randint(1, 9)} high, 1 critical)",
            f"  {a}  <{av}",
            "  Severity: critical",
            f"  Prototype Pollution in {a} - "
            f"https://github.com/advisories/GHSA-{hexid(r, 4)}-{hexid(r, 4)}-{hexid(r, 4)}",
        ]
        exact, tok, plain = (
            f"critical Prototype Pollution in {a} {err[-1][-19:]}",
            err[-1][-19:],
            "a critical security advisory",
        )
    head = [f"$ npm install{r.choice(['', ' --loglevel http', ' --no-audit', ' --legacy-peer-deps'])}"]

    def filler(i: int) -> str:
        n, _v = pkgs[i % len(pkgs)]
        return r.choice(
            [
                f"npm http fetch GET 200 https://registry.npmjs.org/{n} {r.randint(20, 900)}ms (cache revalidated)",
                f"npm WARN deprecated {r.choice(NOUNS)}-{r.choice(['glob', 'uuid', 'request', 'har'])}@{version(r)}: "
                "this library is no longer supported",
                f"npm timing reifyNode:node_modules/{n} Completed in {r.randint(1, 900)}ms",
            ]
        )

    content, _ = _fill(
        u,
        long,
        head,
        filler,
        err,
        []
        if kind == "audit"
        else [
            "",
            "npm ERR! A complete log of this run can be found in:",
            f"npm ERR!     /root/.npm/_logs/{u.stamp('%Y-%m-%dT%H_%M_%S')}_{r.randint(100, 999)}Z-debug-0.log",
        ],
    )
    desc = r.choice(
        [
            f"npm install in web/ ({p.name})",
            f"npm install for {p.name}",
            f"dependency install log {p.name}",
            f"npm ci in {p.name} after lockfile bump",
        ]
    )
    return Out(
        desc,
        content,
        exact,
        tok,
        f"installing the {p.gloss}'s node modules hit {plain} — details?",
        ("npm", p.name, kind),
        f"what went wrong at the very end of the long npm install of {p.name}?" if long else None,
    )


def docker_build(u: Profile, long: bool) -> Out:
    r, p = u.rng, u.proj()
    base = r.choice(["python:3.11-slim", "node:20-alpine", "debian:bookworm-slim", "rust:1.79", "golang:1.22"])
    kind = r.choice(["apt", "copy", "space", "ok"])
    pkg = r.choice(["libpq5", "libssl3", "libjpeg62-turbo", "curl", "build-essential", "libffi8"])
    bad = f"{r.randint(10, 16)}.{r.randint(1, 9)}-{r.randint(1, 4)}"
    step = r.randint(4, 11)
    errs = {
        "apt": (
            [
                f'#{step} ERROR: process "/bin/sh -c apt-get install -y {pkg}={bad}" did not complete '
                "successfully: exit code: 100",
                f"E: Version '{bad}' for '{pkg}' was not found",
            ],
            f"Version '{bad}' for '{pkg}' was not found",
            f"{pkg}={bad}",
            "a system package version missing",
        ),
        "copy": (
            [
                f"#{step} ERROR: failed to calculate checksum of ref {hexid(r, 12)}: "
                f'"/config/{p.name}.{r.choice(["prod", "stage"])}.yaml": not found'
            ],
            f"checksum /config/{p.name} yaml not found in docker build",
            f"/config/{p.name}.",
            "a config file missing from the context",
        ),
        "space": (
            [f"#{step} ERROR: failed to copy: write /var/lib/docker/tmp/{hexid(r, 10)}: no space left on device"],
            f"docker build no space left on device {p.name}",
            "/var/lib/docker/tmp/",
            "the disk filling up",
        ),
        "ok": (
            [
                f"#{step + 3} exporting layers {r.uniform(2, 30):.1f}s done",
                f"#{step + 3} writing image sha256:{hexid(r, 64)} done",
                f"#{step + 3} naming to registry.{u.domain}/{p.name}:{hexid(r, 7)} done",
            ],
            "",
            "",
            "",
        ),
    }
    err, exact, tok, plain = errs[kind]
    if kind == "ok":
        tag = err[-1].split(":")[-1].split()[0]
        exact, tok, plain = f"image {p.name}:{tag}", f"{p.name}:{tag}", ""
    head = [
        '#0 building with "default" instance using docker driver',
        "#1 [internal] load build definition from Dockerfile",
        f"#2 [internal] load metadata for docker.io/library/{base}",
        f"#3 [base 1/{step + 2}] FROM docker.io/library/{base}@sha256:{hexid(r, 64)}",
    ]
    content, _ = _fill(
        u,
        long,
        head,
        lambda i: r.choice(
            [
                f"#{step} {i * 0.07:.2f} Get:{i} http://deb.debian.org/debian bookworm/main amd64 "
                f"{r.choice(['libc6', 'zlib1g', 'libzstd1', 'perl-base', 'tzdata', pkg])} "
                f"{version(r)} [{r.randint(30, 4000)} kB]",
                f"#{step} {i * 0.07:.2f} Unpacking "
                f"{r.choice(['ca-certificates', 'openssl', 'libexpat1', 'gcc-12'])} ({version(r)}) ...",
                f"#{step} {i * 0.07:.2f} Setting up "
                f"{r.choice(['libgdbm6', 'libsqlite3-0', 'netbase', 'media-types'])} ({version(r)}) ...",
            ]
        ),
        err,
        []
        if kind == "ok"
        else [f"ERROR: failed to solve: process did not complete successfully: exit code: {r.choice([1, 100, 2])}"],
    )
    desc = r.choice(
        [
            f"docker build of {p.name} image",
            f"docker build -t {p.name} . (release branch)",
            f"building {p.name} container on {u.host(None, 'build')}",
            f"image build for {p.name} with {base}",
        ]
    )
    if kind == "ok":
        return Out(
            desc,
            content,
            exact,
            tok,
            f"the container image for the {p.gloss} that built cleanly — which tag?",
            ("docker", p.name, "ok"),
        )
    return Out(
        desc,
        content,
        exact,
        tok,
        f"why couldn't the {p.gloss} container be built ({plain})?",
        ("docker", p.name, kind),
        f"what killed the long docker build of {p.name} at the end?" if long else None,
    )


def compile_errors(u: Profile, long: bool) -> Out:
    r, p = u.rng, u.proj(u.rng.choice(["rsgo", "rsgo", "ts"]))
    line = r.randint(10, 900)
    var = r.choice(["cfg", "conn", "buf", "watcher", "handle", "client"])
    if p.lang == "rs":
        err = [
            f"error[E0382]: borrow of moved value: `{var}`",
            f"  --> src/{r.choice(['sync', 'main', 'watch', 'store'])}.rs:{line}:{r.randint(5, 40)}",
            "   |",
            f"{line - 3} |     let {var} = {var}_from_env()?;",
            f"   |         --- move occurs because `{var}` has type `Config`",
            "error: could not compile due to 1 previous error",
        ]
        head, tok = ["$ cargo build --release"], f"borrow of moved value: `{var}`"
        filler = lambda i: f"   Compiling {r.choice(CRATES)} v{version(r)}"  # noqa: E731
        plain = "a value used after it was given away"
    elif p.lang == "go":
        ident = f"{r.choice(['New', 'Parse', 'Load'])}{r.choice(NOUNS).title()}{r.choice(['Client', 'Opts', 'Store'])}"
        err = [
            f"# {p.name}/internal/{r.choice(NOUNS)}",
            f"./internal/{r.choice(NOUNS)}/{r.choice(NOUNS)}.go:{line}:2: undefined: {ident}",
        ]
        head, tok, plain = ["$ go build ./..."], f"undefined: {ident}", "a name that was never defined"
        filler = lambda i: f"go: downloading {r.choice(GO_MODS)} v{version(r, (1, 9))}"  # noqa: E731
    else:
        code = r.choice(["TS2345", "TS2339", "TS2322"])
        err = [
            f"src/{r.choice(['pages', 'hooks', 'api'])}/{r.choice(COMPONENTS)}.tsx({line},{r.randint(3, 60)}): "
            f"error {code}: "
            f"Property '{r.choice(NOUNS)}Id' does not exist on type '{r.choice(COMPONENTS)}Props'.",
            f"Found 1 error in {line // 2} files.",
        ]
        head, tok, plain = (
            ["$ npx tsc --noEmit -p tsconfig.json"],
            err[0].split(": error")[0],
            "a property missing from a type",
        )
        filler = lambda i: f"[{i:04d}] checked src/{r.choice(['pages', 'lib'])}/{r.choice(COMPONENTS)}.tsx"  # noqa: E731
    content, _ = _fill(u, long, head, filler, err, [])
    desc = r.choice(
        [f"build errors in {p.name}", f"compile of {p.name} failed", f"{p.name} build after dependency bump"]
    )
    return Out(
        desc,
        content,
        tok,
        tok,
        f"the {p.gloss} didn't compile because of {plain} — where?",
        ("compile", p.name),
        f"which compile error ended the long {p.name} build log?" if long else None,
    )
