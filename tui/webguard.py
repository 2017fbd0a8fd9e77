"""textual-serve with the doors a local web app needs: a secret token in the page's address (as
Jupyter does), the Host and Origin headers checked (DNS rebinding, cross-site websockets), terminal
sizes clamped, messages bounded, sessions capped, and a session's process ended with its socket.
Imported only by `attnsim serve`, after textual-serve is known to be installed."""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import sys

import aiohttp_jinja2
from aiohttp import WSCloseCode, WSMsgType, web
from textual_serve.app_service import AppService
from textual_serve.server import Server

MAX_WIDTH, MAX_HEIGHT = 500, 200   # cells: more than any screen shows
MAX_SESSIONS = 8                   # app processes at once; a further tab is refused until one closes
MAX_MESSAGE = 64 * 1024            # bytes in one websocket message (a paste of keys is far less)
GRACE = 3.0                        # seconds a session's process has to quit before it is killed
LOOPBACK = ("127.0.0.1", "localhost", "::1")
WILDCARDS = ("0.0.0.0", "::")
# A request line or header over 8190 bytes is refused by aiohttp itself (its default limit).


def say(line: str) -> None:
    """One short line on the server's terminal for each refused or junk request (an error's own
    text may hold line breaks: they become spaces)."""
    print(" ".join(f"attnsim: serve: {line}".split())[:200], file=sys.stderr, flush=True)


class OneLine(logging.Formatter):
    """aiohttp's own reports (a malformed request, a dropped connection) as one line, no traceback."""

    def format(self, record: logging.LogRecord) -> str:
        text = (record.getMessage().splitlines() or [""])[0]
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            text += f": {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        return f"attnsim: serve: {text}"[:200]


def quiet_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLine())
    logging.basicConfig(level="WARNING", handlers=[handler], force=True)


def clamp(value, low: int, high: int, default: int) -> int:
    """A terminal size from a client: a whole number within [low, high], else the default."""
    if isinstance(value, str):
        value = int(value) if value.isascii() and value.isdigit() and len(value) < 7 else default
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return min(max(value, low), high)


def allowed_hosts(host: str, port: int) -> set[str] | None:
    """The Host headers this server answers to: the address it was started on (and loopback's
    names when that is loopback), with the port; anything else is a rebinding attempt. None (any
    name) when it listens everywhere: the machine's names cannot be listed, and the token guards."""
    if host in WILDCARDS:
        return None
    names = set(LOOPBACK) if host in LOOPBACK else {host.lower()}
    hosts = {f"[{n}]" if ":" in n else n for n in names}
    return {f"{h}:{port}" for h in hosts} | (hosts if port == 80 else set())


