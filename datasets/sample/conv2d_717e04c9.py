"""Level 1: Conv2d. Synthesized by caf_agent_data from torch.nn.Conv2d."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Conv2d(16, 32, kernel_size=5, stride=2, padding=2)

    def forward(self, x):
        x = self.op0(x)
        return x


batch_size = 4
input_shape = (16, 32, 32)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
