"""The closed vocabulary of steps (CONTRACT §4): each kind's title, axes, formula and the
plain-words reason it exists. The tracer, the TUI and the exports all read it from here."""
from __future__ import annotations

from dataclasses import dataclass

# kind: (title, axes in the rows layout, why it is done, in plain words)
KINDS = {
    "x": ("Input", ("token", "d_model"),
          "Each token enters as a vector of features (its embedding). Everything below is computed "
          "from these numbers and the weight matrices."),
    "q": ("Queries", ("token", "d_k"),
          "A query is what a token is looking for. It is the token's features passed through W_Q, "
          "a matrix the model learns."),
    "k": ("Keys", ("token", "d_k"),
          "A key is what a token offers to be found by. Queries are compared with keys; a separate "
          "matrix W_K lets 'what I look for' differ from 'what I am'."),
    "v_down": ("Values, down-projected", ("token", "rank"),
               "A low-rank value map first squeezes each token into a few numbers (W_V↓), then spreads "
               "them back out (W_V↑): far fewer parameters than a full W_V."),
    "v": ("Values", ("token", "d_v"),
          "A value is what a token hands over once it is attended to. The output mixes values, not "
          "the raw inputs."),
    "scores": ("Scores", ("query", "key"),
               "Each score is the dot product of one query with one key: large when they point the same "
               "way, a similarity. Every query is compared with every key."),
    "scaled": ("Scaled scores", ("query", "key"),
               "A dot product of d_k random terms has a spread that grows like √d_k; dividing by √d_k keeps "
               "the scores in a range where softmax does not saturate into all-or-nothing. By hand, ⌊x/2⌋ "
               "stands in for ÷√3 so that every number stays a whole number."),
    "masked": ("Masked scores", ("query", "key"),
               "A GPT-style model predicts the next word, so a token must not see the ones after it: those "
               "scores become −∞, whose power is exactly 0, so they get no weight at all."),
    "exp": ("Powers", ("query", "key"),
            "Softmax raises a base to each score, which makes every number positive and stretches the "
            "gaps between them. Real code subtracts each query's largest score first: the same weights "
            "in the end, but no power can overflow. By hand, 3ˣ replaces eˣ to keep fractions simple."),
    "sums": ("Sums of powers", ("query", "one"),
             "Each query's powers are added up; dividing by this sum makes its weights add up to 1."),
    "weights": ("Attention weights", ("query", "key"),
                "How much each query attends to each key: the powers divided by their sum, so each "
                "query's weights form a probability distribution (ReLU instead: max(0, score), unnormalised)."),
    "z": ("Head output", ("token", "d_v"),
          "Each token's output is the average of all the values, weighted by its attention: a token "
          "takes in what the tokens it attends to carry."),
    "concat": ("Heads side by side", ("token", "d_v"),
               "Several heads run in parallel, each with its own W_Q, W_K, W_V, so each can learn a "
               "different relation (who did what, what refers to what); their outputs are joined."),
    "out": ("Output projection", ("token", "d_out"),
            "W_O mixes the joined heads back into one vector per token, of the width the next layer expects."),
    "residual": ("Residual", ("token", "d_model"),
                 "The attention output is added to the input rather than replacing it: the layer only "
                 "has to learn a change, and the original signal survives deep stacks."),
    "norm": ("Layer norm", ("token", "d_model"),
             "Each token's vector is shifted to mean 0 and scaled to variance 1, keeping numbers in a "
             "steady range from layer to layer (learned gain and bias left out)."),
}


@dataclass(frozen=True)
class Step:
    """One recorded intermediate: where it sits, how it is computed, its axes and shape
    (in the trace's layout). The array itself is `trace[step.id]`."""
    id: str
    kind: str
    head: int | None
    formula: str
    inputs: tuple[str, ...]
    axes: tuple[str, str]
    shape: tuple[int, int]

    @property
    def title(self) -> str:
        title = KINDS[self.kind][0]
        return f"{title} (head {self.head})" if self.head is not None else title

    @property
    def why(self) -> str:
        return KINDS[self.kind][2]

    def describe(self) -> dict:
        return dict(id=self.id, title=self.title, formula=self.formula, inputs=list(self.inputs),
                    axes=list(self.axes), shape=list(self.shape))


def formula(kind: str, columns: bool, arithmetic, d_k: int, mask, heads: int = 1) -> str:
    """The step's formula as the layout writes it, with the arithmetic in force."""
    if kind in ("q", "k", "v_down"):
        w = {"q": "W_Q", "k": "W_K", "v_down": "W_V↓"}[kind]
        name = {"q": "Q", "k": "K", "v_down": "V↓"}[kind]
        return f"{name} = {w}·X" if columns else f"{name} = X·{w}"
    if kind == "v":
        return None  # set by the caller: it depends on the low-rank map
    if kind == "scores":
        return "S = Kᵀ·Q" if columns else "S = Q·Kᵀ"
    if kind == "scaled":
        c = arithmetic.scale_divisor(d_k)
        if arithmetic.scale == "sqrt":
            return f"S ÷ √d_k = S ÷ √{d_k}"
        if arithmetic.scale == "floor":
            return f"⌊S ÷ {c:g}⌋   (÷{c:g} stands in for ÷√{d_k})"
        return "S   (not scaled)" if c is None else f"S ÷ {c:g}"
    if kind == "masked":
        return ("S, with −∞ where the key comes after the query (causal)" if isinstance(mask, str)
                else "S, with −∞ where the mask forbids the key")
    if kind == "exp":
        base = "e" if arithmetic.softmax_base == "e" else f"{arithmetic.base:g}"
        return f"{base}^(s − max)   (each query's max subtracted)" if arithmetic.stable else f"{base}^s"
    if kind == "sums":
        return "Σ of each column of powers" if columns else "Σ of each row of powers"
    if kind == "weights":
        return "A = max(0, s)" if arithmetic.normalize == "relu" else "A = powers ÷ sums"
    if kind == "z":
        return "Z = V·A" if columns else "Z = A·V"
    if kind == "concat":
        return f"the {heads} heads' Z stacked" if columns else f"the {heads} heads' Z side by side"
    if kind == "out":
        return "O = W_O·Z" if columns else "O = Z·W_O"
    if kind == "residual":
        return "R = X + O"
    if kind == "norm":
        return "(r − mean) ÷ √(variance + ε), per token"
    return "X"
