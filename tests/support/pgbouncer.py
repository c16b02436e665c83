"""Debian's PgBouncer in transaction mode in front of the test server, on a free port (skips when not installed)."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from support.servers import free_port

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
MISSING = "PgBouncer tests need Debian's pgbouncer (apt-get install pgbouncer; .ci/run does it)"


@contextmanager
def running_pgbouncer(server_url: str, *, server_pool_size: int = 2) -> Iterator[str]:
    """Start PgBouncer (transaction pooling, ``server_pool_size`` server connections) in front of the server of
    ``server_url``; yield a URL of the same database through it; stop it on exit."""
    url = urlsplit(server_url)
    user, password = unquote(url.username or "postgres"), unquote(url.password or "")
    query = dict(parse_qsl(url.query))
    host = query.get("host") or url.hostname or "127.0.0.1"
    run_as = "nobody"  # pgbouncer refuses to run as root
    if host.startswith("/"):  # a socket directory (the embedded server's): run as its owner, who may enter it
        host_line = f"host={host}" + (f" port={query['port']}" if "port" in query else "")
        run_as = pwd.getpwuid(os.stat(host).st_uid).pw_name
    else:
        host_line = f"host={host} port={url.port or 5432}"
    port = free_port()
    work = Path(tempfile.mkdtemp(prefix="am-pgbouncer-"))
    work.chmod(0o777)  # pgbouncer runs as another OS user (see run_as) and writes its log here
    (work / "userlist.txt").write_text(f'"{user}" ""\n')
    (work / "pgbouncer.ini").write_text(
        f"""[databases]
* = {host_line} user={user} password={password}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {work / "userlist.txt"}
pool_mode = transaction
default_pool_size = {server_pool_size}
max_client_conn = 500
logfile = {work / "pgbouncer.log"}
"""
    )
    for f in work.iterdir():
        f.chmod(0o644)
    command = [PGBOUNCER, str(work / "pgbouncer.ini")]
    if os.geteuid() == 0:
        command[1:1] = ["-u", run_as]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:  # listening is not an event we can wait on
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                log = (work / "pgbouncer.log").read_text() if (work / "pgbouncer.log").exists() else ""
                raise RuntimeError(f"pgbouncer did not start: {proc.stdout.read() if proc.stdout else ''} {log}")
            time.sleep(0.05)
        yield urlunsplit(url._replace(netloc=f"{user}@127.0.0.1:{port}", query=""))
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)
