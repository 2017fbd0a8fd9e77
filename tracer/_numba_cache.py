"""numba plumbing: where compiled kernels are cached, and a notice when one has to be compiled.

Kernels are compiled once (seconds each) and cached on disk; numba keeps the cache beside the
source (`__pycache__`) and, when that is read-only (a system-wide install), in the user's cache
directory (~/.cache/numba, or $NUMBA_CACHE_DIR). `on_compile` lets a front end say "compiling…".
The kernel modules call `listen()` once numba is imported; importing this module does not import it.
"""
from __future__ import annotations

import sys
from typing import Callable

_hook: Callable[[str], None] | None = None
_listening = False


def on_compile(callback: Callable[[str], None] | None) -> None:
    """Call `callback(message)` whenever a kernel must be compiled (not found in the cache), before
    it is; None removes it. E.g. `tracer.on_compile(lambda m: print(m, file=sys.stderr))`."""
    global _hook
    _hook = callback
    if "numba" in sys.modules:
        listen()


def listen() -> None:
    """Registers the numba listener once (numba announces each real compilation, never a cache hit)."""
    global _listening
    if _listening:
        return
    from numba.core import event

    class _Notice(event.Listener):
        def on_start(self, ev):
            dispatcher = ev.data.get("dispatcher")
            func = getattr(dispatcher, "py_func", None)
            if _hook is None or func is None or not func.__module__.startswith(__package__ + "."):
                return
            if type(getattr(dispatcher, "_cache", None)).__name__ == "NullCache":
                return  # a helper compiled as part of a kernel: the kernel was announced
            args = ev.data.get("args") or ()
            dtype = next((str(a.dtype) for a in args if hasattr(a, "dtype")), "")
            _hook(f"compiling {func.__name__}{f' for {dtype}' if dtype else ''} "
                  "(first run only; cached afterwards)")

        def on_end(self, ev):
            pass

    event.register("numba:compile", _Notice())
    _listening = True


def cache_dir(func) -> str:
    """Where a kernel (a numba dispatcher with cache=True) keeps its compiled code."""
    return func._cache._cache_path

