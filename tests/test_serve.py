"""`attnsim serve`: a real server on 127.0.0.1 and a free port; the app's screen read through the
page's websocket, a real headless Chromium that loads the page, draws the app and sends a key."""
import asyncio
import contextlib
import io
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import tracer

pytest.importorskip("textual_serve", reason="attnsim serve needs textual-serve (the test extra installs it)")

ANSI = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[()][A-Z0-9]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1bP[^\x1b]*\x1b\\")
START = 90   # seconds: a bound on waiting for a cold start, not a check on speed
MEMORY = 2 << 30   # bytes of address space for the server and each session: a size not clamped fails, not the machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def attnsim(*argv, **kw):
    return subprocess.run([sys.executable, "-m", "tui", *argv], capture_output=True, text=True, timeout=120, **kw)


@pytest.fixture(scope="module")
def server():
    """`attnsim serve by_hand` on a free loopback port, it and its sessions under an address-space
    limit; stopped (its whole process group) after."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tui", "serve", "by_hand", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY)))
    url = f"http://127.0.0.1:{port}"
    try:
        line = proc.stdout.readline()
        token = re.search(r"\?token=(\S+)", line).group(1)
        deadline = time.monotonic() + START
        while True:
            try:
                with urllib.request.urlopen(f"{url}/?token={token}", timeout=5) as reply:
                    page = reply.read().decode()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
                time.sleep(0.2)
        yield {"url": url, "port": port, "line": line, "page": page, "token": token, "pid": proc.pid}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)


def test_prints_the_address_and_serves_the_page(server):
    assert server["line"].startswith(f"attnsim: serving by_hand at {server['url']}/?token={server['token']} ")
    assert f"ws://127.0.0.1:{server['port']}/ws/{server['token']}" in server["page"]


async def _screens(url: str, token: str, keys: list[str], wanted: list[str], size=(120, 40)) -> list[str]:
    """Opens the page's websocket as a browser would, and for each key (None: none) collects the
    app's text until the wanted string shows (or START runs out)."""
    import aiohttp
    seen = []
    width, height = size
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(url.replace("http", "ws") + f"/ws/{token}?width={width}&height={height}") as ws:
            await ws.send_json(["resize", {"width": width, "height": height}])
            for key, want in zip(keys, wanted):
                if key is not None:
                    await ws.send_json(["stdin", key])
                data, deadline = b"", time.monotonic() + START
                while want not in ANSI.sub(b"", data).decode("utf-8", "replace") and time.monotonic() < deadline:
                    try:
                        message = await ws.receive(timeout=1)
                    except asyncio.TimeoutError:
                        continue
                    if message.type == aiohttp.WSMsgType.BINARY:
                        data += message.data
                    elif message.type != aiohttp.WSMsgType.TEXT:
                        break
                seen.append(ANSI.sub(b"", data).decode("utf-8", "replace"))
            await ws.send_json(["stdin", "q"])
    return seen


def test_websocket_shows_the_app_and_n_moves_to_the_next_step(server):
    trace = tracer.run("by_hand")
    first, nxt = trace.steps[0], trace.steps[1]
    screen, after = asyncio.run(_screens(server["url"], server["token"], [None, "n"], [first.formula, nxt.formula]))
    assert "by_hand" in screen and first.formula in screen and trace.arithmetic.preset in screen
    assert nxt.formula not in screen
    assert nxt.formula in after and nxt.id in after


def test_a_huge_terminal_is_clamped_so_the_session_fits_in_bounded_memory(server):
    """A client asking for 10^5 × 10^5 cells (gigabytes of screen unclamped) gets a session that
    draws within the limit and moves on."""
    trace = tracer.run("by_hand")
    first, nxt = trace.steps[0], trace.steps[1]
    screen, after = asyncio.run(_screens(server["url"], server["token"], [None, "n"], [first.formula, nxt.formula],
                                         size=(100_000, 100_000)))
    assert first.formula in screen and nxt.formula in after


def test_a_port_in_use_is_one_line_and_exit_2(server):
    done = attnsim("serve", "--port", str(server["port"]))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"attnsim: error: --port: 127.0.0.1:{server['port']} is in use; expected a free port (--port N) "
        "on an address of this machine"]


