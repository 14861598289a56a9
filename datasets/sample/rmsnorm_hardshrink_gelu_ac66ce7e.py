"""Level 2: RMSNorm -> Hardshrink -> gelu. Synthesized by caf_agent_data from torch.nn.RMSNorm, torch.nn.Hardshrink, torch.nn.functional.gelu."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.RMSNorm(8)
        self.op1 = nn.Hardshrink(0.25)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = F.gelu(x, approximate='tanh')
        return x


batch_size = 2
input_shape = (8, 8, 8)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
