"""Level 1: softmax over wide rows. Outputs are ~1/dim (max ~1e-3 at this input scale), so a
constant-zero answer is within atol everywhere; the judge's relative-L2 check rejects it."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


batch_size = 16
dim = 4096


def get_inputs():
    return [torch.randn(batch_size, dim) * 0.5]


def get_init_inputs():
    return []
