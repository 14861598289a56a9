"""Small task sources for the dataset tests."""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TASKS = os.path.join(ROOT, "skills", "tasks")

HEADER = "import torch\nimport torch.nn as nn\n\n\n"
FOOTER = """

batch_size = 8
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
"""


def task(forward_body: str, init_body: str = "", footer: str = FOOTER, doc: str = '"""Level 1: test."""\n') -> str:
    """A KernelBench-format source whose forward(self, x) is forward_body (indented 8)."""
    init = "\n".join("        " + line for line in init_body.splitlines())
    fwd = "\n".join("        " + line for line in forward_body.splitlines())
    return (doc + HEADER + "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            + (init + "\n" if init else "") + "\n    def forward(self, x):\n" + fwd + "\n" + footer)


def write(path: str, text: str) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path


def bundled(name: str) -> str:
    with open(os.path.join(TASKS, f"{name}.py")) as f:
        return f.read()
