"""policy_text_tool encodes and decodes exactly like Hugging Face `tokenizers`."""
import json
import random

from tokenizers import Tokenizer

CORPUS = [
    "",
    "hello world",
    "template <typename T>\n__global__ void k(T* __restrict__ out, const T* in, int n) {\n"
    "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
    "        out[i] = in[i] > T(0) ? in[i] : T(0);\n}\n",
    "def f(x):\n\treturn x ** 2  # square\n\n\n",
    "你好，世界！内核融合减少显存访问。",
    "emoji 🚀🔥👍🏽 👨‍👩‍👧 ❤️ flags 🇯🇵",
    "combining: e\u0301 a\u0308 n\u0303 \u1e9b\u0323 Å vs A\u030a, Hangul 한국어 \u1100\u1161\u11a8",
    "whitespace runs:   a    b\t\t\tc\n\n\n  \n \r\n\r\n   end   ",
    "trailing spaces     ",
    "   leading",
    "digits 1234567890 12 3.14159 1e-9 0xFF 2024-05-01",
    "contractions: I'm you're he's we've they'll I'd it's DON'T WE'RE O'NEIL 'S 'ſ",
    "nbsp\u00a0here, ideographic\u3000space, en\u2002space, line\u2028sep, nel\u0085x",
    "punct!!! ??? ... --- === +++ ;;; {}()[]<>",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"cmd\": \"ls\"}}\n</tool_call>",
    "text<|endoftext|>more<|im_end|><|im_end|>x",
    "<tool_response>\nok\n</tool_response>",
    "partial <|im_sta and <tool_cal tags",
    "mixed 中文English123混合 text",
    "Ωmega µ ß ﬁ ǅ Ǆ ǆ ＡＢＣ ①②③ Ⅻ ٣ ๓",
    "\x00\x01\x7f control chars \x1b[31m",
]


def random_texts(seed, count):
    """Random strings over pieces that stress the pre-tokenizer boundaries."""
    pieces = ["a", "Z", "é", "中", "🚀", "1", "٣", " ", "  ", "\n", "\r\n", "\t", "'s", "'T", "!",
              ".", "<|im_end|>", "<tool_call>", "\u00a0", "\u0301", "_", "x1", "  \n ", "ǅ"]
    rng = random.Random(seed)
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 40))) for _ in range(count)]


def test_encode_matches_tokenizers(tokenizer_file, text_tool, tmp_path):
    ref = Tokenizer.from_file(str(tokenizer_file))
    texts = CORPUS + random_texts(1, 300)
    inp = tmp_path / "texts.json"
    inp.write_text(json.dumps(texts), encoding="utf-8")
    got = text_tool("encode-batch", tokenizer_file, inp)["ids"]
    for text, ids in zip(texts, got):
        assert ids == ref.encode(text, add_special_tokens=False).ids, repr(text)


def test_encode_large_file_matches(tokenizer_file, text_tool, tmp_path):
    ref = Tokenizer.from_file(str(tokenizer_file))
    text = "\n".join(CORPUS) * 50
    inp = tmp_path / "big.txt"
    inp.write_bytes(text.encode("utf-8"))
    assert text_tool("encode", tokenizer_file, inp)["ids"] == ref.encode(text, add_special_tokens=False).ids


def test_decode_matches_tokenizers(tokenizer_file, text_tool, tmp_path):
    ref = Tokenizer.from_file(str(tokenizer_file))
    rng = random.Random(7)
    vocab = ref.get_vocab_size()
    lists = [ref.encode(t, add_special_tokens=False).ids for t in CORPUS]
    # Random ids split UTF-8 characters; both sides must repair them the same way.
    lists += [[rng.randrange(vocab) for _ in range(rng.randint(1, 30))] for _ in range(200)]
    inp = tmp_path / "ids.json"
    inp.write_text(json.dumps(lists))
    got = text_tool("decode-batch", tokenizer_file, inp)
    for ids, text, skipped in zip(lists, got["texts"], got["texts_skip_special"]):
        assert text == ref.decode(ids, skip_special_tokens=False), ids
        assert skipped == ref.decode(ids, skip_special_tokens=True), ids


def test_roundtrip_is_lossless(tokenizer_file, text_tool, tmp_path):
    ref = Tokenizer.from_file(str(tokenizer_file))
    if ref.normalizer is not None:
        return  # NFC changes the text by design
    inp = tmp_path / "texts.json"
    inp.write_text(json.dumps(CORPUS), encoding="utf-8")
    ids = text_tool("encode-batch", tokenizer_file, inp)["ids"]
    out = tmp_path / "ids.json"
    out.write_text(json.dumps(ids))
    assert text_tool("decode-batch", tokenizer_file, out)["texts"] == CORPUS
