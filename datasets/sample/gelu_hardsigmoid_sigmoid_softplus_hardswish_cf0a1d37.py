"""Level 2: GELU -> hardsigmoid -> Sigmoid -> Softplus -> Hardswish. Synthesized by caf_agent_data from torch.nn.GELU, torch.nn.functional.hardsigmoid, torch.nn.Sigmoid, torch.nn.Softplus, torch.nn.Hardswish."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.GELU()
        self.op2 = nn.Sigmoid()
        self.op3 = nn.Softplus(beta=2.0)
        self.op4 = nn.Hardswish()

    def forward(self, x):
        x = self.op0(x)
        x = F.hardsigmoid(x)
        x = self.op2(x)
        x = self.op3(x)
        x = self.op4(x)
        return x


batch_size = 32
input_shape = (128,)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
