"""Level 2: RMSNorm -> Hardshrink -> cumsum. Synthesized by caf_agent_data from torch.nn.RMSNorm, torch.nn.Hardshrink, torch.cumsum."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.RMSNorm(128)
        self.op1 = nn.Hardshrink(0.5)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = torch.cumsum(x, dim=1)
        return x


batch_size = 4
input_shape = (8, 128)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
