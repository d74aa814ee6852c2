"""The real servers the tests talk to: the machine's nats-server binary
and the dispenser binary built from this repository, each a process of
its own on ports it picks itself."""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import nats
from nats.aio.client import Client as NATS

PACKAGE_DIR = Path(__file__).resolve().parent.parent
"""clients/python."""
REPO_DIR = PACKAGE_DIR.parent.parent

# Generous bounds for a loaded machine: they end a wait that will never
# succeed, they time nothing.
START_WITHIN = 60.0


def wait_for_sync(what: str, within: float, cond: Callable[[], bool]) -> None:
    """Waits until cond holds, checking every 10 ms, or fails after within
    seconds saying what it waited for."""
    end = time.monotonic() + within
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"waited {within} s for {what}")
        time.sleep(0.01)


async def wait_for(what: str, within: float, cond: Callable[[], bool | Awaitable[bool]]) -> None:
    """wait_for_sync for the event loop: cond may be a coroutine function.
    The one way the tests wait: on state, never a fixed sleep."""
    end = time.monotonic() + within
    while True:
        got = cond()
        if not isinstance(got, bool):
            got = await got
        if got:
            return
        if time.monotonic() > end:
            raise AssertionError(f"waited {within} s for {what}")
        await asyncio.sleep(0.01)


