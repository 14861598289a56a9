"""Level 2: celu -> Hardshrink -> ReLU -> softshrink -> Tanh. Synthesized by caf_agent_data from torch.nn.functional.celu, torch.nn.Hardshrink, torch.nn.ReLU, torch.nn.functional.softshrink, torch.nn.Tanh."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op1 = nn.Hardshrink(0.5)
        self.op2 = nn.ReLU()
        self.op4 = nn.Tanh()

    def forward(self, x):
        x = F.celu(x)
        x = self.op1(x)
        x = self.op2(x)
        x = F.softshrink(x)
        x = self.op4(x)
        return x


batch_size = 16
input_shape = (128,)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
