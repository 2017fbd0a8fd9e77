"""numba plumbing: where compiled kernels are cached, and a notice when one has to be compiled.

Kernels are compiled once (seconds each) and cached on disk; numba keeps the cache beside the
source (`__pycache__`) and, when that is read-only (a system-wide install), in the user's cache
directory (~/.cache/numba, or $NUMBA_CACHE_DIR). `on_compile` lets a front end say "compiling…".
The kernel modules call `listen()` once numba is imported; importing this module does not import it.
"""
from __future__ import annotations

import os
import sys
from typing import Callable

from . import notices

_listening = False


def on_compile(callback: Callable[[str], None] | None) -> None:
    """Call `callback(message)` whenever a kernel must be compiled (not found in the cache), before
    it is; None removes it. E.g. `tracer.on_compile(lambda m: print(m, file=sys.stderr))`."""
    notices.hook = callback
    if "numba" in sys.modules:
        listen()


def listen() -> None:
    """Registers the numba listener once (numba announces each real compilation, never a cache hit),
    and makes numba's cache saves safe between processes (see _lock_saves)."""
    global _listening
    if _listening:
        return
    _lock_saves()
    from numba.core import event

    class _Notice(event.Listener):
        def on_start(self, ev):
            dispatcher = ev.data.get("dispatcher")
            func = getattr(dispatcher, "py_func", None)
            if notices.hook is None or func is None or not func.__module__.startswith(__package__ + "."):
                return
            if type(getattr(dispatcher, "_cache", None)).__name__ == "NullCache":
                return  # a helper compiled as part of a kernel: the kernel was announced
            args = ev.data.get("args") or ()
            dtype = next((str(a.dtype) for a in args if hasattr(a, "dtype")), "")
            notices.tell(f"compiling {func.__name__}{f' for {dtype}' if dtype else ''} "
                  "(first run only; cached afterwards)")

        def on_end(self, ev):
            pass

    event.register("numba:compile", _Notice())
    _listening = True


def _lock_saves() -> None:
    """numba saves a compiled kernel by reading the function's index file, adding the entry and
    writing the index back: two processes that compile the same function at once (the background
    compile's two halves, two first runs) could drop each other's entry or give both entries one
    data file. An exclusive lock on a file beside the index makes each save whole. (Where numba
    or the platform lacks what this needs, saves stay as numba makes them.)"""
    try:
        import fcntl

        from numba.core.caching import IndexDataCacheFile
    except ImportError:
        return
    save = IndexDataCacheFile.save
    if getattr(save, "locked", False) or not hasattr(IndexDataCacheFile, "_load_index"):
        return

    def locked(self, key, data):
        with open(self._index_path + ".lock", "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            save(self, key, data)      # the lock ends when the file closes
    locked.locked = True
    IndexDataCacheFile.save = locked


def preload_blas() -> None:
    """Loads the one SciPy module numba needs for np.dot, alone.

    numba finds BLAS by importing scipy.linalg.cython_blas, and that import first runs all of
    scipy.linalg's package set-up (≈0.3 s here, a third of a cached start-up) for a table of
    function pointers that lives in that single extension module. Loaded on its own under its
    own name, numba's import finds it; a later `import scipy.linalg` runs as usual and gets it
    as its attribute. Anything unexpected (another SciPy layout) leaves the ordinary import."""
    from . import warm
    warm.folder()  # a writable cache folder for numba, or a spare one (else numba cannot cache)
    name = "scipy.linalg.cython_blas"
    if name in sys.modules or "scipy.linalg" in sys.modules:
        return
    try:
        import importlib.machinery
        import importlib.util

        import scipy
        folder = os.path.join(os.path.dirname(scipy.__file__), "linalg")
        path = next(p for p in (os.path.join(folder, "cython_blas" + suffix)
                                for suffix in importlib.machinery.EXTENSION_SUFFIXES) if os.path.exists(p))
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        sys.meta_path.insert(0, _AttachWhenLinalgLoads(module))
    except Exception:  # noqa: BLE001 (any failure: numba's own import will do the work)
        sys.modules.pop(name, None)


class _AttachWhenLinalgLoads:
    """Once scipy.linalg itself is imported, gives it the preloaded module as `cython_blas`
    (what a normal submodule import does), then steps out of the import system."""

    def __init__(self, module):
        self.module = module

    def find_spec(self, name, path=None, target=None):
        if name != "scipy.linalg":
            return None
        sys.meta_path.remove(self)
        import importlib.util
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            run, module = spec.loader.exec_module, self.module

            def exec_module(package):
                run(package)
                package.cython_blas = module
            spec.loader.exec_module = exec_module
        return spec


def cache_dir(func) -> str:
    """Where a kernel (a numba dispatcher with cache=True) keeps its compiled code."""
    return func._cache._cache_path

