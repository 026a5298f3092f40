"""A hashed bag-of-words instruction encoder that downloads nothing (the language input of
:class:`~upright.vla.tiny.TinyVLA`).

The scheme, :data:`HASHING_SCHEME`, is stored in the ONNX metadata so that a deploy side can reproduce it in a few
lines of any language:

1. lowercase the instruction (Python ``str.lower``);
2. split it into words on every run of characters outside ``[a-z0-9]`` (regex ``[^a-z0-9]+``), dropping empty words;
3. word id = ``1 + crc32(word encoded as UTF-8) mod (vocab_size - 1)`` (zlib's CRC-32, the one of gzip and PNG,
   unsigned 32 bit), so ids are in 1..vocab_size-1 and 0 is the padding id;
4. keep the first ``max_tokens`` words; pad with id 0 to ``max_tokens``; the mask is 1 for a word, 0 for padding.

CRC-32 is stable across processes and machines (Python's ``hash`` of a str is salted per process and must not be
used). Different words may share an id (a hashing collision); with a vocabulary of a few thousand buckets and the
few dozen words of robot instructions that is rare, and harmless for a bag of words.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

import torch

HASHING_SCHEME = "lower;split[^a-z0-9]+;id=1+crc32(utf8(word))%(vocab_size-1);pad=0;truncate=first"
"""The scheme in one line, as written to the ONNX metadata key ``vocab_hashing`` (module docstring)."""

_SPLIT = re.compile(r"[^a-z0-9]+")


def words(text: str) -> list[str]:
    """The words of ``text``: lowercased, split on runs of characters outside ``[a-z0-9]``, empty words dropped."""
    return [w for w in _SPLIT.split(text.lower()) if w]


def word_id(word: str, vocab_size: int) -> int:
    """``1 + crc32(utf8(word)) mod (vocab_size - 1)``: in 1..vocab_size-1 (0 is padding)."""
    return 1 + zlib.crc32(word.encode("utf-8")) % (vocab_size - 1)


@dataclass(frozen=True)
class HashTokenizer:
    """Instruction strings to fixed-length hashed word ids.

    Args:
        vocab_size: buckets including the padding id 0; >= 2.
        max_tokens: words kept per instruction (the rest are dropped); >= 1.

    Raises:
        ValueError: sizes out of range.
    """

    vocab_size: int = 1024
    max_tokens: int = 16

    def __post_init__(self):
        if self.vocab_size < 2 or self.max_tokens < 1:
            raise ValueError(
                f"HashTokenizer: vocab_size must be >= 2 and max_tokens >= 1, got {self.vocab_size}, {self.max_tokens}"
            )

    def encode(self, texts: list[str] | tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        """Token ids (B, max_tokens) int64 and mask (B, max_tokens) float32 (1 word, 0 padding) for B strings.

        An instruction without any word gets an all-zero row and mask (the policy then sees no language).

        Raises:
            ValueError: ``texts`` is a single string or holds a non-string (pass a list of B strings).
        """
        if isinstance(texts, str) or any(not isinstance(t, str) for t in texts):
            raise ValueError(f"HashTokenizer.encode: pass a list of instruction strings, got {texts!r}")
        ids = torch.zeros(len(texts), self.max_tokens, dtype=torch.int64)
        mask = torch.zeros(len(texts), self.max_tokens, dtype=torch.float32)
        for b, text in enumerate(texts):
            toks = [word_id(w, self.vocab_size) for w in words(text)][: self.max_tokens]
            if toks:
                ids[b, : len(toks)] = torch.tensor(toks, dtype=torch.int64)
                mask[b, : len(toks)] = 1.0
        return ids, mask

    def metadata(self) -> dict[str, object]:
        """The keys that describe this tokenizer in a policy file: ``vocab_hashing``, ``vocab_size``, ``max_tokens``."""
        return {"vocab_hashing": HASHING_SCHEME, "vocab_size": self.vocab_size, "max_tokens": self.max_tokens}
