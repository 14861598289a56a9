"""Level 2: InstanceNorm1d -> PReLU -> LayerNorm. Synthesized by caf_agent_data from torch.nn.InstanceNorm1d, torch.nn.PReLU, torch.nn.LayerNorm."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.InstanceNorm1d(32, affine=True)
        self.op1 = nn.PReLU()
        self.op2 = nn.LayerNorm(64)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        return x


batch_size = 4
input_shape = (32, 64)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
