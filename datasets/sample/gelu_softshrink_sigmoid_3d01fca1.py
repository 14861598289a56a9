"""Level 2: GELU -> Softshrink -> Sigmoid. Synthesized by caf_agent_data from torch.nn.GELU, torch.nn.Softshrink, torch.nn.Sigmoid."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.GELU()
        self.op1 = nn.Softshrink(0.25)
        self.op2 = nn.Sigmoid()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        return x


batch_size = 2
input_shape = (8, 8, 8, 8)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
