"""Command outputs for the synthetic held-out set, part 2: pod lists, SQL, git, disk, logs, CI, terraform.

See _synthetic_outputs.py for what a generator returns; ``KINDS`` lists every generator with its weight.
"""

from __future__ import annotations

from collections.abc import Callable

from _synthetic_outputs import Out, _fill, compile_errors, docker_build, jest_run, npm_install, pip_install, pytest_run
from _synthetic_vocab import COMPONENTS, NOUNS, TABLES, VERBS, Profile, hexid, podsuffix


def kubectl_pods(u: Profile, long: bool) -> Out:
    r, p = u.rng, u.proj()
    ns = p.name.split("-")[0]
    status, restarts, plain = r.choice(
        [
            ("CrashLoopBackOff", r.randint(5, 90), "kept restarting"),
            ("OOMKilled", r.randint(1, 9), "ran out of memory"),
            ("ImagePullBackOff", 0, "could not fetch its image"),
            ("Pending", 0, "never got scheduled"),
        ]
    )
    bad = f"{p.name}-{r.choice(['worker', 'api', 'cron', 'consumer'])}-{podsuffix(r)}"
    head = [
        f"$ kubectl get pods -n {ns}" + (" -o wide" if r.random() < 0.3 else ""),
        "NAME                                     READY   STATUS    RESTARTS      AGE",
    ]

    def row(i: int) -> str:
        name = f"{p.name}-{r.choice(['api', 'worker', 'web', 'consumer', 'beat'])}-{podsuffix(r)}"
        return f"{name}   1/1     Running   {r.randint(0, 3)}   {r.randint(1, 40)}d"

    total = u.rng.randint(700, 1400) if long else u.rng.randint(18, 60)
    rows = [row(i) for i in range(total)]
    at = len(rows) - r.randint(1, max(1, total // 20)) if long else r.randrange(len(rows))
    rows.insert(at, f"{bad}   0/1     {status}   {restarts} ({r.randint(1, 59)}m ago)   {r.randint(1, 20)}h")
    desc = r.choice(
        [
            f"kubectl get pods -n {ns}",
            f"pods in {ns} namespace ({r.choice(['prod', 'staging'])})",
            f"cluster pod status for {p.name}",
            f"kubectl get pods -A | grep {ns}",
        ]
    )
    return Out(
        desc,
        "\n".join(head + rows),
        f"{bad} {status}",
        bad,
        f"which {p.gloss} container {plain}?",
        ("kubectl", p.name, status),
        f"which {ns} pod shows {status} in the long pod listing?" if long else None,
    )


def psql_query(u: Profile, long: bool) -> Out:
    r, p = u.rng, u.proj("py")
    table, db = r.choice(TABLES), f"{p.name.split('-')[0]}_{r.choice(['prod', 'staging'])}"
    if r.random() < 0.35:
        kind, plain = r.choice(
            [
                ("deadlock detected", "two transactions blocking each other"),
                (f'relation "{table}_archive" does not exist', "a table that is not there"),
                (f"permission denied for table {table}", "missing rights on a table"),
            ]
        )
        listing = (
            [
                f"{db}=> \\dt",
                "          List of relations",
                " Schema |     Name      | Type  | Owner",
                "--------+---------------+-------+-------",
            ]
            + [f" public | {t:<13} | table | {p.name.split('-')[0]}_rw" for t in TABLES]
            + [f"({len(TABLES)} rows)", ""]
        )
        content = "\n".join(
            [
                *listing,
                f"{db}=> {r.choice(['UPDATE', 'DELETE FROM', 'SELECT * FROM'])} {table} ...;",
                f"ERROR:  {kind}",
                f"DETAIL:  Process {r.randint(1000, 99999)} waits for ShareLock on transaction "
                f"{r.randint(10**6, 10**7)}."
                if kind.startswith("dead")
                else f"LINE 1: ... {table} ...",
                f"{db}=> ",
            ]
        )
        return Out(
            f"psql on {db}: {table} query failed",
            content,
            f"{kind} {db}",
            kind if "deadlock" not in kind else db,
            f"the database complained about {plain} when I touched {table} — which db?",
            ("psql-err", table, kind),
        )
    cols = ["id", "status", "created_at", r.choice(["amount_cents", "retries", "bytes", "owner"])]
    statuses = ["pending", "failed", "done", "stuck", "cancelled"]
    rid = r.randint(10**5, 10**7)
    n = r.randint(600, 1500) if long else r.randint(16, 80)
    rows = [
        f" {rid + i * r.randint(1, 9):>8} | {r.choice(statuses):<9} | 2025-0{r.randint(1, 9)}-1{r.randint(0, 9)} "
        f"0{r.randint(0, 9)}:{r.randint(10, 59)} | {r.randint(0, 99999)}"
        for i in range(n)
    ]
    content = "\n".join(
        [
            f"{db}=> SELECT {', '.join(cols)} FROM {table} WHERE status <> 'done' ORDER BY id;",
            " " + " | ".join(cols),
            "-" * 60,
            *rows,
            f"({n} rows)",
        ]
    )
    first = rows[0].split("|")[0].strip()
    return Out(
        r.choice([f"psql: open {table} in {db}", f"query {table} not done ({db})", f"{table} backlog in {db}"]),
        content,
        f"{table} row {first} in {db}",
        f" {first} |",
        f"how many {table.replace('_', ' ')} were not finished on the {p.gloss} database?",
        ("psql", table, db),
    )


def git_log(u: Profile, long: bool) -> Out:
    r, p = u.rng, u.proj()
    topics = [
        "rate limiter",
        "retry backoff",
        "session cookie",
        "CSV export",
        "feature flag cleanup",
        "pagination",
        "timezone handling",
        "S3 upload",
        "webhook signature",
        "dark mode",
        "healthcheck",
    ]
    topic = r.choice(topics)
    who = r.choice(u.people)
    sha = hexid(r, 40)
    entries = []
    for _ in range(r.randint(20, 60)):
        entries.append(
            f"{hexid(r, 7)} {r.choice(['fix', 'feat', 'chore', 'refactor'])}: {r.choice(VERBS)} {r.choice(NOUNS)} "
            f"{r.choice(['handling', 'tests', 'docs', 'types', 'logging'])} ({r.choice(u.people).split()[0]})"
        )
    entries.insert(
        r.randrange(len(entries) + 1), f'{sha[:7]} Revert "{topic}": broke {r.choice(NOUNS)}s ({who.split()[0]})'
    )
    content = "\n".join([f"$ git log --oneline -n {len(entries)}", *entries])
    desc = r.choice(
        [f"git log of {p.name} main", f"recent commits on {p.name}", f"git log --oneline {p.name} before deploy"]
    )
    return Out(
        desc,
        content,
        f"commit {sha[:7]}",
        sha[:7],
        f"who undid the {topic} change in the {p.gloss}?",
        ("git", p.name, topic),
    )


def disk_usage(u: Profile, long: bool) -> Out:
    r = u.rng
    host = u.host()
    mount = r.choice(["/var/lib/docker", "/var/lib/postgresql", "/srv/backups", "/var/log", "/home"])
    pct = r.randint(94, 100)
    fs = [
        ("/dev/root", "/"),
        ("tmpfs", "/run"),
        ("/dev/nvme0n1p1", "/boot/efi"),
        (f"/dev/nvme{r.randint(1, 3)}n1", mount),
    ]
    lines = [f"$ df -h  # on {host}", "Filesystem      Size  Used Avail Use% Mounted on"]
    for dev, mnt in fs:
        use = pct if mnt == mount else r.randint(3, 60)
        lines.append(f"{dev:<15} {r.randint(20, 900)}G  {r.randint(1, 800)}G  {r.randint(1, 200)}G  {use:>3}% {mnt}")
    lines += ["", f"$ sudo du -sh {mount}/* | sort -h | tail"] + [
        f"{r.randint(1, 900)}{r.choice('MG')}\t{mount}/{r.choice(NOUNS)}-{hexid(r, 4)}"
        for _ in range(r.randint(14, 40))
    ]
    return Out(
        r.choice([f"df/du on {host}", f"disk usage {host}", f"disk almost full on {host.split('.')[0]}"]),
        "\n".join(lines),
        f"{mount} {pct}% on {host}",
        host,
        f"which folder was eating the storage on the {host.split('-')[1]} {host.split('-')[0]} box?",
        ("df", host.split("-")[0], host.split("-")[1]),
    )


def nginx_log(u: Profile, long: bool) -> Out:
    r = u.rng
    host, up = u.host(None, "edge"), f"{u.ip()}:{r.choice([8080, 8000, 3000, 9090])}"
    path = f"/api/v{r.randint(1, 3)}/{r.choice(NOUNS)}s/{r.choice(['export', 'bulk', 'search', 'sync'])}"
    kind, msg, plain = r.choice(
        [
            (
                "timeout",
                "upstream timed out (110: Connection timed out) while reading response header from upstream",
                "the backend took too long",
            ),
            (
                "refused",
                "connect() failed (111: Connection refused) while connecting to upstream",
                "the backend refused connections",
            ),
            (
                "body",
                f"client intended to send too large body: {r.randint(2, 90) * 1048576} bytes",
                "an upload that was too big",
            ),
        ]
    )
    err = [
        f"{u.stamp('%Y/%m/%d %H:%M:%S')} [error] {r.randint(100, 9999)}#0: *{r.randint(10**4, 10**7)} {msg}, client: "
        f"{r.randint(1, 223)}.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}, server: {host}, request: "
        f'"POST {path} HTTP/1.1", upstream: "http://{up}{path}"'
    ]
    content, _ = _fill(
        u,
        long,
        [f"$ sudo tail -n 2000 /var/log/nginx/error.log  # {host}"],
        lambda i: (
            f"{u.stamp('%Y/%m/%d %H:%M:%S')} [notice] {r.randint(100, 9999)}#0: signal process started"
            if i % 40 == 0
            else f"{u.stamp('%Y/%m/%d %H:%M:%S')} [warn] {r.randint(100, 9999)}#0: *{r.randint(10**4, 10**7)} "
            "an upstream response is buffered to a temporary file /var/cache/nginx/proxy_temp/"
            f"{r.randint(0, 9)}/{r.randint(10, 99)}/{r.randint(10**6, 10**7)}"
        ),
        err,
        [],
    )
    return Out(
        r.choice([f"nginx error log on {host}", f"tail of nginx errors {host.split('.')[0]}", f"502s on {host}"]),
        content,
        f"{path} upstream {up}",
        up,
        f"why did calls to the {path.split('/')[3]} endpoint fail at the proxy — {plain}?",
        ("nginx", path.split("/")[3], kind),
        f"what was the one real error after all the buffering warnings in the {host} nginx log?" if long else None,
    )


def journal(u: Profile, long: bool) -> Out:
    r, p = u.rng, u.proj()
    host, svc = u.host(), f"{p.name}-{r.choice(['worker', 'api', 'beat', 'sync'])}"
    pid = r.randint(1000, 60000)
    kind, err, plain = r.choice(
        [
            (
                "oom",
                [
                    f"kernel: Out of memory: Killed process {pid} ({svc.split('-')[0]}) "
                    f"total-vm:{r.randint(10**6, 9 * 10**6)}kB",
                    f"systemd[1]: {svc}.service: Main process exited, code=killed, status=9/KILL",
                ],
                "the kernel killing it for memory",
            ),
            (
                "start",
                [
                    f"systemd[1]: {svc}.service: Start request repeated too quickly.",
                    f"systemd[1]: {svc}.service: Failed with result 'exit-code'.",
                    f"systemd[1]: Failed to start {svc}.service.",
                ],
                "it would not come back up",
            ),
            (
                "perm",
                [
                    f"{svc}[{pid}]: PermissionError: [Errno 13] Permission denied: '/etc/{p.name}/secrets.env'",
                    f"systemd[1]: {svc}.service: Main process exited, code=exited, status=1/FAILURE",
                ],
                "it could not read its secrets",
            ),
        ]
    )
    stamp = u.stamp("%b %d %H:%M:%S")
    err = [f"{stamp} {host.split('.')[0]} {e}" for e in err]
    content, _ = _fill(
        u,
        long,
        [f"$ journalctl -u {svc} --since today"],
        lambda i: (
            f"{stamp} {host.split('.')[0]} {svc}[{pid}]: INFO {r.choice(NOUNS)} {r.choice(VERBS)} "
            f"id={r.randint(1, 10**6)} "
            f"took={r.randint(1, 900)}ms"
        ),
        err,
        [],
    )
    return Out(
        r.choice([f"journalctl -u {svc} on {host}", f"{svc} service logs", f"why {svc} died ({host.split('.')[0]})"]),
        content,
        f"{svc} {err[-1].split(': ', 1)[-1][:40]}",
        svc,
        f"the {p.gloss} background process stopped: {plain}?",
        ("journal", p.name, kind),
        f"how did {svc} end up dead after all those INFO lines?" if long else None,
    )


def ci_log(u: Profile, long: bool) -> Out:
    r, p = u.rng, u.proj()
    job = r.choice(["test", "lint", "build", "e2e", "publish", "migrate-check"])
    run = r.randint(1000, 99999)
    kind, err, plain = r.choice(
        [
            (
                "module",
                [f"ModuleNotFoundError: No module named '{r.choice(['yaml', 'dateutil', 'orjson', 'pytz', 'tomli'])}'"],
                "a python module not installed",
            ),
            (
                "cancel",
                [
                    f"Error: The job running on runner ci-{hexid(r, 6)} has exceeded the maximum execution time of "
                    f"{r.choice([30, 60, 360])} minutes."
                ],
                "the job taking too long",
            ),
            (
                "auth",
                ["fatal: could not read Username for 'https://github.com': No such device or address"],
                "git asking for a password",
            ),
            (
                "snapshot",
                [f"  ✕ {r.choice(COMPONENTS)} matches snapshot ({r.randint(5, 90)} ms)", "  › 1 snapshot failed."],
                "an outdated snapshot",
            ),
        ]
    )
    head = [
        f"Run #{run} · {p.name} · job {job}",
        "Run actions/checkout@v4",
        f"Syncing repository: {u.domain.split('.')[0]}/{p.name}",
        "Run actions/setup-python@v5" if p.lang == "py" else "Run actions/setup-node@v4",
    ]
    content, _ = _fill(
        u,
        long,
        head,
        lambda i: r.choice(
            [
                f"  {r.choice(NOUNS)}/{r.choice(NOUNS)}.{p.lang} ok",
                f"##[debug]Evaluating condition for step: '{r.choice(NOUNS)}'",
                f"  Downloading artifact {r.choice(NOUNS)}-{hexid(r, 6)}.tgz",
                f"  cache hit for key {job}-{hexid(r, 16)}",
            ]
        ),
        err,
        ["Error: Process completed with exit code 1." if kind != "cancel" else "Error: The operation was canceled."],
    )
    return Out(
        r.choice(
            [
                f"CI run #{run} {p.name} {job}",
                f"{job} job failed on {p.name} (run {run})",
                f"GitHub Actions log {p.name} #{run}",
            ]
        ),
        content,
        f"CI run {run} {job}",
        f"#{run}",
        f"why did the {p.gloss}'s automated {job} pipeline go red — {plain}?",
        ("ci", p.name, job, kind),
        f"what broke at the end of the long {job} CI log for {p.name}?" if long else None,
    )


def terraform(u: Profile, long: bool) -> Out:
    r, p = u.rng, u.proj()
    bucket = f"{u.domain.split('.')[0]}-{p.name}-{r.choice(['backups', 'assets', 'logs'])}-{r.randint(10, 99)}"
    add, chg, dst = r.randint(0, 9), r.randint(0, 6), r.randint(0, 3)
    lines = ["$ terraform plan -out plan.tfplan", "Refreshing state..."]
    for _ in range(r.randint(16, 60)):
        lines.append(
            f"{r.choice(['aws_iam_role', 'aws_security_group', 'aws_s3_bucket', 'aws_db_instance'])}."
            f"{r.choice(NOUNS)}: "
            f"Refreshing state... [id={r.choice(['sg-', 'i-', 'db-'])}{hexid(r, 12)}]"
        )
    lines += [
        f"  # aws_s3_bucket.{p.name.split('-')[0]} will be created",
        f'      + bucket = "{bucket}"',
        f"Plan: {add} to add, {chg} to change, {dst} to destroy.",
    ]
    if r.random() < 0.5:
        lines += ["$ terraform apply plan.tfplan", f"Error: creating S3 Bucket ({bucket}): BucketAlreadyExists"]
    return Out(
        r.choice(
            [f"terraform plan for {p.name} infra", f"tf plan/apply {p.name}", f"infra change {p.name} (terraform)"]
        ),
        "\n".join(lines),
        f"terraform bucket {bucket}",
        bucket,
        f"what would the infrastructure change for the {p.gloss} create and remove?",
        ("tf", p.name),
    )


KINDS: list[tuple[Callable[[Profile, bool], Out], int, bool]] = [
    # generator, weight, can be long with a buried error
    (pytest_run, 14, True),
    (jest_run, 8, True),
    (pip_install, 9, True),
    (npm_install, 8, True),
    (docker_build, 9, True),
    (kubectl_pods, 8, True),
    (psql_query, 8, False),
    (git_log, 7, False),
    (disk_usage, 6, False),
    (compile_errors, 7, True),
    (nginx_log, 7, True),
    (journal, 7, True),
    (ci_log, 9, True),
    (terraform, 5, False),
]
