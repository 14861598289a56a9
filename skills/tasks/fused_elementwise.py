"""Level 2: a chain of eight elementwise ops on a small tensor (eager pays one dispatch and
one memory pass per op; a fused kernel pays one)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        z = x * 2.0 + y
        z = torch.tanh(z) * 0.5
        z = z + x * y
        z = torch.relu(z) - 0.25
        return torch.sigmoid(z) * y


batch_size = 8
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
