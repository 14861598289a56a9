"""Level 2: LocalResponseNorm -> RReLU -> InstanceNorm2d. Synthesized by caf_agent_data from torch.nn.LocalResponseNorm, torch.nn.RReLU, torch.nn.InstanceNorm2d."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.LocalResponseNorm(2)
        self.op1 = nn.RReLU()
        self.op2 = nn.InstanceNorm2d(4, affine=True)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        return x


batch_size = 4
input_shape = (4, 16, 16)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
