"""Level 2: LocalResponseNorm -> GroupNorm. Synthesized by caf_agent_data from torch.nn.LocalResponseNorm, torch.nn.GroupNorm."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.LocalResponseNorm(3)
        self.op1 = nn.GroupNorm(2, 8)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        return x


batch_size = 8
input_shape = (8, 64)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