def nats_server_binary() -> str:
    """UID_TEST_NATS_SERVER, else nats-server on PATH, else ~/go/bin's, else /usr/sbin's."""
    for candidate in (
        os.environ.get("UID_TEST_NATS_SERVER"),
        shutil.which("nats-server"),
        str(Path.home() / "go" / "bin" / "nats-server"),
        "/usr/sbin/nats-server",
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise RuntimeError("no nats-server binary: install it or set UID_TEST_NATS_SERVER")


class NatsServer:
    """nats-server with JetStream on a free loopback port (the server picks
    it and writes it to a ports file, so no other test can take it in
    between) and a temporary store; or, given a directory and arguments,
    nats-server with those, its ports file in the directory."""

    def __init__(self, dir: str | None = None, args: list[str] | None = None) -> None:
        self.dir = dir or tempfile.mkdtemp(prefix="uid-py-nats-")
        if args is None:
            args = ["-js", "-a", "127.0.0.1", "-p", "-1", "-sd", str(Path(self.dir) / "store")]
        self._log = open(Path(self.dir) / "log", "wb")
        self.proc = subprocess.Popen(
            [nats_server_binary(), *args, "--ports_file_dir", self.dir],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.url = ""
        self.cluster_port = 0
        """The port it listens on for routes; 0 without a cluster."""

        def ready() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nats-server exited at start: {self.log()}")
            for f in Path(self.dir).glob("*.ports"):
                try:
                    ports = json.loads(f.read_text())
                    self.url = ports["nats"][0]
                    cluster = ports.get("cluster") or []
                    self.cluster_port = int(cluster[0].rsplit(":", 1)[1]) if cluster else 0
                except (ValueError, KeyError, IndexError):
                    return False  # being written
                return True
            return False

        wait_for_sync("nats-server to write its ports file", START_WITHIN, ready)

    def log(self) -> str:
        return (Path(self.dir) / "log").read_text(errors="replace")[-20_000:]

    def stop(self) -> None:
        _kill(self.proc, signal.SIGTERM)
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class LinkProxy:
    """A TCP link the test can cut: it listens on a free loopback port and
    forwards each connection to a target port. cut() closes every
    connection through it and refuses new ones until heal(): the peers see
    a real loss of the link, as from a dead network. Threads of its own,
    beside any event loop."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.target = 0
        """Where connections go; 0: not known yet, refuse."""
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._cut = False
        threading.Thread(target=self._accept_loop, name=f"link-proxy-{self.port}", daemon=True).start()

    def cut(self) -> None:
        """Closes every connection through the link, and refuses new ones until healed."""
        with self._lock:
            self._cut = True
            for s in self._open:
                _close(s)
            self._open.clear()

    def heal(self) -> None:
        """Forwards new connections again."""
        with self._lock:
            self._cut = False

    def stop(self) -> None:
        self.cut()
        _close(self._listener)

    def _accept_loop(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # stopped
            try:
                if self.target == 0:
                    raise OSError("no target yet")
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
                upstream.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                if self._cut:
                    _close(client)
                    _close(upstream)
                    continue
                self._open.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        """Copies src to dst until either ends, then closes both."""
        try:
            while data := src.recv(16384):
                dst.sendall(data)
        except OSError:
            pass  # the link was cut, or a peer closed
        finally:
            with self._lock:
                self._open.discard(src)
                self._open.discard(dst)
            _close(src)
            _close(dst)


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # not connected
    s.close()


class Cluster:
    """Two nats-server nodes, a and b (server tags "a" and "b"), in one
    cluster with JetStream, whose routes go through a LinkProxy each way
    (each node also advertises its proxy as its route address, so that no
    route bypasses them): cut() cuts them off from each other while both
    keep serving their clients."""

    def __init__(self) -> None:
        self._to_a = LinkProxy()
        self._to_b = LinkProxy()
        self.a = _cluster_node("A", self._to_a, self._to_b)
        self.b = _cluster_node("B", self._to_b, self._to_a)
        self._to_a.target = self.a.cluster_port
        self._to_b.target = self.b.cluster_port

    def cut(self) -> None:
        self._to_a.cut()
        self._to_b.cut()

    def heal(self) -> None:
        self._to_a.heal()
        self._to_b.heal()

    def stop(self) -> None:
        self.a.stop()
        self.b.stop()
        self._to_a.stop()
        self._to_b.stop()


def _cluster_node(name: str, me: LinkProxy, peer: LinkProxy) -> NatsServer:
    dir = tempfile.mkdtemp(prefix=f"uid-py-nats-{name}-")
    conf = Path(dir) / "server.conf"
    conf.write_text(
        "\n".join(
            [
                f"server_name: {name}",
                f'server_tags: ["{name.lower()}"]',
                'listen: "127.0.0.1:-1"',
                f'jetstream {{ store_dir: "{Path(dir) / "store"}" }}',
                "cluster {",
                "  name: uid-test",
                '  listen: "127.0.0.1:-1"',
                f'  advertise: "127.0.0.1:{me.port}"',
                f'  routes: ["nats-route://127.0.0.1:{peer.port}"]',
                "}",
                "",
            ]
        )
    )
    return NatsServer(dir, ["-c", str(conf)])


_built: str | None = None


def dispenser_binary() -> str:
    """UID_DISPENSER_BIN, or the dispenser built once per run (go build
    ./cmd/dispenser from the repository root)."""
    global _built
    given = os.environ.get("UID_DISPENSER_BIN")
    if given:
        return given
    if _built is None:
        out = Path(tempfile.mkdtemp(prefix="uid-py-bin-")) / "dispenser"
        atexit.register(shutil.rmtree, out.parent, True)
        subprocess.run(["go", "build", "-o", str(out), "./cmd/dispenser"], cwd=REPO_DIR, check=True)
        _built = str(out)
    return _built


class Dispenser:
    """A dispenser process on a NATS server."""

    def __init__(self, proc: subprocess.Popen[bytes], log_path: Path) -> None:
        self.proc = proc
        self._log_path = log_path

    @classmethod
    def spawn(cls, url: str, env: dict[str, str]) -> Dispenser:
        """Starts the process (building the binary first if need be)."""
        full_env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": os.environ.get("HOME", tempfile.gettempdir()),
            "DISPENSER_NATS_URL": url,
            "DISPENSER_LOG_LEVEL": "warn",
            # Each test's store is fresh; with a loss window a new instance's
            # sequences answer 503 for their settle period (6 s), longer than
            # a call's default deadline.
            "DISPENSER_STORE_LOSS_WINDOW": "0",
            **env,
        }
        log_path = Path(tempfile.mkstemp(prefix="uid-py-dispenser-", suffix=".log")[1])
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([dispenser_binary()], env=full_env, stdout=log, stderr=subprocess.STDOUT)
        return cls(proc, log_path)

    @classmethod
    async def start(cls, url: str, env: dict[str, str] | None = None) -> Dispenser:
        """Starts the dispenser on the NATS server at url with env (DISPENSER_*
        variables) and waits until it answers <prefix>.next."""
        env = dict(env or {})
        d = await asyncio.to_thread(cls.spawn, url, env)
        prefix = env.get("DISPENSER_SUBJECT_PREFIX", "uid")
        nc = await nats.connect(url)
        try:

            async def answers() -> bool:
                if d.proc.poll() is not None:
                    raise RuntimeError(f"dispenser exited with {d.proc.returncode}: {d.log()}")
                try:
                    m = await nc.request(f"{prefix}.next", b"", timeout=0.5)
                except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
                    return False
                return not (m.headers or {}).get("Nats-Service-Error-Code")

            await wait_for(f"the dispenser to answer {prefix}.next", START_WITHIN, answers)
        except BaseException:
            d.kill()
            raise
        finally:
            await nc.close()
        return d

    def log(self) -> str:
        return self._log_path.read_text(errors="replace")[-20_000:]

    def kill(self, sig: signal.Signals = signal.SIGKILL) -> None:
        """Sends sig (SIGKILL unless told otherwise), waits for the exit and
        removes the log."""
        _kill(self.proc, sig)
        self._log_path.unlink(missing_ok=True)


async def connect_to(url: str) -> NATS:
    """A connection that reconnects for ever, quickly; closed by the caller."""
    return await nats.connect(url, max_reconnect_attempts=-1, reconnect_time_wait=0.05)


def _kill(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
