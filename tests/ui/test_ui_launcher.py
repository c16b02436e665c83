"""`agent-memory ui` stops cleanly on Ctrl-C: one graceful shutdown, exit 0, no tracebacks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from support.servers import free_port
from ui_support import add_user, ui_env


def test_ctrl_c_stops_the_ui_without_tracebacks(ui_database: str, tmp_path: Path) -> None:
    env = ui_env(ui_database, tmp_path / "home")
    add_user("kim", "kim-secret-password", env)
    port = free_port()
    ui = subprocess.Popen(
        [sys.executable, "-m", "agent_memory.cli", "ui", "--port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while True:  # polled: another process becoming ready is not an event we can await
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline or ui.poll() is not None:
                    pytest.fail("the UI did not start")
                time.sleep(0.2)
        os.killpg(ui.pid, signal.SIGINT)  # a terminal's Ctrl-C: every process of the foreground group
        output, _ = ui.communicate(timeout=60)
    finally:
        if ui.poll() is None:
            os.killpg(ui.pid, signal.SIGKILL)
    assert ui.returncode == 0
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output[-2000:]
