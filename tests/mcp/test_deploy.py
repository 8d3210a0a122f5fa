"""What docs/DEPLOY.md tells a team to run: engram-mcp serving HTTPS itself
(--tls-cert/--tls-key, a renewed certificate served without a restart, a
broken pair refused at start naming the file), the monitoring files (every
metric the Grafana dashboard and the alerting rules query is one /metrics
exports), and each subcommand's --help listing only its own flags."""

import json
import os
import re
import socket
import ssl
import subprocess
import time

import httpx
import pytest

from conftest import BIN, HOST, MODEL_DIR, PORT, free_port, serving

pytestmark = pytest.mark.anyio

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MONITORING = os.path.join(ROOT, "docs", "monitoring")


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def issue(dirpath, name, ca):
    """A certificate for localhost and 127.0.0.1 signed by the test CA."""
    key, csr, crt = (str(dirpath / f"{name}.{e}") for e in ("key", "csr", "crt"))
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-subj", f"/CN=localhost {name}", "-out", csr)
    ext = dirpath / f"{name}.ext"
    ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial", "-days", "2",
            "-extfile", str(ext), "-out", crt)
    return crt, key


@pytest.fixture
def pki(tmp_path):
    ca = (str(tmp_path / "ca.crt"), str(tmp_path / "ca.key"))
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", ca[1], "-subj", "/CN=engram test CA", "-days", "2", "-out", ca[0])
    return tmp_path, ca


def served_certificate(base):
    port = int(base.rsplit(":", 1)[1])
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            return tls.getpeercert(binary_form=True)


def der(pem_path):
    with open(pem_path) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


def test_https_with_a_renewed_certificate_and_no_plain_http(database, tokens, pki):
    d, ca = pki
    crt, key = issue(d, "server", ca)
    live_crt, live_key = d / "live.crt", d / "live.key"
    live_crt.write_text(open(crt).read())
    live_key.write_text(open(key).read())
    with serving(database, "--tls-cert", str(live_crt), "--tls-key", str(live_key), tls_ca=ca[0]) as base:
        verify = ssl.create_default_context(cafile=ca[0])
        r = httpx.get(base + "/v1/memories", headers={"Authorization": f"Bearer {tokens['alice']}"}, verify=verify)
        assert r.status_code == 200, r.text
        # the same port refuses to talk plain HTTP
        with pytest.raises(httpx.HTTPError):
            httpx.get(base.replace("https://", "http://") + "/health", timeout=5)
        assert served_certificate(base) == der(crt)

        # A renewal writes new files (the key first, then the certificate,
        # as certbot's deploy does); the next connection gets the new pair
        # without a restart. In between, the old pair keeps serving.
        # (engram-mcp looks at the files once a second)
        crt2, key2 = issue(d, "renewed", ca)
        live_key.write_text(open(key2).read())
        time.sleep(1.2)
        assert httpx.get(base + "/health", verify=verify).status_code == 200
        assert served_certificate(base) == der(crt)
        live_crt.write_text(open(crt2).read())
        time.sleep(1.2)
        assert served_certificate(base) == der(crt2)
        assert httpx.get(base + "/health", verify=verify).status_code == 200


def test_a_broken_certificate_pair_is_refused_at_start(database, pki):
    d, ca = pki
    crt, key = issue(d, "one", ca)
    _, other_key = issue(d, "two", ca)
    env = dict(os.environ, ENGRAM_DATABASE_URL=f"host={HOST} port={PORT} user=engram_mcp dbname={database}",
               ENGRAM_LISTEN=f"127.0.0.1:{free_port()}", ENGRAM_MODEL_DIR=MODEL_DIR)
    cases = [
        (["--tls-cert", crt, "--tls-key", other_key], "does not match the certificate"),
        (["--tls-cert", key, "--tls-key", key], "holds no CERTIFICATE"),
        (["--tls-cert", str(d / "missing.crt"), "--tls-key", key], "cannot read"),
        (["--tls-cert", crt], "--tls-key"),
    ]
    for args, message in cases:
        p = subprocess.run([BIN, "serve", *args], env=env, capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL)
        assert p.returncode != 0 and message in p.stderr, (args, p.stderr[-2000:])


def metric_names(expr):
    return {n for n in re.findall(r"\b(engram_[a-z_]+)\b", expr)}


def test_the_dashboard_and_alerts_query_metrics_that_exist(server, tokens):
    with open(os.path.join(MONITORING, "grafana-engram-mcp.json")) as f:
        dashboard = json.load(f)
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 10
    with open(os.path.join(MONITORING, "prometheus-alerts.yml")) as f:
        alerts = f.read()
    wanted = set().union(*(metric_names(e) for e in exprs)) | metric_names(alerts)
    # the scrape a Prometheus job with the platform token makes
    r = httpx.get(server + "/metrics", headers={"Authorization": f"Bearer {tokens['platform']}"})
    assert r.status_code == 200
    exported = set(re.findall(r"^# TYPE (\w+) ", r.text, re.M))
    assert wanted and wanted <= exported, wanted - exported
    assert re.search(r'^engram_build_info\{version="[0-9.]+"\} 1$', r.text, re.M)
    # the dashboard imports into Grafana: a datasource input, unique panel ids
    assert dashboard["__inputs"][0]["pluginId"] == "prometheus"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


SECRET_URL = "host=db user=engram_mcp password=hunter2-not-shown dbname=engram"


def help_of(*command):
    env = dict(os.environ, ENGRAM_DATABASE_URL=SECRET_URL, ENGRAM_READ_DATABASE_URL=SECRET_URL)
    text = subprocess.run([BIN, *command, "--help"], capture_output=True, text=True, check=True, env=env).stdout
    assert "hunter2" not in text, f"{command} --help prints the database password"
    return text


def flags(text):
    return set(re.findall(r"^\s+(?:-\w, )?(--[a-z0-9-]+)", text, re.M))


def test_each_subcommand_lists_only_its_own_flags():
    serve, stdio = flags(help_of("serve")), flags(help_of("stdio"))
    export, import_ = flags(help_of("export")), flags(help_of("import"))
    server_only = {"--tools", "--pool-size", "--vision", "--summarizer-url", "--output-schemas"}
    assert server_only <= serve and server_only <= stdio
    assert {"--listen", "--tls-cert", "--tls-key", "--allowed-hosts"} <= serve
    assert not {"--listen", "--tls-cert", "--allowed-hosts"} & stdio
    assert "--session-id" in stdio and "--session-id" not in serve
    assert import_ >= {"--database-url", "--owner", "--all-owners", "--keep-provenance", "--reembed", "--embedder",
                       "--model-dir"}
    assert not (server_only | {"--listen", "--tls-cert", "--read-database-url"}) & import_, import_
    assert not (server_only | {"--listen", "--embedder", "--model-dir"}) & export, export
