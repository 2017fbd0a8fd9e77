"""What numba's loops do not give on their own, written as vector code: streaming stores, and a
row's max four vectors at a time.

Streaming stores write a row straight to memory, past the caches. A trace writes its n × n steps
once and reads none of them back while it runs. An ordinary store first reads its cache line from
memory (to own it), then writes it back: twice the traffic. A streaming (non-temporal) store writes
whole lines and skips the read: on a 2-core Xeon one core wrote 26 GB/s so, against 8.6 GB/s with
ordinary stores (`python -m bench.limit` measures both). The values are the same; only the path to
memory differs.
"""
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
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


@intrinsic
def _max_lines(typingctx, a, stop):
    """max(a[:stop]) for a contiguous row whose `stop` is a multiple of four lines (64 numbers of
    float32, 32 of float64), −∞ for none: four vectors of running maxima, independent of one
    another, where a loop of max() keeps one chain of dependent compares (or one vector of them)."""
    if not (isinstance(a, types.Array) and a.ndim == 1 and isinstance(a.dtype, types.Float)):
        raise TypingError("_max_lines: expected a 1-d float array")

    def codegen(context, builder, sig, args):
        row = context.make_array(sig.args[0])(context, builder, args[0])
        elt = context.get_value_type(sig.args[0].dtype)
        lanes = LINE // context.get_abi_sizeof(elt)
        vec = ir.VectorType(elt, lanes)
        intp = context.get_value_type(types.intp)
        accs = [cgutils.alloca_once_value(builder, ir.Constant(vec, [float("-inf")] * lanes)) for _ in range(4)]
        with cgutils.for_range_slice(builder, ir.Constant(intp, 0), args[1], ir.Constant(intp, 4 * lanes),
                                     intp) as (i, _):
            for k, acc in enumerate(accs):
                at = builder.gep(row.data, [builder.add(i, ir.Constant(intp, k * lanes))])
                v, m = builder.load(builder.bitcast(at, vec.as_pointer()), align=1), builder.load(acc)
                builder.store(builder.select(builder.fcmp_ordered(">", v, m), v, m), acc)
        m = builder.load(accs[0])
        for acc in accs[1:]:
            v = builder.load(acc)
            m = builder.select(builder.fcmp_ordered(">", v, m), v, m)
        name = f"llvm.vector.reduce.fmax.v{lanes}f{context.get_abi_sizeof(elt) * 8}"
        reduce = cgutils.get_or_insert_function(builder.module, ir.FunctionType(elt, [vec]), name)
        return builder.call(reduce, [m])
    return a.dtype(a, types.intp), codegen


@njit(inline="always")
def max_row(a, end):
    """max(a[:end]) of a long row (−∞ for none): whole groups of four lines by vectors, the rest
    one by one. (A max is exact in any order: the same number as a plain loop's.)"""
    stop = end - end % (4 * LINE // a.itemsize)
    m = _max_lines(a, stop)
    for j in range(stop, end):
        m = max(m, a[j])
    return m