class GuardedServer(Server):
    """textual-serve's server behind the checks above; `token` is the secret of this run."""

    def __init__(self, command: str, *, host: str, port: int, token: str, title: str, public_url: str):
        super().__init__(command, host=host, port=port, title=title, public_url=public_url)
        self.token = token.encode()
        self.hosts = allowed_hosts(host, port)
        self.sockets: set[web.WebSocketResponse] = set()  # one a session, counted before its first await

    async def _make_app(self) -> web.Application:
        """textual-serve's routes and hooks as they are, every request through the guard first, and
        the sessions' websocket at /ws/TOKEN (the page's script appends ?width=…&height=…)."""
        app = await super()._make_app()
        app.middlewares.append(self.guard)
        app.router.add_get("/ws/{token}", self.handle_websocket, name="session")
        return app

    @web.middleware
    async def guard(self, request: web.Request, handler):
        """Host and Origin must name this server; the page and its socket must carry the token."""
        host = request.host.lower()
        if self.hosts is not None and host not in self.hosts:
            return self.refuse(f"a request for host {host!r} (expected {' or '.join(sorted(self.hosts))})")
        origin = request.headers.get("Origin")
        if origin is not None and origin.lower() != f"{request.scheme}://{host}":
            return self.refuse(f"a request from the web page of {origin!r}")
        if request.path == "/" or request.path.startswith("/ws"):
            token = request.query.get("token") if request.path == "/" else request.match_info.get("token")
            if token is None or not secrets.compare_digest(token.encode(errors="replace"), self.token):
                return self.refuse("a request without this server's token (open the address printed at start)")
        try:
            return await handler(request)
        except web.HTTPException:
            raise
        except Exception as err:  # a junk request is one line, never a traceback
            return self.refuse(f"{request.path[:60]!r}: {type(err).__name__}", status=400)

    @staticmethod
    def refuse(why: str, status: int = 403) -> web.Response:
        say(f"refused {why}")
        return web.Response(status=status, text=f"refused: {why}\n")

    async def handle_index(self, request: web.Request) -> web.Response:
        """The page, its websocket's address carrying the token and naming the host the browser
        asked for (so that its Origin is that host too)."""
        socket_url = f"{'wss' if request.secure else 'ws'}://{request.host}/ws/{self.token.decode()}"
        context = {"font_size": clamp(request.query.get("fontsize", "16"), 6, 64, 16),
                   "app_websocket_url": socket_url,
                   "config": {"static": {"url": "/static/"}},
                   "application": {"name": self.title}}
        return aiohttp_jinja2.render_template("app_index.html", request, context)

    async def handle_websocket(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Upgrade", "").lower() != "websocket":
            return self.refuse("a plain request for the websocket", status=400)
        socket = web.WebSocketResponse(heartbeat=15, max_msg_size=MAX_MESSAGE)
        if len(self.sockets) >= MAX_SESSIONS:
            say(f"refused a session beyond the {MAX_SESSIONS} this server runs at once")
            await socket.prepare(request)
            await socket.close(code=WSCloseCode.TRY_AGAIN_LATER, message=(
                f"{MAX_SESSIONS} sessions are running, as many as this server runs at once; "
                "close one and reload").encode())
            return socket
        self.sockets.add(socket)
        try:
            await socket.prepare(request)
            await self.session(socket, clamp(request.query.get("width", "80"), 20, MAX_WIDTH, 80),
                               clamp(request.query.get("height", "24"), 10, MAX_HEIGHT, 24))
        finally:
            self.sockets.discard(socket)
        return socket

    async def session(self, socket: web.WebSocketResponse, width: int, height: int) -> None:
        """One app process for one socket, ended when the socket closes, however it closes."""
        service = AppService(self.command, write_bytes=socket.send_bytes, write_str=socket.send_str,
                             close=socket.close, download_manager=self.download_manager)
        try:
            await service.start(width, height)
            await self.relay(socket, service)
        except (asyncio.CancelledError, ConnectionError):
            pass
        except Exception as err:  # e.g. no process could be started: one line, the server goes on
            say(f"ended a session: {type(err).__name__}: {err}")
        finally:
            await end(service)
            await socket.close()

    async def on_startup(self, app: web.Application) -> None:
        """Nothing (textual-serve prints its banner here); `attnsim serve` prints the address."""

    async def on_shutdown(self, app: web.Application) -> None:
        """Ctrl+C: every session's socket closed now, so that each app ends at once rather than
        when aiohttp's shutdown timeout runs out."""
        for socket in list(self.sockets):
            if socket.prepared:
                await socket.close(code=WSCloseCode.GOING_AWAY, message=b"the server is stopping")

    async def relay(self, socket: web.WebSocketResponse, service: AppService) -> None:
        """The browser's messages to the app: keys, sizes, focus; anything else is one line."""
        async for message in socket:
            if message.type != WSMsgType.TEXT:
                if message.type == WSMsgType.ERROR:
                    say(f"closed a websocket: {socket.exception()}")
                    return
                continue
            try:
                kind, data = envelope(message.data)
            except ValueError as err:
                say(f"ignored a websocket message: {err}")
                continue
            if kind == "stdin":
                await service.send_bytes(data.encode("utf-8", "replace"))
            elif kind == "resize":
                await service.set_terminal_size(clamp(data.get("width"), 20, MAX_WIDTH, 80),
                                                clamp(data.get("height"), 10, MAX_HEIGHT, 24))
            elif kind == "ping":
                await socket.send_json(["pong", data])
            elif kind in ("blur", "focus"):
                await getattr(service, kind)()


def envelope(text: str) -> tuple[str, object]:
    """A message of textual-serve's page: ["stdin", "keys"], ["resize", {"width", "height"}],
    ["ping", text], ["blur"], ["focus"]; ValueError (saying what is wrong) for anything else."""
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):
        raise ValueError("not JSON") from None
    if not isinstance(message, list) or not message or not isinstance(message[0], str):
        raise ValueError("expected a list that starts with a type")
    kind, data = message[0], (message[1] if len(message) > 1 else None)
    if kind in ("stdin", "ping") and not isinstance(data, str):
        raise ValueError(f"{kind[:20]!r}: expected text")
    if kind == "resize" and not isinstance(data, dict):
        raise ValueError("'resize': expected {width, height}")
    if kind not in ("stdin", "resize", "ping", "blur", "focus"):
        raise ValueError(f"unknown type {kind[:20]!r}")
    return kind, data


async def end(service: AppService) -> None:
    """Asks the session's app to quit; a process still there after GRACE seconds is terminated,
    then killed, so that no session outlives its socket."""
    process = service._process
    with contextlib.suppress(Exception):
        await asyncio.wait_for(service.stop(), GRACE)
    if process is None or process.returncode is not None:
        return
    for stop in (process.terminate, process.kill):
        with contextlib.suppress(ProcessLookupError):
            stop()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(process.wait(), GRACE)
            return
