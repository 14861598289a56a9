"""Level 1: LayerNorm over the last dimension with learned affine parameters."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        with torch.no_grad():  # non-trivial affine parameters, so ignoring them fails
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.norm(x)


batch_size = 32
dim = 1024


def get_inputs():
    return [torch.randn(batch_size, dim) * 3 + 1]


def get_init_inputs():
    return [dim]
