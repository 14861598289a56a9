"""Level 2: Linear -> LocalResponseNorm -> CircularPad2d -> AdaptiveAvgPool2d -> AdaptiveMaxPool2d. Synthesized by caf_agent_data from torch.nn.Linear, torch.nn.LocalResponseNorm, torch.nn.CircularPad2d, torch.nn.AdaptiveAvgPool2d, torch.nn.AdaptiveMaxPool2d."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Linear(16, 128)
        self.op1 = nn.LocalResponseNorm(2)
        self.op2 = nn.CircularPad2d(2)
        self.op3 = nn.AdaptiveAvgPool2d(4)
        self.op4 = nn.AdaptiveMaxPool2d(1)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        x = self.op3(x)
        x = self.op4(x)
        return x


batch_size = 4
input_shape = (16, 16, 16)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
