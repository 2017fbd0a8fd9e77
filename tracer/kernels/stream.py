"""Streaming stores: a row written straight to memory, past the caches.

A trace writes its n × n steps once and reads none of them back while it runs. An ordinary store
first reads its cache line from memory (to own it), then writes it back: twice the traffic. A
streaming (non-temporal) store writes whole lines and skips the read: on this project's machine one
core wrote 26 GB/s so, against 8.6 GB/s with ordinary stores (`python -m bench.limit` measures both).
The values written are the same; only the path to memory differs.
"""
from llvmlite import ir
from numba import njit, types
from numba.core.errors import TypingError
from numba.extending import intrinsic

LINE = 64   # bytes of a cache line, and of the widest vector a streaming store writes at once


@intrinsic
def _line(typingctx, dst, i, src, j):
    """dst[i:i+L] = src[j:j+L] as one streaming store of a cache line (L = 64 bytes of the dtype);
    dst's element i must start a line. The load from src may sit anywhere."""
    if not (isinstance(dst, types.Array) and isinstance(src, types.Array) and dst.dtype == src.dtype):
        raise TypingError("_line: expected two arrays of one dtype")

    def codegen(context, builder, sig, args):
        d, _, s, _ = (context.make_array(t)(context, builder, a) if isinstance(t, types.Array) else a
                      for t, a in zip(sig.args, args))
        elt = context.get_value_type(sig.args[0].dtype)
        vec = ir.VectorType(elt, LINE // context.get_abi_sizeof(elt)).as_pointer()
        value = builder.load(builder.bitcast(builder.gep(s.data, [args[3]]), vec), align=1)
        store = builder.store(value, builder.bitcast(builder.gep(d.data, [args[1]]), vec), align=LINE)
        store.set_metadata("nontemporal", builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)]))
        return context.get_dummy_value()
    return types.void(dst, types.intp, src, types.intp), codegen


@intrinsic
def fence(typingctx):
    """Orders the streaming stores before anything that follows (they bypass the usual ordering):
    another thread that reads the rows after the kernel sees them whole."""
    def codegen(context, builder, sig, args):
        builder.fence("seq_cst")
        return context.get_dummy_value()
    return types.void(), codegen


@njit(inline="always")
def stream(dst, src):
    """dst[:] = src[:n] for a contiguous row dst of n numbers: whole lines by streaming stores, the
    part before dst's first line and after its last by ordinary ones. Call fence() before others
    read dst."""
    n, size = dst.shape[0], dst.itemsize
    lanes = LINE // size
    head = min(n, (-dst.ctypes.data) % LINE // size)
    for j in range(head):
        dst[j] = src[j]
    stop = head + (n - head) // lanes * lanes
    for j in range(head, stop, lanes):
        _line(dst, j, src, j)
    for j in range(stop, n):
        dst[j] = src[j]
