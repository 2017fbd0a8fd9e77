"""`attnsim serve` against hostile clients: the guard of tui/webguard.py served in this process on a
free 127.0.0.1 port, each session a harmless `sleep` (so that a process started, or not, is easy to
see among this process's children), then the command line's refusals. Every server is stopped."""
import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("textual_serve", reason="attnsim serve needs textual-serve (the test extra installs it)")
import aiohttp  # noqa: E402  (textual-serve brings it)
from aiohttp import web  # noqa: E402

from tui import webguard  # noqa: E402

TOKEN = "the-token-of-this-test"
SLEEP = "exec sleep 120"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children() -> list[int]:
    """This process's live children (zombies are ended already)."""
    me = os.getpid()
    found = []
    for task in Path(f"/proc/{me}/task").iterdir():
        for pid in (task / "children").read_text().split():
            status = Path(f"/proc/{pid}/status").read_text() if Path(f"/proc/{pid}").exists() else ""
            if "State:\tZ" not in status and status:
                found.append(int(pid))
    return found


async def until(check, seconds=10.0):
    for _ in range(int(seconds / 0.05)):
        if check():
            return True
        await asyncio.sleep(0.05)
    return check()


def served(test):
    """Runs `test(base, session)` against a guarded server of `sleep` sessions; stops it after."""
    async def run():
        port = free_port()
        server = webguard.GuardedServer(SLEEP, host="127.0.0.1", port=port, token=TOKEN, title="t",
                                        public_url=f"http://127.0.0.1:{port}")
        runner = web.AppRunner(await server._make_app())
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        try:
            async with aiohttp.ClientSession() as session:
                await test(f"127.0.0.1:{port}", session)
        finally:
            await runner.cleanup()
    asyncio.run(asyncio.wait_for(run(), 60))


def test_the_page_needs_the_token_and_this_servers_host():
    async def test(base, session):
        for path, headers, status in [("/", {}, 403), ("/?token=wrong", {}, 403), (f"/?token={TOKEN}", {}, 200),
                                      (f"/?token={TOKEN}", {"Host": "evil.example"}, 403),
                                      (f"/?token={TOKEN}", {"Host": f"evil.example:{base.split(':')[1]}"}, 403)]:
            async with session.get(f"http://{base}{path}", headers=headers) as reply:
                assert reply.status == status, (path, headers)
        async with session.get(f"http://{base}/?token={TOKEN}") as reply:
            assert f"ws://{base}/ws/{TOKEN}" in await reply.text()
    served(test)


@pytest.mark.parametrize("path, headers", [
    ("/ws", {}), ("/ws/wrong-token", {}),
    (f"/ws/{TOKEN}", {"Origin": "http://evil.example"}),          # a cross-site page's socket
    (f"/ws/{TOKEN}", {"Origin": "null"}),
    (f"/ws/{TOKEN}", {"Host": "rebound.example:80"})])            # DNS rebinding
def test_a_refused_socket_starts_no_process(path, headers):
    async def test(base, session):
        before = children()
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await session.ws_connect(f"ws://{base}{path}", headers=headers)
        assert refused.value.status in (403, 404)
        await asyncio.sleep(0.3)
        assert children() == before
    served(test)