@pytest.mark.parametrize("argv, field", [(["no_such_scenario"], "scenario"), (["--port", "70000"], "--port"),
                                         (["--arithmetic", "abacus"], "arithmetic")])
def test_bad_input_is_refused_before_serving(argv, field):
    done = attnsim("serve", *argv, "--port", str(free_port())) if "--port" not in argv else attnsim("serve", *argv)
    assert done.returncode == 2 and done.stdout == "" and len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith("attnsim: error: ") and field in done.stderr


def test_the_command_served_is_this_pythons_attnsim():
    from tui.serve import command
    assert command("my file.toml", "by-hand", ["scale=2"]).split(" ", 2)[1:] == [
        sys.executable, "-m tui tui 'my file.toml' --arithmetic by-hand --set scale=2"]


def _children(pid: int) -> set[int]:
    found = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found.update(int(c) for c in (task / "children").read_text().split())
    return found


def _running(pid: int) -> bool:
    """Whether process `pid` still runs (a zombie has ended; no init may reap it here)."""
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads the process tree from /proc")
def test_a_session_ends_when_its_server_is_killed():
    """A server killed outright (SIGKILL: no shutdown of its own) left each session's app running
    for ever, waiting on pipes nobody reads; the session now ends with its server. The server is
    started as `nohup attnsim serve` starts it, with SIGHUP ignored, which its sessions inherit (they
    once outlived it so)."""
    import aiohttp
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tui", "serve", "by_hand", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))

    async def session_then_kill() -> set[int]:
        token = re.search(r"\?token=(\S+)", proc.stdout.readline()).group(1)
        async with aiohttp.ClientSession() as http:
            ws = await http.ws_connect(f"ws://127.0.0.1:{port}/ws/{token}?width=80&height=24")
            await ws.send_json(["stdin", ""])
            await ws.receive(timeout=START)   # the app's first bytes: its process runs
            sessions = _children(proc.pid)
            os.kill(proc.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                await ws.close()
            return sessions
    try:
        (session,) = asyncio.run(session_then_kill())
        proc.wait(timeout=30)
        _until(lambda: True if not _running(session) else None, seconds=30, every=0.2)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)   # the session too, should it have outlived its server
        proc.wait(timeout=15)


# ---------------------------------------------------------------- a real browser
CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")


def _pixels(png: bytes):
    import matplotlib.image
    return matplotlib.image.imread(io.BytesIO(png), format="png")[..., :3]


def _until(check, seconds=START, every=0.5):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = check()
        if got is not None:
            return got
        time.sleep(every)
    raise AssertionError(f"nothing after {seconds} s")


@pytest.mark.skipif(CHROMIUM is None or DRIVER is None,
                    reason="no chromium/chromedriver (CI installs Debian's chromium and chromium-driver)")
def test_chromium_loads_the_page_draws_the_app_and_n_moves_on(server):
    import numpy as np
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,800",
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"):  # no traffic beyond loopback
        options.add_argument(arg)
    browser = webdriver.Chrome(options=options, service=Service(DRIVER))
    try:
        browser.set_page_load_timeout(START)
        browser.get(f"{server['url']}/?token={server['token']}")
        splash = _pixels(browser.get_screenshot_as_png())
        browser.find_element(By.TAG_NAME, "body").click()  # the splash starts the app on a click

        def settled():  # the app drawn (not the splash) and still: two screenshots alike
            a = browser.get_screenshot_as_png()
            time.sleep(1.0)
            b = browser.get_screenshot_as_png()
            pa = _pixels(a)
            drawn = pa.shape == splash.shape and np.abs(pa - splash).mean() > 0.01 and pa.std() > 0.05
            return pa if drawn and a == b else None
        app = _until(settled)
        assert app.std() > 0.05  # not blank
        browser.find_element(By.CSS_SELECTOR, "textarea").send_keys("n")  # xterm's keyboard input
        moved = _until(lambda: (lambda p: p if np.abs(p - app).mean() > 0.001 else None)(
            _pixels(browser.get_screenshot_as_png())), seconds=30)
        assert moved.std() > 0.05
    finally:
        browser.quit()
