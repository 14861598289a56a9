"""Level 1: Qwen2MLP. Synthesized by caf_agent_data from transformers.models.qwen2.modeling_qwen2.Qwen2MLP."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers.models.qwen2.modeling_qwen2 import Qwen2MLP
from transformers import Qwen2Config


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = Qwen2MLP(Qwen2Config(hidden_size=128, intermediate_size=256, num_attention_heads=2, num_key_value_heads=2, attn_implementation='eager'))

    def forward(self, x):
        x = self.op0(x)
        return x


batch_size = 4
input_shape = (16, 128)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
