"""Level 2: Qwen2RMSNorm -> ReLU -> MultiheadAttention. Synthesized by caf_agent_data from transformers.models.qwen2.modeling_qwen2.Qwen2RMSNorm, torch.nn.ReLU, torch.nn.MultiheadAttention."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers.models.qwen2.modeling_qwen2 import Qwen2RMSNorm


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = Qwen2RMSNorm(32)
        self.op1 = nn.ReLU()
        self.op2 = nn.MultiheadAttention(32, 4, batch_first=True)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x, x, x, need_weights=False)[0]
        return x


batch_size = 8
input_shape = (8, 32)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
