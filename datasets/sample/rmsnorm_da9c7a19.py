"""Level 1: RMSNorm. Synthesized by caf_agent_data from torch.nn.RMSNorm."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.RMSNorm(64)

    def forward(self, x):
        x = self.op0(x)
        return x


batch_size = 8
input_shape = (16, 64)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
