"""Level 2: Softplus -> selu -> GLU -> sum -> mean. Synthesized by caf_agent_data from torch.nn.Softplus, torch.nn.functional.selu, torch.nn.GLU, torch.sum, torch.mean."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Softplus(beta=2.0)
        self.op2 = nn.GLU(dim=-1)

    def forward(self, x):
        x = self.op0(x)
        x = F.selu(x)
        x = self.op2(x)
        x = torch.sum(x, dim=-1, keepdim=True)
        x = torch.mean(x, dim=1, keepdim=True)
        return x


batch_size = 2
input_shape = (16, 32, 32)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
