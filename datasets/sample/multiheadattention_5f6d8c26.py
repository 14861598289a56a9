"""Level 1: MultiheadAttention. Synthesized by caf_agent_data from torch.nn.MultiheadAttention."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.MultiheadAttention(32, 4, batch_first=True)

    def forward(self, x):
        x = self.op0(x, x, x, need_weights=False)[0]
        return x


batch_size = 8
input_shape = (16, 32)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
