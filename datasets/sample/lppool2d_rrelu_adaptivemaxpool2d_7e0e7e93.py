"""Level 2: LPPool2d -> RReLU -> AdaptiveMaxPool2d. Synthesized by caf_agent_data from torch.nn.LPPool2d, torch.nn.RReLU, torch.nn.AdaptiveMaxPool2d."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.LPPool2d(2, kernel_size=2, stride=2)
        self.op1 = nn.RReLU()
        self.op2 = nn.AdaptiveMaxPool2d(1)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        return x


batch_size = 2
input_shape = (4, 16, 16)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
