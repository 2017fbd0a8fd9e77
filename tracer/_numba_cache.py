"""Make numba's on-disk cache work even when the package is installed read-only.

Numba writes its cache beside the source (`__pycache__`); when that folder is not writable it
would recompile in every process. We then point NUMBA_CACHE_DIR at a per-user cache folder.
Imported by `kernels` before any @njit runs.
"""
import os
import tempfile
from pathlib import Path


def _user_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "attnsim" / "numba"


def _ensure_writable_cache() -> None:
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    here = Path(__file__).resolve().parent / "__pycache__"
    try:
        here.mkdir(exist_ok=True)
        with tempfile.TemporaryFile(dir=here):
            return
    except OSError:
        pass
    target = _user_cache_dir()
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError:
        target = Path(tempfile.gettempdir()) / "attnsim-numba"
        target.mkdir(parents=True, exist_ok=True)
    os.environ["NUMBA_CACHE_DIR"] = str(target)
    import sys
    if "numba" in sys.modules:  # imported before us: make it read the variable again
        sys.modules["numba"].core.config.reload_config()


_ensure_writable_cache()
