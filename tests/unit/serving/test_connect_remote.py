"""A process holding a Connect session exits at once when its server is gone."""

from __future__ import annotations

import subprocess
import sys

from core.settings import PROJECT_ROOT

NOBODY = "sc://127.0.0.1:1"  # nothing listens: as after the SQL server stopped its Spark


def _exits(code: str) -> bool:
    """Whether a Python running ``code`` ends on its own within 30 s."""
    try:
        subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, timeout=30, check=True)
    except subprocess.TimeoutExpired:
        return False
    return True


def test_a_process_holding_a_session_exits_when_its_server_is_gone():
    """With ``SparkSession.builder.remote(url).create()`` alone, the same process was still
    retrying its exit hook's call after 40 s (measured; not repeated here, it is slow)."""
    assert _exits(f"from serving.connect.remote import remote_session\nremote_session({NOBODY!r})")


def test_a_closed_session_is_closed():
    from serving.connect.remote import close_session, remote_session

    session = remote_session(NOBODY)
    close_session(session)
    assert session.client.is_closed
    close_session(None)  # nothing to close: no error
