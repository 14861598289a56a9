"""Level 2: GroupNorm -> ReLU -> LocalResponseNorm -> MistralMLP -> AvgPool1d. Synthesized by caf_agent_data from torch.nn.GroupNorm, torch.nn.ReLU, torch.nn.LocalResponseNorm, transformers.models.mistral.modeling_mistral.MistralMLP, torch.nn.AvgPool1d."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers.models.mistral.modeling_mistral import MistralMLP
from transformers import MistralConfig


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.GroupNorm(2, 8)
        self.op1 = nn.ReLU()
        self.op2 = nn.LocalResponseNorm(5)
        self.op3 = MistralMLP(MistralConfig(hidden_size=128, intermediate_size=256, num_attention_heads=2, num_key_value_heads=2, head_dim=64, attn_implementation='eager'))
        self.op4 = nn.AvgPool1d(kernel_size=3, stride=2)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        x = self.op3(x)
        x = self.op4(x)
        return x


batch_size = 4
input_shape = (8, 128)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
