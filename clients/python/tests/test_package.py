"""The packages as a user gets them: the Python package type-checks under
mypy --strict, and both packages carry the server's version."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pg_engram

ROOT = Path(__file__).resolve().parents[3]


def test_the_python_package_is_strictly_typed() -> None:
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--python-version", "3.10",
                        str(ROOT / "clients" / "python" / "src" / "pg_engram")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_packages_follow_the_servers_version() -> None:
    server = re.search(r'^version = "([^"]+)"', (ROOT / "Cargo.toml").read_text(), re.M)
    assert server
    python = re.search(r'^version = "([^"]+)"', (ROOT / "clients" / "python" / "pyproject.toml").read_text(), re.M)
    assert python and python.group(1) == server.group(1) == pg_engram.__version__
    assert json.loads((ROOT / "clients" / "typescript" / "package.json").read_text())["version"] == server.group(1)
