"""`attnsim serve`: the same terminal UI in a web browser, through textual-serve. Each browser tab
that opens the page gets its own `attnsim tui` process, run by this very Python."""
from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import secrets
import shlex
import signal
import socket
import sys
import threading
import time

from tracer.errors import ScenarioError

WILDCARDS = ("", "0.0.0.0", "::")  # listen everywhere: the page must name a reachable address instead
SERVER = "ATTNSIM_SERVER_PID"      # in a session's environment: the server it must not outlive
PR_SET_PDEATHSIG = 1               # Linux's prctl option: a signal for this process when its parent ends


def end_with_server() -> None:
    """In a session's process (`attnsim tui`, started by serve): end when the server ends, however
    it ends. A server killed outright leaves the app waiting for ever on pipes nobody reads; so
    the kernel sends it SIGHUP, the signal of a terminal gone, when its parent dies (Linux), or a
    thread watches the parent (elsewhere)."""
    server = os.environ.pop(SERVER, "")
    if not server.isdigit():
        return
    signal.signal(signal.SIGHUP, signal.SIG_DFL)   # `nohup attnsim serve` hands its sessions SIGHUP ignored
    if sys.platform.startswith("linux"):
        import ctypes
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGHUP)
    else:
        threading.Thread(target=_watch, args=(int(server),), daemon=True).start()
    if os.getppid() != int(server):   # the server ended before the signal was asked for
        os.kill(os.getpid(), signal.SIGHUP)


def _watch(server: int) -> None:
    while os.getppid() == server:
        time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGHUP)


def command(scenario: str, arithmetic: str | None = None, sets=()) -> str:
    """The shell command each browser session runs: this interpreter's attnsim, whatever PATH holds."""
    parts = [sys.executable, "-m", "tui", "tui", scenario]
    if arithmetic:
        parts += ["--arithmetic", arithmetic]
    for item in sets:
        parts += ["--set", item]
    return "exec " + shlex.join(parts)  # the shell becomes the app: ending the process ends the session


def check_host(host: str, expose: bool) -> None:
    """Loopback unless asked: an empty --host (an unset variable in a script) is refused, and any
    other address needs --expose, because whoever reaches it gets a session of the app."""
    if not host.strip():
        raise ScenarioError("--host", "expected an address to listen on, such as 127.0.0.1; got an empty one")
    if not expose and not is_loopback(host):
        raise ScenarioError("--host", f"{host} can be reached from other machines; expected a loopback address "
                            "(127.0.0.1), or add --expose to let anyone who can reach it and has the printed "
                            "address run the app as this user")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def address(host: str, port: int) -> str:
    """The server's address (without the token)."""
    name = socket.gethostname() if host in WILDCARDS else host
    return f"http://[{name}]:{port}" if ":" in name else f"http://{name}:{port}"


def check_port(host: str, port: int) -> None:
    """Binds (host, port) once and lets go: a port in use or a foreign address is refused here,
    in one line, rather than as a traceback from inside the web server."""
    if not 0 < port < 65536:
        raise ScenarioError("--port", f"expected a port number from 1 to 65535, got {port}")
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as err:
        raise ScenarioError("--host", f"cannot resolve {host!r} ({err.strerror}); expected an address of this "
                            "machine such as 127.0.0.1") from None
    family, kind, proto, _, where = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server itself will
        try:
            probe.bind(where)
        except OSError as err:
            what = "is in use" if err.errno in (48, 98) else f"cannot be listened on ({err.strerror})"
            raise ScenarioError("--port", f"{host}:{port} {what}; expected a free port (--port N) "
                                "on an address of this machine") from None


def check_run(scenario: str, arithmetic: str | None, sets) -> None:
    """Refuses a bad scenario or arithmetic now, before any browser connects."""
    import tracer
    from tracer.arithmetic import parse_set
    overrides = parse_set(sets)
    if scenario not in tracer.builtin_names():
        tracer.load_scenario(scenario)
    if arithmetic or overrides:
        tracer.resolve(arithmetic or "exact", overrides)


def serve(scenario: str, host: str = "127.0.0.1", port: int = 8000, arithmetic: str | None = None,
          sets=(), expose: bool = False) -> None:
    """Serves the TUI on host:port until Ctrl+C; prints the address to open, with this run's token."""
    check_host(host, expose)
    try:
        from tui.webguard import GuardedServer, quiet_logging
    except ImportError:
        raise ScenarioError("serve", "textual-serve is not installed; expected it: "
                            "pip install 'attnsim[web]'") from None
    check_run(scenario, arithmetic, sets)
    check_port(host, port)
    url, token = address(host, port), secrets.token_urlsafe(24)
    os.environ[SERVER] = str(os.getpid())   # each session's process inherits it (end_with_server)

    class QuietServer(GuardedServer):
        """Saying only the address (textual-serve's banner and request log left out)."""

        def initialize_logging(self) -> None:
            quiet_logging()

        async def on_startup(self, app) -> None:
            # aiohttp starts listening only after its start-up hooks: the address is printed once a
            # connection is taken, so that whoever reads it (a person, a script) can open it at once
            app["announce"] = asyncio.create_task(announce())

    async def announce() -> None:
        probe = "127.0.0.1" if host in WILDCARDS else host.strip("[]")
        for _ in range(1000):
            try:
                _, writer = await asyncio.open_connection(probe, port)
            except OSError:
                await asyncio.sleep(0.01)
                continue
            writer.close()
            break
        print(f"attnsim: serving {scenario} at {url}/?token={token}  (open it in a web browser; Ctrl+C stops)",
              flush=True)
        if not is_loopback(host):
            print(f"attnsim: warning: listening on {host}: anyone who can reach port {port} there and has "
                  "this address can run the app as this user (open files, write exports)", flush=True)

    QuietServer(command(scenario, arithmetic, sets), host=host, port=port, token=token,
                title=f"attnsim {scenario}", public_url=url).serve()
