"""Whether numba's cache already holds attnsim's compiled kernels, told without importing numba,
and `python -m tracer.kernels.warm`: the detached process that compiles them into it.

A front end that calls `enable()` never waits for the compiler: while the cache is cold its traces
run on the NumPy engine (tracer/numpy_engine.py) and a background process compiles every kernel,
then leaves a marker file in the cache folder, named after numba's version, Python's and the
kernels' source. The next run sees the marker and loads the compiled kernels.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LOCK_SECONDS = 900          # where files cannot be locked: a warming process older than this is presumed dead
SPAWN_SECONDS = 30          # time a new warming process has to start and take its hold on the lock
_state: dict = {}           # folder, marker, enabled; "warm" once the marker was seen


def _writable(folder: str) -> bool:
    """What numba checks (it can create the folder and a file in it), without creating anything."""
    while not os.path.isdir(folder):
        parent = os.path.dirname(folder)
        if parent == folder:
            return False
        folder = parent
    return os.access(folder, os.W_OK | os.X_OK)


def _user_cache() -> str:
    if sys.platform == "darwin":
        return os.path.expanduser("~/Library/Caches/numba")
    if os.name == "nt":
        return os.path.join(os.environ.get("LOCALAPPDATA", os.path.expanduser("~")), "numba", "Cache")
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "numba")


def candidates() -> list[str]:
    """Where numba would cache this folder's kernels, in the order it tries: $NUMBA_CACHE_DIR,
    the `__pycache__` beside the source, the user's cache folder."""
    sub = os.path.basename(HERE) + "_" + hashlib.sha1(HERE.encode()).hexdigest()
    custom = os.environ.get("NUMBA_CACHE_DIR")
    return ([os.path.join(custom, sub)] if custom else []) + [os.path.join(HERE, "__pycache__"),
                                                             os.path.join(_user_cache(), sub)]


def folder() -> str | None:
    """The folder numba will use, or None when none is writable (numba: "no locator available");
    in that case, once, numba is pointed at a folder under the temporary one if that is writable."""
    if "folder" not in _state:
        _state["folder"] = next((f for f in candidates() if _writable(f)), None)
        if _state["folder"] is None:
            _state["folder"] = _spare()
    return _state["folder"]


def _spare() -> str | None:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    spare = os.path.join(tempfile.gettempdir(), f"attnsim-numba-{uid}")
    if not _writable(spare):
        _tell("no writable folder for compiled kernels: computing with NumPy (slower on large layers)")
        return None
    os.environ["NUMBA_CACHE_DIR"] = spare
    if "numba" in sys.modules:
        sys.modules["numba"].config.CACHE_DIR = spare
    _tell(f"no writable folder for compiled kernels where numba looks; caching them in {spare}")
    return candidates()[0]


def _tell(message: str) -> None:
    """One notice through the front end's compile hook (tracer.on_compile), if it set one."""
    from . import notices
    notices.tell(message)


def _key() -> str:
    """numba's version, Python's, the machine's kind and every kernel source, in one hash."""
    import importlib.util
    h = hashlib.sha256(f"{sys.version_info[:2]} {sys.platform} {os.uname().machine if hasattr(os, 'uname') else ''}".encode())
    spec = importlib.util.find_spec("numba")
    files = [os.path.join(os.path.dirname(spec.origin), "_version.py")] if spec and spec.origin else []
    files += sorted(os.path.join(HERE, f) for f in os.listdir(HERE) if f.endswith(".py"))
    for path in files:
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:20]


def marker() -> str | None:
    if "marker" not in _state:
        where = folder()
        _state["marker"] = None if where is None else os.path.join(where, f"attnsim-warm-{_key()}")
    return _state["marker"]


def is_warm() -> bool:
    """True once the background process (or a test, or a bench) has compiled every kernel here."""
    if not _state.get("warm"):
        path = marker()
        _state["warm"] = path is not None and os.path.exists(path)
    return _state["warm"]


def enable() -> None:
    """For front ends: from now on a trace that would need kernels missing from the cache runs on
    NumPy, and the first such trace starts the detached process that compiles them."""
    _state["enabled"] = True


def use_numpy() -> bool:
    """What compute.engine_for asks: run on NumPy? Yes when kernels cannot be cached at all, or
    when a front end called enable() and the cache is cold."""
    if folder() is None:
        return True
    if not _state.get("enabled") or is_warm():
        return False
    if not _state.get("started"):
        _state["started"] = True
        _start()
    return True


def _start() -> None:
    compile_in_background()
    _tell("first run: computing with NumPy while the kernels compile in the background (cached for later runs)")


def compile_in_background() -> None:
    """Starts the detached compile now, unless the cache is warm, cannot be written, or another
    process is compiling already: for a program that knows it will soon need every kernel in
    several processes (a test suite about to fan out), so that they are compiled once."""
    if folder() is None or is_warm() or not _claim():
        return
    root = os.path.dirname(os.path.dirname(HERE))   # the folder holding the tracer package
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    _state["process"] = subprocess.Popen([sys.executable, "-m", "tracer.kernels.warmup"], env=env,
                                         start_new_session=True, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait() -> bool:
    """Waits while a live warming process holds the lock, or the one this process started is
    running (it may not hold the lock yet: wait right after compile_in_background); True if the
    cache is warm after it."""
    def ours() -> bool:
        started = _state.get("process")
        return started is not None and started.poll() is None
    while not is_warm() and folder() is not None and (_held() or ours()):
        time.sleep(0.1)
    return is_warm()


def hold(lock) -> None:
    """The warming process keeps an exclusive lock on the open lock file for as long as it lives:
    the system lets go of it when the process ends, however it ends."""
    try:
        import fcntl
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (ImportError, OSError):
        pass


def _held() -> bool:
    """Is a live process compiling? Its lock file exists and is held (or, where files cannot be
    locked, is younger than LOCK_SECONDS)."""
    try:
        lock = open(lock_path())
    except OSError:
        return False
    with lock:
        try:
            import fcntl
        except ImportError:
            return time.time() - os.path.getmtime(lock_path()) < LOCK_SECONDS
        try:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True
        return False


def lock_path() -> str:
    return os.path.join(folder(), "attnsim-warming")


def _claim() -> bool:
    """Takes the lock file unless a live warming process holds it (or one may be starting)."""
    os.makedirs(folder(), exist_ok=True)
    try:
        if time.time() - os.path.getmtime(lock_path()) < SPAWN_SECONDS or _held():
            return False
        os.remove(lock_path())
    except OSError:
        pass
    try:
        os.close(os.open(lock_path(), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except OSError:
        return False
