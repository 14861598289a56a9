"""Added tokens with lstrip / rstrip / single_word next to non-ASCII whitespace
and word characters encode exactly as Hugging Face `tokenizers` does."""
import json
import random

import pytest
from tokenizers import AddedToken, Tokenizer

# (content, lstrip, rstrip, single_word, normalized, special)
ADDED = [
    ("<mask>", True, False, False, False, True),
    ("<sep>", False, True, False, False, True),
    ("<both>", True, True, False, True, False),
    ("word", False, False, True, False, False),
    ("wordy", False, False, True, False, False),
    ("[X]", True, True, True, False, True),
    ("中文", False, False, True, True, False),
    ("ab", True, False, True, False, False),
]

SPACES = [" ", "\t", "\n", "\u00a0", "\u3000", "\u2028", "\u2029", "\u2002", "\u200a", "\u202f",
          "\u205f", "\u1680", "\u0085", "\x0b", "\x0c", "\x1c", "\u200b", "\ufeff", "  \u00a0 "]
WORDISH = ["a", "Z", "_", "9", "é", "中", "\u0301", "\u0663", "\u2162", "\u00b2", "\u24b6", "\u200d",
           "-", ".", "🚀", "‿", "ǅ"]


def build(tmp_path_factory, train_tokenizer, variant, nfc):
    path = train_tokenizer(variant, nfc)
    tok = Tokenizer.from_file(str(path))
    for content, lstrip, rstrip, single, normalized, special in ADDED:
        token = AddedToken(content, lstrip=lstrip, rstrip=rstrip, single_word=single,
                           normalized=normalized, special=special)
        if special:
            tok.add_special_tokens([token])
        else:
            tok.add_tokens([token])
    out = tmp_path_factory.mktemp(f"added_{variant}_{int(nfc)}") / "tokenizer.json"
    tok.save(str(out))
    return out


def texts(seed, count):
    rng = random.Random(seed)
    pieces = [a[0] for a in ADDED] + SPACES + WORDISH + ["hello", " x "]
    out = []
    for _ in range(count):
        out.append("".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))))
    for content, *_ in ADDED:  # each token between every kind of neighbour
        for left in SPACES + WORDISH + [""]:
            out.append(left + content + "q")
            out.append("q" + content + left)
            out.append(left * 2 + content + left * 3 + content)
    return out


@pytest.mark.parametrize("variant,nfc", [("qwen2", False), ("llama3", False), ("qwen2", True)],
                         ids=["qwen2", "llama3", "qwen2-nfc"])
def test_added_tokens_next_to_unicode_whitespace(variant, nfc, tmp_path_factory, train_tokenizer, text_tool,
                                                 tmp_path):
    path = build(tmp_path_factory, train_tokenizer, variant, nfc)
    ref = Tokenizer.from_file(str(path))
    batch = texts(3, 600)
    inp = tmp_path / "texts.json"
    inp.write_text(json.dumps(batch), encoding="utf-8")
    got = text_tool("encode-batch", path, inp)["ids"]
    bad = [t for t, ids in zip(batch, got) if ids != ref.encode(t, add_special_tokens=False).ids]
    assert not bad, f"{len(bad)} of {len(batch)} texts differ, e.g. {bad[:5]!r}"
    # The cases the old ASCII-only handling got wrong are in the batch.
    assert any("\u3000<mask>" in t or "<sep>\u00a0" in t for t in batch)
