"""Level 2: GELU -> logsumexp -> LocalResponseNorm. Synthesized by caf_agent_data from torch.nn.GELU, torch.logsumexp, torch.nn.LocalResponseNorm."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.GELU()
        self.op2 = nn.LocalResponseNorm(3)

    def forward(self, x):
        x = self.op0(x)
        x = torch.logsumexp(x, dim=1, keepdim=True)
        x = self.op2(x)
        return x


batch_size = 8
input_shape = (16, 32)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
