"""How much memory a run may take: the one rule every size check uses (scenario sizes, whole or
lazy traces, exports, benchmarks). A leaf module: it imports nothing of the tracer."""
from __future__ import annotations

import os
import sys

EAGER_BYTES = 1 << 30   # traces up to this size are computed whole; larger ones per head on demand
RESIDENT_HEADS = 2      # heads whose full intermediates a lazy trace keeps at once
SHARE = 0.8             # of what the process may have (RAM, address-space and cgroup limits) a run may ask for
SMALL = 1 << 26         # needs below this are never worth asking the OS about


def physical_memory() -> int:
    """Bytes of RAM on this machine (a generous guess where the OS will not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16 * 2**30


def available_memory() -> int:
    """Bytes the OS could give now (MemAvailable), or half the RAM where it will not say."""
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return physical_memory() // 2


def process_limit() -> int | None:
    """What the process's own limits leave room for now: its address space (ulimit -v) less what
    it has mapped already, and its cgroup's limit less what the cgroup uses."""
    limits = []
    try:
        import resource
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft not in (resource.RLIM_INFINITY, -1):
            limits.append(max(0, soft - _mapped()))
    except (ImportError, OSError, ValueError):
        pass
    for path, used in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                       ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        limit = _read_int(path)
        if limit is not None and limit < 1 << 60:
            limits.append(max(0, limit - (_read_int(used) or 0)))
    return min(limits) if limits else None


def _mapped() -> int:
    """Bytes of address space this process has mapped (what ulimit -v counts)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return 0


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def capacity() -> int:
    """What this process could hold at most: RAM, or less under its own limits."""
    limit = process_limit()
    return physical_memory() if limit is None else min(physical_memory(), limit)


def budget() -> int:
    """Bytes one run may ask for now: a share of what the process may hold and of what is free."""
    return int(SHARE * min(capacity(), available_memory()))


def fits(need: int) -> bool:
    if need <= SMALL or need <= budget():
        return True
    pool = sys.modules.get("tracer.kernels.pool")   # recycled buffers waiting for a trace
    if pool is None or not pool.held():
        return False
    pool.release()   # they stand in the way: back to the OS, and ask again
    return need <= budget()


def gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.1f} GiB"


def shortfall(need: int) -> str:
    """The words of a refusal: what is needed, and the limit it runs into."""
    ram, limit, free = physical_memory(), process_limit(), available_memory()
    if need > SHARE * ram:
        why = f"{gib(ram)} of RAM"
    elif limit is not None and need > SHARE * limit:
        why = f"{gib(limit)} left under this process's memory limits"
    else:
        why = f"{gib(free)} free now of {gib(ram)} of RAM"
    return f"needs about {gib(need)}, more than this machine can hold ({why})"
