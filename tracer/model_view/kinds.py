"""The kinds of layer the model view knows, each declaring what the view shows of it: its label,
its heads, its memory, and one pass of its block that leaves each head's matrix and circuits.
KINDS is the one list the rest reads; the first kind that claims a layer describes it (see the
package's docstring for adding one)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..models.blocks import block
from ..models.config import Config
from ..models.forward import run_block
from . import circuits


@dataclass(frozen=True)
class Memory:
    """What a layer keeps: `per_token` numbers for each token in its cache (keys and values, a
    latent; 0 when it reads another layer's cache), for the last `window` tokens at most (None:
    every token), plus `state` numbers whatever the length (a linear layer's state). `mha_per_token`:
    what multi-head attention would keep a token instead (every head's key and value)."""
    per_token: int
    mha_per_token: int
    window: int | None = None
    state: int = 0
    pooled: tuple[int, int] | None = None   # (m, numbers an entry): one compressed entry every m tokens (DeepSeek V4)

    def numbers(self, context: int) -> int:
        """Numbers kept after `context` tokens."""
        entries = 0 if self.pooled is None else context // self.pooled[0] * self.pooled[1]
        return self.per_token * (context if self.window is None else min(context, self.window)) + self.state + entries

    def words(self) -> str:
        """`256 numbers a token`, `…, the last 4,096 tokens`, `a state of … numbers in all`."""
        said = []
        if self.per_token or not self.state:
            said.append(f"{self.per_token:,} numbers a token" + (f", the last {self.window:,} tokens"
                                                                  if self.window is not None else ""))
        if self.pooled is not None:
            said.append(f"{self.pooled[1]:,} numbers every {self.pooled[0]:,} tokens")
        if self.state:
            said.append(f"a state of {self.state:,} numbers in all")
        return " + ".join(said)


@dataclass
class Row:
    """What the view shows of one layer besides its matrices, for the families whose own forward walks
    their layers (dense2026, hybrid, deepseek_v4): its label, heads, memory, the layer whose W_K and
    W_V its keys and values come from (itself, but where KV is shared), and what its cache is called."""
    label: str
    heads: int
    kv_heads: int
    memory: Memory
    source: int | None = None
    k_eq_v: bool = False
    kv_cache: str = "KV cache"     # or "latent", "state"


@dataclass
class Seen:
    """What one pass of a layer leaves for the view: each head's matrix (heads × n × n: softmax
    weights, or a linear layer's implicit matrix, `signed` then), and each head's circuits' top
    singular values (heads × TOP; None where the layer has no such matrices)."""
    matrices: np.ndarray
    qk: np.ndarray | None
    ov: np.ndarray | None
    signed: bool = False


class Softmax:
    """Softmax attention as forward.py runs it: full or sliding W, rotary or no positions (NoPE),
    ALiBi or learned positions, grouped-query or not. Keeps every group's key and value a token."""
    kv_cache = "KV cache"

    @staticmethod
    def claims(cfg: Config, layer: int) -> bool:
        return True                       # the catch-all: keep it last in KINDS

    def __init__(self, cfg: Config, layer: int):
        self.cfg, self.layer = cfg, layer
        kind = cfg.kinds[layer]
        self.label = "full" if kind.window is None else f"sliding {kind.window}"
        if cfg.family.position == "rotary" and kind.rope is None:
            self.label += ", no positions"
        self.heads, self.kv_heads = cfg.heads, cfg.groups
        self.memory = Memory(2 * cfg.groups * cfg.head_dim, 2 * cfg.heads * cfg.head_dim, kind.window)

    def run(self, x: np.ndarray, tensors) -> tuple[np.ndarray, Seen]:
        seen: dict = {}
        blk = block(tensors, self.cfg, self.layer)
        x = run_block(x, blk, self.cfg, self.layer, seen)
        qk, ov = circuits.grouped(blk.q, blk.k, blk.v, blk.o, self.heads, self.kv_heads)
        return x, Seen(seen["weights"], qk, ov)


class Latent:
    """DeepSeek's multi-head latent attention: each token's latent c_kv and shared rotary key k_pe
    are all the cache keeps; each head rebuilds its own keys and values from them."""
    kv_cache = "latent"

    @staticmethod
    def claims(cfg: Config, layer: int) -> bool:
        return bool(cfg.family.latent)

    def __init__(self, cfg: Config, layer: int):
        from ..mechanisms.latent.compute import cache_per_token
        self.cfg, self.layer, m = cfg, layer, cfg.mla
        self.label, self.heads, self.kv_heads = "latent", cfg.heads, cfg.heads
        # multi-head attention's side as DeepSeek-V2's paper counts it: 2·heads·d_h, d_h the values' width
        sizes = cache_per_token(cfg.heads, m["v"], 1, m["kv_rank"], m["rope"])
        self.memory = Memory(sizes["MLA"], sizes["MHA"], cfg.kinds[layer].window)

    def run(self, x: np.ndarray, tensors) -> tuple[np.ndarray, Seen]:
        seen: dict = {}
        blk = block(tensors, self.cfg, self.layer)
        x = run_block(x, blk, self.cfg, self.layer, seen)
        qk, ov = circuits.latent(blk.latent, self.cfg.mla, self.heads)
        return x, Seen(seen["weights"], qk, ov)


class Indexed(Latent):
    """DeepSeek Sparse Attention (V3.2, GLM-5): latent attention over the keys a lightning indexer
    chose, each query its top k; a GLM-5 "shared" layer reuses the choice of the full layer before.
    Its cache keeps the indexer's key (d_I numbers) beside the latent. Run by models/dsa_block."""
    chosen: dict = {}   # the last full layer's (layer, choice), by the checkpoint's tensors: a shared layer's

    @staticmethod
    def claims(cfg: Config, layer: int) -> bool:
        return bool(cfg.family.indexer)

    def __init__(self, cfg: Config, layer: int):
        super().__init__(cfg, layer)
        c = cfg.parts["indexer"]
        full = c.index["types"][layer] == "full"
        last = max(i for i in range(layer + 1) if c.index["types"][i] == "full")
        self.label = f"latent, top-k {c.index['topk']} " + ("(indexer)" if full else f"(shared from layer {last})")
        # a full layer caches its indexer's key beside the latent; a shared layer has none
        self.memory = Memory(self.memory.per_token + full * c.index["dim"], self.memory.mha_per_token)

    def run(self, x: np.ndarray, tensors) -> tuple[np.ndarray, Seen]:
        from ..models import dsa_block
        c, i = self.cfg.parts["indexer"], self.layer
        pre = "model." if "model.embed_tokens.weight" in tensors else ""
        shared = self.chosen.get(id(tensors)) if c.index["types"][i] == "shared" else None
        p = dsa_block.layer(x, tensors, c, pre, i, shared)
        self.chosen[id(tensors)] = p["idx.selected"]
        x = x + p["out"]
        x = x + dsa_block.mlp(dsa_block.rms(x, tensors[f"{pre}layers.{i}.post_attention_layernorm.weight"], c.eps),
                              tensors, c, pre, i)
        qk, ov = circuits.latent(block(tensors, self.cfg, i).latent, self.cfg.mla, self.heads)
        return x, Seen(p["weights"], qk, ov)


KINDS = [Indexed, Latent, Softmax]   # a new kind goes before Softmax, the catch-all


def kind_of(cfg: Config, layer: int):
    """The first kind in KINDS that claims the layer, made for it."""
    return next(k for k in KINDS if k.claims(cfg, layer))(cfg, layer)
