"""Level 2: mul -> SELU -> ReLU -> GELU -> AdaptiveAvgPool2d. Synthesized by caf_agent_data from torch.mul, torch.nn.SELU, torch.nn.ReLU, torch.nn.GELU, torch.nn.AdaptiveAvgPool2d."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op1 = nn.SELU()
        self.op2 = nn.ReLU()
        self.op3 = nn.GELU()
        self.op4 = nn.AdaptiveAvgPool2d(2)

    def forward(self, x):
        x = x * 2.0
        x = self.op1(x)
        x = self.op2(x)
        x = self.op3(x)
        x = self.op4(x)
        return x


batch_size = 2
input_shape = (16, 32, 32)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
