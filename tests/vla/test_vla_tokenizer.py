"""The hashed bag-of-words instruction encoder: the documented scheme, stability across processes, padding."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib

import pytest
import torch

from upright.vla.tokenizer import HASHING_SCHEME, HashTokenizer, word_id, words


def test_words_are_lowercased_and_split_on_non_alphanumerics():
    assert words("Pick-up THE cube!  (v2)") == ["pick", "up", "the", "cube", "v2"]
    assert words(" ,;! ") == []


def test_ids_follow_the_documented_crc32_formula_and_skip_the_padding_id():
    v = 97
    for w in ("pick", "cube", "red", "target", "a", "0"):
        assert word_id(w, v) == 1 + zlib.crc32(w.encode()) % (v - 1)
    ids = [word_id(f"w{i}", v) for i in range(2000)]
    assert min(ids) == 1 and max(ids) == v - 1  # every bucket but the padding id 0 is used
    assert "crc32" in HASHING_SCHEME and "pad=0" in HASHING_SCHEME


def test_encode_pads_truncates_and_masks():
    tok = HashTokenizer(vocab_size=64, max_tokens=4)
    ids, mask = tok.encode(["lift it", "one two three four five six", ""])
    assert ids.dtype == torch.int64 and mask.dtype == torch.float32 and ids.shape == mask.shape == (3, 4)
    assert mask.tolist() == [[1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]]
    assert (ids[mask == 0] == 0).all() and (ids[mask == 1] > 0).all()
    assert ids[1].tolist() == [word_id(w, 64) for w in ("one", "two", "three", "four")]
    same, _ = tok.encode(["LIFT, it."])
    assert torch.equal(same[0], ids[0])
    with pytest.raises(ValueError, match="list of instruction strings"):
        tok.encode("lift it")
    with pytest.raises(ValueError, match="vocab_size"):
        HashTokenizer(vocab_size=1)


def test_ids_are_the_same_in_processes_with_different_string_hash_seeds():
    code = (
        "import json; from upright.vla.tokenizer import HashTokenizer; "
        "print(json.dumps(HashTokenizer(1024, 8).encode(['Pick up the green cube'])[0].tolist()))"
    )
    outs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600, check=False
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        outs.add(proc.stdout.strip())
    here = json.dumps(HashTokenizer(1024, 8).encode(["Pick up the green cube"])[0].tolist())
    assert outs == {here}
