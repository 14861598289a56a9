"""Level 2: BatchNorm2d -> Sigmoid -> Flatten -> RReLU. Synthesized by caf_agent_data from torch.nn.BatchNorm2d, torch.nn.Sigmoid, torch.nn.Flatten, torch.nn.RReLU."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.BatchNorm2d(16)
        self.op1 = nn.Sigmoid()
        self.op2 = nn.Flatten()
        self.op3 = nn.RReLU()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        x = self.op3(x)
        return x


batch_size = 2
input_shape = (16, 32, 32)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