def test_sizes_are_clamped_and_the_process_ends_with_its_socket():
    async def test(base, session):
        before = set(children())
        ws = await session.ws_connect(f"ws://{base}/ws/{TOKEN}?width=100000&height=100000",
                                      headers={"Origin": f"http://{base}"})
        assert await until(lambda: set(children()) - before)
        (pid,) = set(children()) - before
        environ = dict(item.split("=", 1) for item in
                       Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0") if "=" in item)
        assert (environ["COLUMNS"], environ["ROWS"]) == (str(webguard.MAX_WIDTH), str(webguard.MAX_HEIGHT))
        await ws.close()
        assert await until(lambda: pid not in children(), seconds=4 * webguard.GRACE)
    served(test)


def test_sessions_are_capped():
    async def test(base, session):
        before = set(children())
        sockets = [await session.ws_connect(f"ws://{base}/ws/{TOKEN}") for _ in range(webguard.MAX_SESSIONS)]
        assert await until(lambda: len(set(children()) - before) == webguard.MAX_SESSIONS)
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await session.ws_connect(f"ws://{base}/ws/{TOKEN}")
        assert refused.value.status == 503
        assert len(set(children()) - before) == webguard.MAX_SESSIONS
        for ws in sockets:
            await ws.close()
        assert await until(lambda: not set(children()) - before, seconds=4 * webguard.GRACE)
    served(test)


def test_junk_is_one_line_each_and_the_server_keeps_serving(capfd):
    junk = ["not json", '["stdin", 5]', "[]", "{}", '["launch", "x"]', '["resize", 7]', "[" * 5000]
    webguard.quiet_logging()  # as `attnsim serve` sets it up: aiohttp's own reports one line each

    async def test(base, session):
        async with session.get(f"http://{base}/ws/{TOKEN}") as reply:        # no upgrade
            assert reply.status == 400
        async with session.get(f"http://{base}/?token={TOKEN}&{'a' * 100_000}") as reply:
            assert reply.status in (400, 414, 431)
        ws = await session.ws_connect(f"ws://{base}/ws/{TOKEN}")
        for text in junk:
            await ws.send_str(text)
        await ws.send_json(["resize", {"width": 10**9, "height": "x"}])
        await ws.send_json(["ping", "still here"])
        reply = await ws.receive_json(timeout=10)
        assert reply == ["pong", "still here"]
        await ws.send_str("x" * (webguard.MAX_MESSAGE + 1))   # too big: that socket is closed
        assert (await ws.receive(timeout=10)).type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        async with session.get(f"http://{base}/?token={TOKEN}") as reply:
            assert reply.status == 200
    served(test)
    lines = [line for line in capfd.readouterr().err.splitlines() if line]
    assert all(line.startswith("attnsim: serve: ") and len(line) <= 200 for line in lines), lines
    assert "Traceback" not in "\n".join(lines)
    assert len(lines) == 2 + len(junk) + 1  # the plain GET, the long URL, each junk message, the big one
    # (a resize to 10^9 × "x" is a size clamped and a default, silently)
    assert any("LineTooLong" in line for line in lines) and any("exceeds limit" in line for line in lines)


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
                                         (True, 80), (None, 80), ("١٢٣", 80), (120, 120)])
def test_clamp(value, want):
    assert webguard.clamp(value, 20, 500, 80) == want


def attnsim(*argv):
    return subprocess.run([sys.executable, "-m", "tui", *argv], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("host", ["", " ", "0.0.0.0", "::", "192.0.2.7"])
def test_a_host_other_than_loopback_needs_expose(host):
    done = attnsim("serve", "--host", host, "--port", str(free_port()))
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("attnsim: error: --host: ")
    assert ("empty" in line) if not host.strip() else ("--expose" in line)


@pytest.mark.skipif(os.geteuid() != 0 or subprocess.run(["unshare", "-n", "true"]).returncode != 0,
                    reason="the wildcard bind is tried only inside a private network namespace (root's unshare -n)")
def test_expose_listens_everywhere_with_a_warning_inside_a_private_namespace():
    code = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-m', 'tui', 'serve', '--host', "
            "'0.0.0.0', '--expose', '--port', '8000'], stdout=subprocess.PIPE, text=True); "
            "print(p.stdout.readline(), p.stdout.readline(), sep='', end=''); p.terminate(); p.wait(20)")
    done = subprocess.run(["unshare", "-n", "sh", "-c", f"ip link set lo up 2>/dev/null; {sys.executable} -c \"{code}\""],
                          capture_output=True, text=True, timeout=90)
    first, second = done.stdout.splitlines()[:2]
    assert "?token=" in first and second.startswith("attnsim: warning: listening on 0.0.0.0")
