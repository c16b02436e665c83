"""Vocabulary shared by the command-output makers of the synthetic development set (synth_outputs.py)."""

WORDS = ["refund", "invoice", "batch", "cursor", "window", "session", "token", "quota", "export", "import", "audit",
         "schedule", "report", "queue", "lease", "snapshot", "merge", "rollup", "digest", "archive", "limit", "cache",
         "retry", "stream", "shard", "cutoff", "ledger", "tenant", "profile", "partition"]  # fmt: skip
PYPKGS = [
    "requests",
    "pydantic",
    "sqlalchemy",
    "httpx",
    "numpy",
    "pandas",
    "orjson",
    "structlog",
    "tenacity",
    "click",
    "attrs",
    "boto3",
    "psycopg",
    "alembic",
    "uvicorn",
    "fastapi",
    "celery",
    "lxml",
    "pyyaml",
    "jinja2",
]
CRATES = [
    "serde",
    "tokio",
    "hyper",
    "tracing",
    "anyhow",
    "thiserror",
    "sqlx",
    "axum",
    "bytes",
    "futures",
    "rand",
    "chrono",
    "uuid",
    "clap",
    "reqwest",
    "tower",
    "prost",
    "regex",
    "once_cell",
    "parking_lot",
]
RUST_ERRORS = [
    ("E0382", "borrow of moved value: `{v}`"),
    ("E0499", "cannot borrow `{v}` as mutable more than once"),
    ("E0308", "mismatched types"),
    ("E0425", "cannot find value `{v}` in this scope"),
    ("E0277", "the trait bound `{v}: Send` is not satisfied"),
    ("E0599", "no method named `{v}` found"),
    ("E0716", "temporary value dropped while borrowed"),
    ("E0502", "cannot borrow `{v}` as immutable"),
    ("E0061", "this function takes 2 arguments but 3 were supplied"),
    ("E0433", "failed to resolve: `{v}`"),
]
PY_EXC = [
    "KeyError: '{w}'",
    "AssertionError: assert {a} == {b}",
    "TypeError: unsupported operand type(s)",
    "ValueError: invalid literal for int() with base 10: '{w}'",
    "AttributeError: 'NoneType' object has no attribute '{w}'",
    "ZeroDivisionError: division by zero",
    "IndexError: list index out of range",
]
POD_STATES = ["CrashLoopBackOff", "ImagePullBackOff", "OOMKilled", "Error", "CreateContainerConfigError"]
# Errors hidden deep in long outputs: (line template, query phrase, the same in other words); one use per user.
BURIED = [
    (
        "OSError: [Errno 24] Too many open files: '/var/lib/{p}/spool/{n}.tmp'",
        "too many open files",
        "a shortage of file descriptors",
    ),
    (
        "FATAL:  remaining connection slots are reserved for non-replication superuser connections",
        "remaining connection slots are reserved",
        "postgres refusing new connections because the pool was exhausted",
    ),
    (
        "x509: certificate has expired or is not yet valid: current time 2026-03-{d}T04:12:09Z is after "
        "2026-03-{d}T00:00:00Z",
        "x509 certificate has expired",
        "an expired TLS cert",
    ),
    (
        "java.lang.OutOfMemoryError: GC overhead limit exceeded",
        "GC overhead limit exceeded",
        "the JVM running out of heap",
    ),
    (
        "thread 'tokio-runtime-worker' panicked at 'called `Option::unwrap()` on a `None` value', src/{w}.rs:{n}:17",
        "panicked unwrap on a None value",
        "a rust panic from unwrapping an empty option",
    ),
    ("fatal error: concurrent map writes", "concurrent map writes", "a data race on a go map"),
    ("write /var/lib/{p}/wal/000000{n}: no space left on device", "no space left on device", "the disk filling up"),
    (
        "rpc error: code = DeadlineExceeded desc = context deadline exceeded while calling {w}-service",
        "context deadline exceeded",
        "a grpc call timing out",
    ),
    (
        "ssl.SSLCertVerificationError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self signed "
        "certificate in certificate chain",
        "CERTIFICATE_VERIFY_FAILED self signed certificate",
        "python not trusting a self-signed cert",
    ),
    (
        "Segmentation fault (core dumped) in worker pid {n}",
        "segmentation fault core dumped",
        "a worker crashing with a segfault",
    ),
    (
        "RecursionError: maximum recursion depth exceeded while calling a Python object",
        "maximum recursion depth",
        "infinite recursion in python",
    ),
    (
        "UnicodeDecodeError: 'utf-8' codec can't decode byte 0x{hx} in position {n}: invalid start byte",
        "utf-8 codec can't decode byte",
        "a text encoding problem while decoding input",
    ),
    (
        "ERROR: could not serialize access due to concurrent update (SQLSTATE 40001)",
        "could not serialize access due to concurrent update",
        "a transaction conflict between concurrent writers",
    ),
    (
        "clock skew detected: local time is 412s ahead of the lease holder",
        "clock skew detected",
        "the server clock being out of sync",
    ),
    (
        "Error: read ECONNRESET at TLSWrap.onStreamRead (node:internal/stream_base_commons:217:20)",
        "read ECONNRESET",
        "the peer resetting the tls connection",
    ),
    ("disk quota exceeded for user {w}svc on /data", "disk quota exceeded", "the storage quota on /data being used up"),
    (
        "panic: runtime error: invalid memory address or nil pointer dereference [signal SIGSEGV]",
        "nil pointer dereference",
        "a go panic from a nil pointer",
    ),
    (
        "deadlock detected: Process {n} waits for ShareLock on transaction {n}7; blocked by process 4{n}",
        "deadlock detected ShareLock",
        "two transactions blocking each other in postgres",
    ),
]


# Buried errors that only make sense in one language's output (index into BURIED -> language).
BURIED_LANG = {0: "python", 3: "java", 4: "rust", 5: "go", 8: "python", 10: "python", 11: "python", 14: "node",
               16: "go"}  # fmt: skip
