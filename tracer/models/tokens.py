"""Text to token ids with the checkpoint's tokenizer.json, and each token as a readable piece:
a space is shown as ␣ (GPT-2's Ġ and SentencePiece's ▁ both become ␣), control characters escaped."""
from __future__ import annotations

from pathlib import Path

from ..errors import ScenarioError
from ..readfile import read_bounded
from .packages import require

SPACE = "␣"
TOKENIZER = "tokenizer.json"
TOKENIZER_BYTES = 256 * 2**20   # the largest vocabularies' tokenizer.json are tens of megabytes
_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _byte_alphabet() -> dict[str, int]:
    """GPT-2's byte-level BPE writes each byte as a printable character: printable Latin-1 bytes
    stand for themselves, the other 68 (space, controls, ...) for chr(256), chr(257), ... in order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    others = [b for b in range(256) if b not in printable]
    table = {chr(b): b for b in printable}
    table.update({chr(256 + i): b for i, b in enumerate(others)})
    return table


BYTES = _byte_alphabet()


def piece(token: str, byte_level: bool) -> str:
    """The token as a person reads it: its text with every space shown as ␣."""
    if byte_level and all(c in BYTES for c in token):
        token = bytes(BYTES[c] for c in token).decode("utf-8", errors="replace")
    token = token.replace("▁", " ").replace(" ", SPACE)
    token = "".join(_ESCAPES.get(c, c if c.isprintable() else f"\\x{ord(c):02x}") for c in token)
    return token or "∅"


def encode(folder: Path, text, positions: int) -> tuple[list[int], list[str]]:
    """The ids of `text` as the model reads it (with the special tokens the tokenizer adds, such
    as Llama's <s>), and their pieces; empty text or more tokens than `positions` is refused."""
    check_text(text)
    tokenizers = require("tokenizers")
    raw = read_bounded(folder / TOKENIZER, TOKENIZER_BYTES, TOKENIZER,
                       "the checkpoint's tokenizer (tokenizer.json)", str(folder))
    tokenizer = _tokenizer_says(lambda: tokenizers.Tokenizer.from_str(raw.decode("utf-8")), "cannot be read", folder)
    return encode_with(tokenizer, text, positions, str(folder))


def check_text(text) -> None:
    if not isinstance(text, str) or not text.strip():
        raise ScenarioError("model.text", "expected some text to tokenize, got "
                            + ("an empty text" if isinstance(text, str) else type(text).__name__))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:   # a command line's undecodable bytes arrive as lone surrogates
        raise ScenarioError("model.text", f"is not UTF-8 text (character {err.start} is an undecodable "
                            "byte); expected text in UTF-8") from None


def encode_with(tokenizer, text: str, positions: int, where: str, name: str = TOKENIZER) -> tuple[list[int], list[str]]:
    """`encode` with a `tokenizers.Tokenizer` already made (a folder's, or a model's in memory)."""
    check_text(text)
    tokenizers = require("tokenizers")
    encoding = _tokenizer_says(lambda: tokenizer.encode(text), "fails on the text", where, name)
    ids = list(encoding.ids)
    if not ids:
        raise ScenarioError("model.text", "expected text that gives at least one token, got none")
    if len(ids) > positions:
        raise ScenarioError("model.text", f"gives {len(ids)} tokens; expected at most {positions}, the "
                            "model's positions")
    byte_level = isinstance(tokenizer.decoder, tokenizers.decoders.ByteLevel)
    return ids, [piece(t, byte_level) for t in encoding.tokens]


def _tokenizer_says(call, failure: str, folder, name: str = TOKENIZER):
    """call(), a failure of the tokenizer's named as tokenizer.json's: the Rust side raises plain
    Exceptions for a bad file, and panics (a BaseException) when a pattern of the file runs past
    the regex engine's backtracking limit."""
    try:
        return call()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as err:
        what = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
        raise ScenarioError(name, f"{failure} ({what}); expected a tokenizer saved by the tokenizers library",
                            str(folder)) from None
