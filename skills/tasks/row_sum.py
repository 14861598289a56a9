"""Level 1: a reduction, the sum over the last dimension (keepdim)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sum(x, dim=-1, keepdim=True)


batch_size = 64
dim = 2048


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
