"""Level 2: RReLU -> BatchNorm3d -> LocalResponseNorm -> CELU. Synthesized by caf_agent_data from torch.nn.RReLU, torch.nn.BatchNorm3d, torch.nn.LocalResponseNorm, torch.nn.CELU."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.RReLU()
        self.op1 = nn.BatchNorm3d(8)
        self.op2 = nn.LocalResponseNorm(5)
        self.op3 = nn.CELU(alpha=2.0)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        x = self.op3(x)
        return x


batch_size = 2
input_shape = (8, 8, 8, 8)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
