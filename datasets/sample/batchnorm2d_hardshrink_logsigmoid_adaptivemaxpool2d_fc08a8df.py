"""Level 2: BatchNorm2d -> Hardshrink -> LogSigmoid -> AdaptiveMaxPool2d. Synthesized by caf_agent_data from torch.nn.BatchNorm2d, torch.nn.Hardshrink, torch.nn.LogSigmoid, torch.nn.AdaptiveMaxPool2d."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.BatchNorm2d(4)
        self.op1 = nn.Hardshrink(0.5)
        self.op2 = nn.LogSigmoid()
        self.op3 = nn.AdaptiveMaxPool2d(1)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        x = self.op3(x)
        return x


batch_size = 4
input_shape = (4, 16, 16)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
