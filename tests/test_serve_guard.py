"""`attnsim serve` against hostile clients: the guard of tui/webguard.py served in this process on a
free 127.0.0.1 port, each session a harmless `sleep` (so that a process started, or not, is easy to
see among this process's children), then the command line's refusals. Every server is stopped."""
import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("textual_serve", reason="attnsim serve needs textual-serve (the test extra installs it)")
import aiohttp  # noqa: E402  (textual-serve brings it)
from aiohttp import web  # noqa: E402

from tui import webguard  # noqa: E402

TOKEN = "the-token-of-this-test"
SLEEP = "exec sleep 120"
STUBBORN = "trap '' TERM; exec sleep 120"   # a session that ignores SIGTERM (the ignoring survives exec)


@pytest.fixture(autouse=True)
def short_grace(monkeypatch):
    """A `sleep` session never answers the page's "quit": each end waits out the grace period."""
    monkeypatch.setattr(webguard, "GRACE", 1.0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children() -> set[int]:
    """This process's live children (zombies are ended already)."""
    found = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:    # a thread (the event loop's executor's) may end between the listing and the read
            listed = (task / "children").read_text().split()
        except OSError:
            continue
        for pid in listed:
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            if "State:\tZ" not in status:
                found.add(int(pid))
    return found


async def until(check, seconds=10.0):
    for _ in range(int(seconds / 0.05)):
        if check():
            return True
        await asyncio.sleep(0.05)
    return check()


def served(test, command=SLEEP, host="127.0.0.1"):
    """Runs `test(base, session, runner)` against a guarded server of `command` sessions on a free
    port of 127.0.0.1 (`host` is the address the server believes it was given); stops it after."""
    async def run():
        port = free_port()
        server = webguard.GuardedServer(command, host=host, port=port, token=TOKEN, title="t",
                                        public_url=f"http://{host}:{port}")
        runner = web.AppRunner(await server._make_app())
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        try:
            async with aiohttp.ClientSession() as session:
                await test(f"127.0.0.1:{port}", session, runner)
        finally:
            await asyncio.wait_for(runner.cleanup(), 30)
    asyncio.run(asyncio.wait_for(run(), 90))


# ---------------------------------------------------------------- item 1: only this server's page
def test_the_page_needs_the_token_and_this_servers_host():
    async def test(base, session, _):
        port = base.split(":")[1]
        for path, headers, status in [("/", {}, 403), ("/?token=wrong", {}, 403), ("/?token=%C3%A9", {}, 403),
                                      (f"/?token={TOKEN}x", {}, 403), (f"/?token={TOKEN}", {}, 200),
                                      (f"/?token={TOKEN}", {"Host": f"localhost:{port}"}, 200),
                                      (f"/?token={TOKEN}", {"Host": "evil.example"}, 403),
                                      (f"/?token={TOKEN}", {"Host": f"evil.example:{port}"}, 403)]:
            async with session.get(f"http://{base}{path}", headers=headers) as reply:
                assert reply.status == status, (path, headers)
        for host in (base, f"localhost:{port}"):   # the socket's address names the host the page came from
            async with session.get(f"http://{base}/?token={TOKEN}", headers={"Host": host}) as reply:
                assert f'"ws://{host}/ws/{TOKEN}"' in await reply.text()
    served(test)


@pytest.mark.parametrize("path, headers", [
    ("/ws", {}), ("/ws/wrong-token", {}), ("/ws/%C3%A9", {}), (f"/ws/{TOKEN}/", {}),
    (f"/ws/{TOKEN}", {"Origin": "http://evil.example"}),          # a cross-site page's socket
    (f"/ws/{TOKEN}", {"Origin": "null"}),
    (f"/ws/{TOKEN}", {"Origin": "http://127.0.0.1:1"}),           # a page of another local server
    (f"/ws/{TOKEN}", {"Origin": "http://127.0.0.1:PORT.evil.example"}),
    (f"/ws/{TOKEN}", {"Origin": "https://127.0.0.1:PORT"}),
    (f"/ws/{TOKEN}", {"Host": "rebound.example:80"}),             # DNS rebinding
    (f"/ws/{TOKEN}", {"Host": "rebound.example:PORT", "Origin": "http://rebound.example:PORT"})])
def test_a_refused_socket_starts_no_process(path, headers):
    async def test(base, session, _):
        sent = {k: v.replace("PORT", base.split(":")[1]) for k, v in headers.items()}
        before = children()
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await session.ws_connect(f"ws://{base}{path}", headers=sent)
        assert refused.value.status in (403, 404)
        await asyncio.sleep(0.3)
        assert children() == before
    served(test)


def test_this_servers_own_page_opens_a_session():
    async def test(base, session, _):
        before = children()
        ws = await session.ws_connect(f"ws://{base}/ws/{TOKEN}", headers={"Origin": f"http://{base}"})
        assert await until(lambda: len(children() - before) == 1)
        await ws.close()
    served(test)


def test_the_hosts_a_server_answers_to():
    assert webguard.allowed_hosts("127.0.0.1", 8000) == {"127.0.0.1:8000", "localhost:8000", "[::1]:8000"}
    assert webguard.allowed_hosts("192.0.2.7", 80) == {"192.0.2.7:80", "192.0.2.7"}
    assert webguard.allowed_hosts("0.0.0.0", 8000) is None and webguard.allowed_hosts("::", 8000) is None


# ---------------------------------------------------------------- item 2: bounded sessions
def environ(pid: int) -> dict:
    return dict(item.split("=", 1) for item in Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")
                if "=" in item)


def test_sizes_are_clamped_and_the_process_ends_with_its_socket():
    async def test(base, session, _):
        before = children()
        ws = await session.ws_connect(f"ws://{base}/ws/{TOKEN}?width=100000&height=100000",
                                      headers={"Origin": f"http://{base}"})
        assert await until(lambda: children() - before)
        (pid,) = children() - before
        clamped = {"COLUMNS": str(webguard.MAX_WIDTH), "ROWS": str(webguard.MAX_HEIGHT)}
        # the child shows in /proc as soon as it forks, still with this process's environment until it execs
        assert await until(lambda: clamped.items() <= environ(pid).items()), environ(pid)
        await ws.close()
        assert await until(lambda: pid not in children(), seconds=4 * webguard.GRACE)
    served(test)


def test_a_session_that_ignores_sigterm_is_killed_when_its_socket_closes():
    async def test(base, session, _):
        before = children()
        ws = await session.ws_connect(f"ws://{base}/ws/{TOKEN}")
        assert await until(lambda: children() - before)
        (pid,) = children() - before
        await ws.close()
        assert await until(lambda: pid not in children(), seconds=2 * webguard.GRACE + 5)
    served(test, command=STUBBORN)


def test_sessions_are_capped_even_when_they_arrive_together():
    extra = 4

    async def test(base, session, _):
        before = children()
        sockets = await asyncio.gather(*[session.ws_connect(f"ws://{base}/ws/{TOKEN}")
                                         for _ in range(webguard.MAX_SESSIONS + extra)])
        await asyncio.sleep(1.0)
        assert len(children() - before) == webguard.MAX_SESSIONS
        closes = []
        for ws in sockets:   # the refused ones are closed at once, saying why
            try:
                message = await ws.receive(timeout=0.2)
            except asyncio.TimeoutError:
                continue
            closes.append((message.type, message.data, message.extra))
        assert len(closes) == extra
        for kind, code, reason in closes:
            assert kind == aiohttp.WSMsgType.CLOSE and code == aiohttp.WSCloseCode.TRY_AGAIN_LATER
            assert f"{webguard.MAX_SESSIONS} sessions are running" in reason
        assert len(children() - before) == webguard.MAX_SESSIONS
        for ws in sockets:
            await ws.close()
        assert await until(lambda: not children() - before, seconds=4 * webguard.GRACE)
        ws = await session.ws_connect(f"ws://{base}/ws/{TOKEN}")   # a place is free again
        assert await until(lambda: len(children() - before) == 1)
        await ws.close()
    served(test)


def test_stopping_the_server_ends_every_session_at_once():
    async def test(base, session, runner):
        before = children()
        sockets = [await session.ws_connect(f"ws://{base}/ws/{TOKEN}") for _ in range(2)]
        assert await until(lambda: len(children() - before) == 2)
        started = time.monotonic()
        await asyncio.wait_for(runner.cleanup(), 4 * webguard.GRACE)   # as Ctrl+C does
        assert time.monotonic() - started < 4 * webguard.GRACE
        assert not children() - before
        for ws in sockets:
            assert (await ws.receive(timeout=5)).type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
    served(test)


# ---------------------------------------------------------------- item 4: junk is one line each
def test_junk_is_one_line_each_and_the_server_keeps_serving(capfd):
    junk = ["not json", '["stdin", 5]', "[]", "{}", '["launch", "x"]', '["resize", 7]', "[" * 5000, '"x"',
            '["ping", {"a": 1}]']
    webguard.quiet_logging()  # as `attnsim serve` sets it up: aiohttp's own reports one line each

    async def test(base, session, _):
        async with session.get(f"http://{base}/ws") as reply:                 # no token, no upgrade
            assert reply.status == 403
        async with session.get(f"http://{base}/ws/{TOKEN}") as reply:        # no upgrade
            assert reply.status == 400
        async with session.get(f"http://{base}/?token={TOKEN}&{'a' * 100_000}") as reply:
            assert reply.status in (400, 414, 431)
        before = children()
        ws = await session.ws_connect(f"ws://{base}/ws/{TOKEN}")
        for text in junk:
            await ws.send_str(text)
        await ws.send_bytes(b"\xff" * 100)                                  # not a message the page sends: ignored
        await ws.send_json(["stdin", "\ud800"])                             # a lone surrogate: sent as U+FFFD
        await ws.send_json(["resize", {"width": 10**9, "height": "x"}])     # clamped and a default, silently
        await ws.send_json(["ping", "still here"])
        assert await ws.receive_json(timeout=10) == ["pong", "still here"]
        assert len(children() - before) == 1                                 # the same session all along
        await ws.send_str("x" * (webguard.MAX_MESSAGE + 1))   # too big: that socket is closed
        assert (await ws.receive(timeout=10)).type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        assert await until(lambda: not children() - before, seconds=4 * webguard.GRACE)
        async with session.get(f"http://{base}/?token={TOKEN}") as reply:
            assert reply.status == 200
        good = await session.ws_connect(f"ws://{base}/ws/{TOKEN}")
        await good.send_json(["ping", "a good client"])
        assert await good.receive_json(timeout=10) == ["pong", "a good client"]
        await good.close()
    served(test)
    lines = [line for line in capfd.readouterr().err.splitlines() if line]
    assert all(line.startswith("attnsim: serve: ") and len(line) <= 200 for line in lines), lines
    assert "Traceback" not in "\n".join(lines)
    assert len(lines) == 3 + len(junk) + 1, lines  # 3 plain requests, each junk message, the big one
    assert any("LineTooLong" in line for line in lines) and any("exceeds limit" in line for line in lines)


def test_a_session_that_cannot_start_is_one_line(capfd, monkeypatch):
    async def no_process(self, width, height):
        raise OSError("fork: Resource temporarily unavailable\nmore text")
    webguard.quiet_logging()
    monkeypatch.setattr(webguard.AppService, "start", no_process)

    async def test(base, session, _):
        ws = await session.ws_connect(f"ws://{base}/ws/{TOKEN}")
        assert (await ws.receive(timeout=10)).type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        async with session.get(f"http://{base}/?token={TOKEN}") as reply:
            assert reply.status == 200
    served(test)
    lines = [line for line in capfd.readouterr().err.splitlines() if line]
    assert lines == ["attnsim: serve: ended a session: OSError: fork: Resource temporarily unavailable more text"]


@pytest.mark.parametrize("text, kind", [("not json", None), ('["stdin", 5]', None), ('["stdin", "ab"]', "stdin"),
                                        ('["resize", {"width": 1}]', "resize"), ('["focus"]', "focus"),
                                        ('["x"]', None), ("[1]", None), ("[" * 5000 + "]" * 5000, None)])
def test_envelopes(text, kind):
    if kind is None:
        with pytest.raises(ValueError):
            webguard.envelope(text)
    else:
        assert webguard.envelope(text)[0] == kind


@pytest.mark.parametrize("value, want", [("100000", 500), (10**12, 500), ("-5", 80), (-5, 20), ("1e3", 80),
                                         (True, 80), (None, 80), ("١٢٣", 80), (120, 120), ("9" * 5000, 80)])
def test_clamp(value, want):
    assert webguard.clamp(value, 20, 500, 80) == want


# ---------------------------------------------------------------- item 3: where it listens
def attnsim(*argv):
    return subprocess.run([sys.executable, "-m", "tui", *argv], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("host", ["", " ", "0.0.0.0", "::", "192.0.2.7"])
def test_a_host_other_than_loopback_needs_expose(host):
    done = attnsim("serve", "--host", host, "--port", str(free_port()))
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("attnsim: error: --host: ")
    assert ("empty" in line) if not host.strip() else ("--expose" in line)


def test_an_empty_host_is_refused_even_with_expose():
    done = attnsim("serve", "--host", "", "--expose", "--port", str(free_port()))
    assert done.returncode == 2 and done.stdout == "" and len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith("attnsim: error: --host: ") and "empty" in done.stderr


def private_namespace() -> str | None:
    """Why the wildcard bind cannot be tried here (None: it can, in a network namespace of its own)."""
    if os.geteuid() != 0:
        return "binding every interface is tried only as root, inside a private network namespace"
    try:
        done = subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "no unshare here to make a private network namespace"
    return None if done.returncode == 0 else "unshare -n is not allowed here (no private network namespace)"


@pytest.mark.skipif(private_namespace() is not None, reason=str(private_namespace()))
def test_expose_listens_everywhere_with_a_warning_inside_a_private_namespace():
    """Inside a network namespace of its own (only its loopback), `--host 0.0.0.0 --expose` serves,
    warns, and the page opens by the printed name or by any address, with the token only."""
    code = ("import re, subprocess, sys, urllib.request, urllib.error\n"
            "p = subprocess.Popen([sys.executable, '-m', 'tui', 'serve', '--host', '0.0.0.0', '--expose', "
            "'--port', '8000'], stdout=subprocess.PIPE, text=True)\n"
            "first, second = p.stdout.readline(), p.stdout.readline()\n"
            "print(first, second, sep='', end='')\n"
            "token = re.search(r'token=(\\S+)', first).group(1)\n"
            "try:\n"   # the address is printed once the port takes connections: no retry needed
            "    for url in ('http://127.0.0.1:8000/?token=' + token, 'http://127.0.0.1:8000/'):\n"
            "        try:\n"
            "            print(urllib.request.urlopen(url, timeout=20).status)\n"
            "        except urllib.error.HTTPError as e:\n"
            "            print(e.code)\n"
            "finally:\n"   # else a failed request leaves the server holding the pipes until the timeout
            "    p.terminate(); p.wait(20)\n")
    done = subprocess.run(["unshare", "-n", "sh", "-c", 'ip link set lo up 2>/dev/null; exec "$0" -c "$1"',
                           sys.executable, code], capture_output=True, text=True, timeout=90)
    first, second, with_token, without = done.stdout.splitlines()[:4]
    assert "?token=" in first and second.startswith("attnsim: warning: listening on 0.0.0.0")
    assert (with_token, without) == ("200", "403")
