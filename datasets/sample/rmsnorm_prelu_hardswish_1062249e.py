"""Level 2: RMSNorm -> PReLU -> Hardswish. Synthesized by caf_agent_data from torch.nn.RMSNorm, torch.nn.PReLU, torch.nn.Hardswish."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.RMSNorm(16)
        self.op1 = nn.PReLU()
        self.op2 = nn.Hardswish()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        return x


batch_size = 2
input_shape = (8, 16, 16)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
