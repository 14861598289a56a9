"""tools/make_tiny_tokenizer.py writes a tokenizer that transformers and the
C++ tokenizer both load and that encode identically."""
import json
import shutil
import subprocess
import sys

from transformers import AutoTokenizer

from cafagent_testlib import REPO
from test_tokenizer_parity import CORPUS


def make(out, vocab_size=1024, corpus_root=REPO):
    subprocess.run([sys.executable, str(REPO / "tools" / "make_tiny_tokenizer.py"), "--out", str(out),
                    "--vocab-size", str(vocab_size), "--corpus-root", str(corpus_root)],
                   check=True, capture_output=True)


def test_tiny_tokenizer_loads_and_matches(tmp_path, text_tool):
    make(tmp_path / "a")
    tok = AutoTokenizer.from_pretrained(str(tmp_path / "a"))
    assert 300 < len(tok) <= 1024 + 8
    msgs = [{"role": "user", "content": "hi"}]
    text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert text.endswith("<|im_start|>assistant\n")
    inp = tmp_path / "texts.json"
    inp.write_text(json.dumps(CORPUS), encoding="utf-8")
    got = text_tool("encode-batch", tmp_path / "a" / "tokenizer.json", inp)["ids"]
    assert got == [tok(t, add_special_tokens=False)["input_ids"] for t in CORPUS]


def test_tiny_tokenizer_is_deterministic(tmp_path):
    # A frozen copy of some sources: the live tree may change between the runs.
    src = tmp_path / "src"
    shutil.copytree(REPO / "policy" / "text", src, ignore=shutil.ignore_patterns("*.inc"))
    make(tmp_path / "a", 600, src)
    make(tmp_path / "b", 600, src)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
