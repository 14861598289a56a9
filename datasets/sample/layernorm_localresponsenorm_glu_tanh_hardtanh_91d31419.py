"""Level 2: LayerNorm -> LocalResponseNorm -> GLU -> Tanh -> Hardtanh. Synthesized by caf_agent_data from torch.nn.LayerNorm, torch.nn.LocalResponseNorm, torch.nn.GLU, torch.nn.Tanh, torch.nn.Hardtanh."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.LayerNorm(4)
        self.op1 = nn.LocalResponseNorm(5)
        self.op2 = nn.GLU(dim=-1)
        self.op3 = nn.Tanh()
        self.op4 = nn.Hardtanh()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        x = self.op3(x)
        x = self.op4(x)
        return x


batch_size = 2
input_shape = (4, 4, 4, 4)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
