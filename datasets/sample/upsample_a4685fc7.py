"""Level 1: Upsample. Synthesized by caf_agent_data from torch.nn.Upsample."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Upsample(scale_factor=2, mode='nearest')

    def forward(self, x):
        x = self.op0(x)
        return x


batch_size = 2
input_shape = (4, 8, 8, 8)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
