"""Level 2: GRU -> Threshold -> Phi3MLP -> InstanceNorm1d -> celu. Synthesized by caf_agent_data from torch.nn.GRU, torch.nn.Threshold, transformers.models.phi3.modeling_phi3.Phi3MLP, torch.nn.InstanceNorm1d, torch.nn.functional.celu."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers.models.phi3.modeling_phi3 import Phi3MLP
from transformers import Phi3Config


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.GRU(128, 32, batch_first=True)
        self.op1 = nn.Threshold(0.1, 0.0)
        self.op2 = Phi3MLP(Phi3Config(hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=4, attn_implementation='eager'))
        self.op3 = nn.InstanceNorm1d(16, affine=True)

    def forward(self, x):
        x = self.op0(x)[0]
        x = self.op1(x)
        x = self.op2(x)
        x = self.op3(x)
        x = F.celu(x)
        return x


batch_size = 8
input_shape = (16, 128)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
