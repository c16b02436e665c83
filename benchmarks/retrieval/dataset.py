# ruff: noqa: E501  (the templates are long, realistic command lines)
"""A labelled retrieval set, generated from a fixed seed (no files, no downloads).

Five users each own ~200 memories: realistic command outputs (df, npm, git, pytest, docker, kubectl, psql,
nginx, pip, systemd, dmesg, openssl, terraform...), preferences (some updated later), facts and notes. Every
user gets the same *kinds* of memories with different hosts, ids and values, so other users' rows are
near-duplicate distractors; within a user, many outputs of the same command are distractors too.

Queries come in six categories:

* ``lexical``     words that occur in the target (some with typos: "pasword authentcation faild")
* ``identifier``  commit-hash prefixes, container ids, pod names, ticket ids, memory keys
* ``paraphrase``  the target's meaning in other words ("which machine ran out of storage")
* ``preference``  a stored preference that was never changed
* ``update``      a preference that was changed: only the NEWEST memory counts as relevant
* ``no-answer``   nothing of this user is relevant (incl. topics only OTHER users have): the right answer is []

Example:
    >>> ds = build_dataset(seed=7)
    >>> sorted({q.category for q in ds.queries})[:3]
    ['identifier', 'lexical', 'no-answer']
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, field
from typing import Any

USERS = ["alice", "bob", "carol", "dave", "erin"]
CATEGORIES = ["lexical", "identifier", "paraphrase", "preference", "update", "no-answer"]


@dataclass
class Memory:
    user: str
    tag: str  # stable label used by queries
    content: str
    description: str
    memory_type: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Query:
    user: str
    text: str
    category: str
    relevant: list[str]  # tags; empty for no-answer


@dataclass
class Dataset:
    memories: list[Memory]
    queries: list[Query]


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def _host(rng: random.Random, user_i: int) -> str:
    return f"{rng.choice(['web', 'api', 'build', 'db', 'worker', 'cache', 'edge'])}-{user_i}{rng.randint(0, 9)}{rng.randint(0, 9)}"


def _df(rng: random.Random, host: str, full: bool) -> str:
    rows = ["Filesystem      Size  Used Avail Use% Mounted on", "tmpfs           1.6G  2.1M  1.6G   1% /run"]
    if full:
        rows.append("/dev/sda1        98G   98G     0 100% /")
    else:
        pct = rng.randint(12, 78)
        rows.append(f"/dev/sda1        98G   {98 * pct // 100}G   {98 - 98 * pct // 100}G  {pct}% /")
    rows.append(f"/dev/sdb1       500G  {rng.randint(10, 300)}G  {rng.randint(100, 400)}G  {rng.randint(5, 60)}% /data")
    out = f"$ ssh {host} df -h\n" + "\n".join(rows) + "\n"
    if full:
        out += f"\n$ ssh {host} touch /var/log/app/x\ntouch: cannot touch '/var/log/app/x': No space left on device\n"
    return out


def _npm(rng: random.Random, broken: bool) -> str:
    if broken:
        return (
            "$ npm install\nnpm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree\n"
            "npm ERR! While resolving: dashboard@2.4.0\nnpm ERR! Found: react@18.2.0\n"
            'npm ERR! Could not resolve dependency:\nnpm ERR! peer react@"^17.0.0" from react-dom@17.0.2\n'
            "npm ERR! Fix the upstream dependency conflict, or retry with --force or --legacy-peer-deps\n"
        )
    n = rng.randint(200, 1400)
    return (
        f"$ npm install\nnpm WARN deprecated inflight@1.0.6: This module is not supported\n"
        f"added {n} packages, and audited {n + 1} packages in {rng.randint(3, 40)}s\n"
        f"{rng.randint(50, 200)} packages are looking for funding\nfound 0 vulnerabilities\n"
    )


def _git_log(rng: random.Random, hashes: list[str], messages: list[str]) -> str:
    out = "$ git log -n 3\n"
    for h, m in zip(hashes, messages, strict=True):
        out += (
            f"commit {h}\nAuthor: {rng.choice(['Ana Lima', 'Ben Okafor', 'Chen Wei'])} <dev@example.com>\n"
            f"Date:   Mon Mar {rng.randint(1, 28)} 1{rng.randint(0, 9)}:0{rng.randint(0, 9)} 2025 +0100\n\n    {m}\n\n"
        )
    return out


_COMMIT_MESSAGES = [
    "fix race condition in job scheduler", "bump dependencies", "add retry to webhook sender",
    "refactor billing module", "remove dead feature flag", "speed up CSV export", "update README",
    "handle empty cart in checkout", "add index on orders.created_at", "log request ids",
]  # fmt: skip

_FILLER = [
    ("$ ls -la src/\ntotal 48\ndrwxr-xr-x 6 dev dev 4096 main.py\n-rw-r--r-- 1 dev dev 1822 utils.py\n", "ls -la src/"),
    ("$ git status\nOn branch main\nYour branch is up to date with 'origin/main'.\nnothing to commit\n", "git status"),
    ("$ make build\ncc -O2 -o app main.c util.c\nBuild finished in 4.2s\n", "make build"),
    ("$ python --version\nPython 3.11.7\n", "python --version"),
    ("$ uptime\n 10:42:01 up 31 days,  2:11,  1 user,  load average: 0.21, 0.33, 0.30\n", "uptime"),
    ("$ curl -sI https://example.internal/health\nHTTP/2 200\ncontent-type: application/json\n", "health check"),
    ("$ redis-cli info memory\nused_memory_human:1.21G\nmaxmemory_human:4.00G\n", "redis memory info"),
    ("$ crontab -l\n0 3 * * * /usr/local/bin/backup.sh\n*/5 * * * * /usr/local/bin/poll.sh\n", "crontab -l"),
]


def _user_memories(rng: random.Random, user: str, ui: int) -> tuple[list[Memory], list[Query]]:
    mems: list[Memory] = []
    qs: list[Query] = []

    def add(tag: str, content: str, description: str, mtype: str = "command_output", **meta: Any) -> None:
        mems.append(Memory(user, tag, content, description, mtype, dict(meta)))

    # --- df: one full disk among many healthy ones
    hosts = [_host(rng, ui) for _ in range(12)]
    full_host = hosts[0]
    add("df_full", _df(rng, full_host, True), f"df -h on {full_host}")
    for i, h in enumerate(hosts[1:]):
        add(f"df_{i}", _df(rng, h, False), f"df -h on {h}")
    # --- npm: one broken install among successful ones
    add("npm_broken", _npm(rng, True), "npm install output (exit 1)")
    for i in range(8):
        add(f"npm_{i}", _npm(rng, False), "npm install output")
    # --- git logs with hashes
    commit_hashes: list[str] = []
    for i in range(6):
        hs = [_hex(rng, 40) for _ in range(3)]
        msgs = rng.sample(_COMMIT_MESSAGES, 3)
        commit_hashes.append(hs[1])
        add(f"git_{i}", _git_log(rng, hs, msgs), f"git log -n 3 in repo {rng.choice(['api', 'web', 'infra'])}")
    # --- pytest: one specific failure
    add(
        "pytest_fail",
        "$ pytest -q\n........F.....\n=================================== FAILURES ===================================\n"
        "____________________________ test_refund_rounding _____________________________\n"
        "    def test_refund_rounding():\n>       assert refund(Decimal('10.005')) == Decimal('10.01')\n"
        "E       AssertionError: assert Decimal('10.00') == Decimal('10.01')\n"
        "tests/test_billing.py:88: AssertionError\n1 failed, 13 passed in 2.31s\n",
        "pytest -q (1 failed)",
    )
    for i in range(6):
        add(
            f"pytest_{i}",
            f"$ pytest -q\n{'.' * rng.randint(20, 90)}\n{rng.randint(20, 90)} passed in {rng.randint(1, 30)}.{rng.randint(10, 99)}s\n",
            "pytest -q",
        )
    # --- docker ps: container ids
    containers: list[tuple[str, str]] = []
    for i in range(5):
        lines = ["CONTAINER ID   IMAGE                 STATUS          NAMES"]
        for _ in range(4):
            cid = _hex(rng, 12)
            name = f"{rng.choice(['redis', 'postgres', 'api', 'worker', 'nginx'])}_{rng.randint(1, 9)}"
            lines.append(f"{cid}   {name.split('_')[0]}:latest   Up {rng.randint(1, 50)} hours   {name}")
            containers.append((cid, name))
        add(f"docker_{i}", "$ docker ps\n" + "\n".join(lines) + "\n", f"docker ps on {rng.choice(hosts)}")
    # --- kubectl: one crashlooping payments pod
    crash_pod = f"payments-api-{_hex(rng, 9)}-{''.join(rng.choice(string.ascii_lowercase) for _ in range(5))}"
    pods = "\n".join(
        f"{svc}-{_hex(rng, 9)}-{''.join(rng.choice(string.ascii_lowercase) for _ in range(5))}   1/1     Running   0   {rng.randint(1, 20)}d"
        for svc in ("checkout", "search", "auth")
    )
    add(
        "k8s_crash",
        f"$ kubectl get pods -n prod\nNAME   READY   STATUS   RESTARTS   AGE\n{pods}\n{crash_pod}   0/1     CrashLoopBackOff   {rng.randint(5, 40)}   3h\n",
        "kubectl get pods -n prod",
    )
    for i in range(4):
        pods = "\n".join(
            f"{svc}-{_hex(rng, 9)}-{''.join(rng.choice(string.ascii_lowercase) for _ in range(5))}   1/1     Running   0   {rng.randint(1, 20)}d"
            for svc in ("payments-api", "checkout", "search")
        )
        add(
            f"k8s_{i}",
            f"$ kubectl get pods -n staging\nNAME   READY   STATUS   RESTARTS   AGE\n{pods}\n",
            "kubectl get pods -n staging",
        )
    # --- psql auth failure, nginx upstream timeout, OOM, pip, systemd, certs
    db_host = _host(rng, ui)
    add(
        "psql_auth",
        f'$ psql -h {db_host} -U report_ro analytics\npsql: error: connection to server at "{db_host}" (10.0.{ui}.12), port 5432 failed: FATAL:  password authentication failed for user "report_ro"\n',
        f"psql connect to {db_host}",
    )
    add(
        "nginx_timeout",
        f'$ tail -n 3 /var/log/nginx/error.log\n2025/03/11 09:14:22 [error] 2211#2211: *88121 upstream timed out (110: Connection timed out) while reading response header from upstream, client: 10.2.{ui}.7, server: shop.example.com, request: "GET /api/cart HTTP/1.1", upstream: "http://127.0.0.1:8081/api/cart"\n',
        "nginx error log tail",
    )
    oom_host = _host(rng, ui)
    add(
        "oom",
        f"$ ssh {oom_host} dmesg | tail -n 2\n[2351123.112] Out of memory: Killed process 18231 (java) total-vm:12582912kB, anon-rss:8123456kB\n[2351123.544] oom_reaper: reaped process 18231 (java)\n",
        f"dmesg on {oom_host}",
    )
    add(
        "pip_fail",
        "$ pip install -r requirements.txt\nERROR: Could not find a version that satisfies the requirement torch==1.2.3 (from versions: 2.2.0, 2.3.1)\nERROR: No matching distribution found for torch==1.2.3\n",
        "pip install -r requirements.txt (exit 1)",
    )
    add(
        "cert",
        f"$ openssl s_client -connect shop{ui}.example.com:443 | openssl x509 -noout -enddate\nnotAfter=Mar 19 12:00:00 2025 GMT\n# certificate expires in 5 days\n",
        f"TLS certificate check shop{ui}.example.com",
    )
    for i in range(10):
        svc = rng.choice(["nginx", "postgresql", "redis-server", "cron", "sshd"])
        add(
            f"systemd_{i}",
            f"$ systemctl status {svc}\n● {svc}.service\n   Active: active (running) since Mon 2025-03-0{rng.randint(1, 9)}; {rng.randint(1, 30)} days ago\n",
            f"systemctl status {svc}",
        )
    # --- notes and facts
    ticket = f"OPS-{rng.randint(1000, 9999)}"
    add(
        "note_redis",
        f"Decision ({ticket}): we use Redis for the session cache instead of Memcached, because we need persistence across restarts.",
        "architecture decision: session cache",
        "note",
    )
    add(
        "note_freeze",
        "Release policy: deployment freeze from December 20 to January 3; only hotfixes approved by the on-call lead may ship.",
        "release policy",
        "note",
    )
    add(
        "note_ratelimit",
        "Partner API tier is limited to 600 requests per minute; bursts above that get HTTP 429.",
        "partner API limits",
        "note",
    )
    add(
        "fact_staging",
        f"The staging database is staging-db-0{ui}.internal on port 5433.",
        "staging database location",
        "user_fact",
    )
    add("fact_oncall", f"I am on call the week of March {10 + ui}.", "on-call week", "user_fact")
    # --- preferences; some are updated later (same subject, newer memory)
    editor = ["vim", "emacs", "VS Code", "neovim", "helix"][ui]
    shell = ["zsh", "fish", "bash", "zsh", "nushell"][ui]
    add("pref_editor", f"I use {editor} as my editor.", "editor preference", "user_preference")
    add("pref_shell", f"My shell is {shell}.", "shell preference", "user_preference")
    add(
        "pref_commits",
        "Write commit messages in Conventional Commits style (feat:, fix:, chore:).",
        "commit message style",
        "user_preference",
    )
    add(
        "pref_tests",
        "Use pytest with plain asserts; no unittest classes.",
        "test framework preference",
        "user_preference",
    )
    add("pref_indent_old", "Indent code with tabs.", "indentation preference", "user_preference")
    add("pref_tz_old", "My timezone is Europe/Berlin.", "timezone", "user_preference")
    add("pref_pm_old", "Use yarn as the JavaScript package manager.", "package manager preference", "user_preference")
    # --- filler, then the updates (so they are newer than everything else)
    for i in range(120):
        text, desc = rng.choice(_FILLER)
        add(
            f"filler_{i}",
            text.replace("10:42:01", f"1{rng.randint(0, 9)}:{rng.randint(10, 59)}:0{rng.randint(0, 9)}"),
            desc,
        )
    add(
        "pref_indent_new",
        "Indent code with 4 spaces, not tabs (changed my mind).",
        "indentation preference",
        "user_preference",
    )
    add("pref_tz_new", "I moved: my timezone is now America/New_York.", "timezone", "user_preference")
    add(
        "pref_pm_new",
        "Use pnpm as the JavaScript package manager from now on.",
        "package manager preference",
        "user_preference",
    )
    # only some users have these topics: for the others they are no-answer queries
    if ui % 2 == 0:
        add(
            "kafka",
            f"$ kafka-consumer-groups --describe --group billing\nGROUP    TOPIC     PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG\nbilling  invoices  0          {rng.randint(1000, 9000)}            {rng.randint(9000, 20000)}           {rng.randint(100, 9000)}\n",
            "kafka consumer group lag",
        )
    else:
        add(
            "terraform",
            "$ terraform plan\nPlan: 3 to add, 1 to change, 0 to destroy.\n  # aws_vpc.main will be updated in-place\n",
            "terraform plan for the vpc module",
        )

    # ---------------------------------------------------------------- queries
    Q = lambda text, cat, *rel: qs.append(Query(user, text, cat, list(rel)))  # noqa: E731
    Q(f"df {full_host}", "lexical", "df_full")
    Q("npm ERESOLVE unable to resolve dependency tree", "lexical", "npm_broken")
    Q("test_refund_rounding AssertionError", "lexical", "pytest_fail")
    Q("upstream timed out while reading response header", "lexical", "nginx_timeout")
    Q("password authentication failed for report_ro", "lexical", "psql_auth")
    Q("pasword authentcation faild", "lexical", "psql_auth")
    Q("no space left on devce", "lexical", "df_full")
    Q("Could not find a version that satisfies the requirement torch", "lexical", "pip_fail")
    Q(commit_hashes[2][:8], "identifier", "git_2")
    Q(commit_hashes[4][:10], "identifier", "git_4")
    cid, _name = containers[7]
    Q(cid, "identifier", f"docker_{7 // 4}")
    Q(crash_pod, "identifier", "k8s_crash")
    Q(ticket, "identifier", "note_redis")
    Q(f"staging-db-0{ui}.internal", "identifier", "fact_staging")
    Q("which machine ran out of storage space", "paraphrase", "df_full")
    Q(
        "the JavaScript dependency installation broke because of incompatible package versions",
        "paraphrase",
        "npm_broken",
    )
    Q("the web server did not get a reply from the backend service in time", "paraphrase", "nginx_timeout")
    Q("a Java process was terminated for using too much RAM", "paraphrase", "oom")
    Q("what did we choose for caching user sessions", "paraphrase", "note_redis")
    Q("when are we not allowed to ship to production", "paraphrase", "note_freeze")
    Q("which pod of the payments service keeps restarting", "paraphrase", "k8s_crash")
    Q("a unit test about refunds failed", "paraphrase", "pytest_fail")
    # harder ones: fewer shared words, values buried in the content
    Q("CrashLoopBackOff", "lexical", "k8s_crash")
    Q("HTTP 429 too many requests for partners", "lexical", "note_ratelimit")
    Q(f"10.0.{ui}.12", "identifier", "psql_auth")
    Q("react-dom@17.0.2", "identifier", "npm_broken")
    Q("the database rejected my login credentials", "paraphrase", "psql_auth")
    Q("which TLS certificate is about to expire", "paraphrase", "cert")
    Q("the Python requirements could not be installed because that version does not exist", "paraphrase", "pip_fail")
    Q("how many calls per minute may a partner make", "paraphrase", "note_ratelimit")
    Q("when is my on-call duty", "paraphrase", "fact_oncall")
    Q("where does the staging database run", "paraphrase", "fact_staging")
    Q("what text editor do I like", "preference", "pref_editor")
    Q("which shell do I use", "preference", "pref_shell")
    Q("how should I format commit messages", "preference", "pref_commits")
    Q("preferred testing framework", "preference", "pref_tests")
    Q("tabs or spaces for indentation?", "update", "pref_indent_new")
    Q("what is my timezone", "update", "pref_tz_new")
    Q("which JavaScript package manager should I use", "update", "pref_pm_new")
    Q("best sourdough bread recipe", "no-answer")
    Q("who won the football world cup in 2010", "no-answer")
    Q("hiking trails in Patagonia", "no-answer")
    Q("quarterly marketing budget spreadsheet", "no-answer")
    if ui % 2 == 0:
        Q("terraform plan for the vpc module", "no-answer")  # only odd users have it
    else:
        Q("kafka consumer group lag for billing", "no-answer")  # only even users have it
    return mems, qs


def build_dataset(seed: int = 7) -> Dataset:
    rng = random.Random(seed)
    memories: list[Memory] = []
    queries: list[Query] = []
    per_user = []
    for ui, user in enumerate(USERS):
        mems, qs = _user_memories(random.Random(rng.randint(0, 2**31)), user, ui)
        per_user.append(mems)
        queries += qs
    # Interleave users' writes (as a shared server sees them), keeping each user's own order.
    while any(per_user):
        for mems in per_user:
            if mems:
                memories.append(mems.pop(0))
    return Dataset(memories, queries)
