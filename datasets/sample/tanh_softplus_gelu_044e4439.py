"""Level 2: tanh -> Softplus -> GELU. Synthesized by caf_agent_data from torch.nn.functional.tanh, torch.nn.Softplus, torch.nn.GELU."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op1 = nn.Softplus(beta=1.0)
        self.op2 = nn.GELU()

    def forward(self, x):
        x = F.tanh(x)
        x = self.op1(x)
        x = self.op2(x)
        return x


batch_size = 2
input_shape = (4, 4, 4, 4)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
