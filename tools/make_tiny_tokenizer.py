#!/usr/bin/env python3
"""Creates a small byte-level BPE tokenizer in the Qwen2.5 style.

The tokenizer is trained on a corpus made from this repository's own source
files, so it needs no download. Output (into --out):

    tokenizer.json         Hugging Face `tokenizers` format (BPE, Qwen2 split regex)
    tokenizer_config.json  with the Qwen2.5 tool-calling chat template

Usage:
    python tools/make_tiny_tokenizer.py --out DIR [--vocab-size 3072]

Deterministic: the same source tree and arguments give identical files.
The parity tests (tests/policy/text) import train_tokenizer() from here.
Training is a small Python BPE with a fixed tie-break, because the
`tokenizers` trainer breaks ties differently from run to run.
"""
import argparse
import collections
import heapq
import json
import pathlib
import sys

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

REPO = pathlib.Path(__file__).resolve().parent.parent
CHAT_TEMPLATE = REPO / "tests" / "policy" / "text" / "qwen25_tools_chat_template.jinja"

# Special tokens of the ChatML / tool-call format; the trainer gives them the
# lowest ids (0..4), before the byte alphabet.
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"]
# Added but not special (decode with skip_special_tokens keeps them), as in Qwen2.5.
EXTRA_TOKENS = ["<tool_response>", "</tool_response>"]

QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_REGEX = QWEN2_REGEX.replace(r"\p{N}|", r"\p{N}{1,3}|")

# Source files that make up the corpus. Rationale: code and prose from this
# repository resemble what the agent reads and writes (C++, CUDA, Python, Markdown).
CORPUS_SUFFIXES = {".cpp", ".hpp", ".cu", ".cuh", ".h", ".py", ".md", ".txt", ".toml", ".cmake", ".jinja", ".sh"}
SKIP_DIRS = {".git", ".venv", "node_modules", "__pycache__"}

# A fixed multilingual tail so that the vocabulary is not ASCII-only.
UNICODE_TAIL = [
    "你好，世界！这是一个用于测试的中文句子。内核融合可以减少显存访问。",
    "日本語のテキストも少し。カーネルを速くする。",
    "Ünïcödé façade naïve café résumé — “quotes” ‘single’ … ½ ² № ©",
    "Emoji: 🚀🔥✨👍🏽 👨‍👩‍👧 ❤️",
    "Русский текст и ελληνικά γράμματα, עברית, العربية.",
]


def make_pre_tokenizer(variant):
    """The pre-tokenizer of a variant: "qwen2" / "llama3" (Split regex then
    ByteLevel(use_regex=False)) or "gpt2" (ByteLevel(use_regex=True))."""
    if variant == "gpt2":
        return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    regex = {"qwen2": QWEN2_REGEX, "llama3": LLAMA3_REGEX}[variant]
    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])


def finish_tokenizer(tok, variant, nfc):
    tok.normalizer = normalizers.NFC() if nfc else None
    tok.pre_tokenizer = make_pre_tokenizer(variant)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(SPECIAL_TOKENS)
    tok.add_tokens(EXTRA_TOKENS)
    return tok


def train_tokenizer(texts, vocab_size, variant="qwen2", nfc=False):
    """Trains with the `tokenizers` BpeTrainer (fast; ties between equal pair
    counts are broken differently from run to run)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = make_pre_tokenizer(variant)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return finish_tokenizer(tok, variant, nfc)


def byte_alphabet():
    """The 256 byte-level characters in byte order."""
    printable = [b for b in range(256) if 33 <= b <= 126 or 161 <= b <= 172 or b >= 174]
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


def _pair_counts(words, freqs):
    counts, where = collections.Counter(), collections.defaultdict(set)
    for w, (syms, f) in enumerate(zip(words, freqs)):
        for pair in zip(syms, syms[1:]):
            counts[pair] += f
            where[pair].add(w)
    return counts, where


def _merge_symbols(syms, pair, merged):
    out, i = [], 0
    while i < len(syms):
        if i + 1 < len(syms) and (syms[i], syms[i + 1]) == pair:
            out.append(merged)
            i += 2
        else:
            out.append(syms[i])
            i += 1
    return out


def train_tokenizer_deterministic(texts, vocab_size, variant="qwen2", nfc=False):
    """Trains byte-level BPE in Python with a fixed tie-break (highest count,
    then the lexicographically smallest pair), so the output is reproducible."""
    pre = make_pre_tokenizer(variant)
    word_freq = collections.Counter()
    for text in texts:
        word_freq.update(piece for piece, _ in pre.pre_tokenize_str(text))
    words = [list(w) for w in sorted(word_freq)]
    freqs = [word_freq[w] for w in sorted(word_freq)]
    vocab = {t: i for i, t in enumerate(SPECIAL_TOKENS)}
    for ch in byte_alphabet():
        vocab.setdefault(ch, len(vocab))
    merges = []
    counts, where = _pair_counts(words, freqs)
    heap = [(-c, p) for p, c in counts.items()]
    heapq.heapify(heap)
    while len(vocab) < vocab_size and heap:
        neg, pair = heapq.heappop(heap)
        if counts.get(pair, 0) != -neg:
            continue
        if -neg < 2:  # Rationale: a pair seen once teaches nothing (min_frequency 2).
            break
        merged = pair[0] + pair[1]
        merges.append(pair)
        vocab.setdefault(merged, len(vocab))
        changed = set()
        for w in sorted(where.pop(pair, ())):
            syms, f = words[w], freqs[w]
            for old in zip(syms, syms[1:]):
                counts[old] -= f
                changed.add(old)
            syms = words[w] = _merge_symbols(syms, pair, merged)
            for new in zip(syms, syms[1:]):
                counts[new] += f
                where[new].add(w)
                changed.add(new)
        for p in sorted(changed):
            if counts[p] > 0 and p != pair:
                heapq.heappush(heap, (-counts[p], p))
        counts.pop(pair, None)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    return finish_tokenizer(tok, variant, nfc)


def repo_corpus(root=REPO):
    """The text of the repository's source files, in a fixed order."""
    texts = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part in SKIP_DIRS or part.startswith("build") for part in rel.parts):
            continue
        if not path.is_file() or path.suffix not in CORPUS_SUFFIXES or path.name.endswith(".inc"):
            continue
        try:
            texts.append(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, OSError):
            continue
    return texts + UNICODE_TAIL


def tokenizer_config(chat_template):
    """tokenizer_config.json contents for transformers' AutoTokenizer."""
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 32768,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "add_bos_token": False,
        "clean_up_tokenization_spaces": False,
        "chat_template": chat_template,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=pathlib.Path, help="output directory")
    ap.add_argument("--vocab-size", type=int, default=3072, help="target vocabulary size")
    ap.add_argument("--variant", choices=["qwen2", "llama3", "gpt2"], default="qwen2")
    ap.add_argument("--corpus-root", type=pathlib.Path, default=REPO,
                    help="directory whose source files make the corpus (default: this repository)")
    args = ap.parse_args(argv)
    if args.vocab_size < 300:
        ap.error("--vocab-size must be at least 300 (256 bytes + special tokens + merges)")
    tok = train_tokenizer_deterministic(repo_corpus(args.corpus_root.resolve()), args.vocab_size, args.variant)
    args.out.mkdir(parents=True, exist_ok=True)
    tok.save(str(args.out / "tokenizer.json"))
    config = tokenizer_config(CHAT_TEMPLATE.read_text(encoding="utf-8"))
    (args.out / "tokenizer_config.json").write_text(
        json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out / 'tokenizer.json'} ({tok.get_vocab_size()} tokens)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
