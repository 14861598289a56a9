"""Level 2: Qwen2MLP -> ReLU6. Synthesized by caf_agent_data from transformers.models.qwen2.modeling_qwen2.Qwen2MLP, torch.nn.ReLU6."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers.models.qwen2.modeling_qwen2 import Qwen2MLP
from transformers import Qwen2Config


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = Qwen2MLP(Qwen2Config(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=4, attn_implementation='eager'))
        self.op1 = nn.ReLU6()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        return x


batch_size = 8
input_shape = (16, 64)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
