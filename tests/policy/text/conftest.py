"""Fixtures for the policy/text parity tests: the policy_text_tool binary and
byte-level BPE tokenizers trained by Hugging Face `tokenizers`."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tools"))

import make_tiny_tokenizer  # noqa: E402

TEMPLATE_PATH = pathlib.Path(__file__).with_name("qwen25_tools_chat_template.jinja")

# A small mixed training corpus: code, prose, several scripts, emoji.
TRAINING_TEXTS = [
    "__global__ void add(const float* a, const float* b, float* c, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) c[i] = a[i] + b[i];\n}\n",
    "#include <cuda_runtime.h>\n#include <torch/extension.h>\n\ntorch::Tensor forward(torch::Tensor x) {\n"
    "    return x.relu();\n}\n",
    "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
    "        return torch.relu(x) * 2.0\n\ndef get_inputs():\n    return [torch.randn(1024, 1024)]\n",
    "The kernel's speedup wasn't large; we'll fuse the ops. They're 12345 times faster? I'd say 3.14.",
    "中文内核优化，显存带宽是瓶颈。 日本語のテキスト。 Русский текст. ελληνικά. 한국어 문장.",
    "Emoji 🚀🔥👍🏽 café naïve résumé Ünïcödé e\u0301 n\u0303 — “quotes” … ½ ²",
    "    \t  \n\n   spaces   and\ttabs\r\n  end  ",
] * 20


def tool_path():
    build = pathlib.Path(os.environ.get("CAF_AGENT_BUILD_DIR", REPO / "build"))
    return build / "policy" / "text" / "policy_text_tool"


@pytest.fixture(scope="session")
def text_tool():
    """Runs policy_text_tool and returns its parsed JSON output."""
    path = tool_path()
    if not path.exists():
        msg = f"{path} not built (build target policy_text_tool; set CAF_AGENT_BUILD_DIR)"
        if os.environ.get("CAF_AGENT_ALLOW_SKIP") == "1":
            pytest.skip(msg)
        pytest.fail(msg)

    def run(*args):
        proc = subprocess.run([str(path), *map(str, args)], capture_output=True, timeout=120)
        assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")
        return json.loads(proc.stdout.decode("utf-8"))

    return run


@pytest.fixture(scope="session")
def chat_template():
    return TEMPLATE_PATH.read_text(encoding="utf-8")


def _train(tmp_path_factory, variant, nfc):
    out = tmp_path_factory.mktemp(f"tok_{variant}_{'nfc' if nfc else 'raw'}")
    tok = make_tiny_tokenizer.train_tokenizer(TRAINING_TEXTS, 800, variant=variant, nfc=nfc)
    path = out / "tokenizer.json"
    tok.save(str(path))
    return path


@pytest.fixture(scope="session", params=[("qwen2", False), ("gpt2", False), ("llama3", False), ("qwen2", True)],
                ids=["qwen2", "gpt2", "llama3", "qwen2-nfc"])
def tokenizer_file(request, tmp_path_factory):
    """A tokenizer.json trained and saved by `tokenizers`, per pre-tokenizer variant."""
    variant, nfc = request.param
    return _train(tmp_path_factory, variant, nfc)


@pytest.fixture(scope="session")
def train_tokenizer(tmp_path_factory):
    """Trains and saves a tokenizer.json: train_tokenizer(variant, nfc=False) -> path."""
    return lambda variant, nfc=False: _train(tmp_path_factory, variant, nfc)


@pytest.fixture(scope="session")
def qwen_tokenizer_file(tmp_path_factory):
    """The Qwen2-style tokenizer.json (Split regex + ByteLevel)."""
    return _train(tmp_path_factory, "qwen2", False)
