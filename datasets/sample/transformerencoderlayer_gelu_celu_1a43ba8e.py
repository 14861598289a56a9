"""Level 2: TransformerEncoderLayer -> GELU -> celu. Synthesized by caf_agent_data from torch.nn.TransformerEncoderLayer, torch.nn.GELU, torch.nn.functional.celu."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, batch_first=True)
        self.op1 = nn.GELU()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = F.celu(x)
        return x


batch_size = 8
input_shape = (8, 32)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
