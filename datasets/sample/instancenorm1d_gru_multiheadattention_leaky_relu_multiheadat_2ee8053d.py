"""Level 2: InstanceNorm1d -> GRU -> MultiheadAttention -> leaky_relu -> MultiheadAttention. Synthesized by caf_agent_data from torch.nn.InstanceNorm1d, torch.nn.GRU, torch.nn.MultiheadAttention, torch.nn.functional.leaky_relu."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.InstanceNorm1d(16, affine=True)
        self.op1 = nn.GRU(128, 64, batch_first=True)
        self.op2 = nn.MultiheadAttention(64, 4, batch_first=True)
        self.op4 = nn.MultiheadAttention(64, 2, batch_first=True)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)[0]
        x = self.op2(x, x, x, need_weights=False)[0]
        x = F.leaky_relu(x, 0.1)
        x = self.op4(x, x, x, need_weights=False)[0]
        return x


batch_size = 4
input_shape = (16, 128)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
