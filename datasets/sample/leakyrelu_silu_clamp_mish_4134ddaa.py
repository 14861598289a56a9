"""Level 2: LeakyReLU -> SiLU -> clamp -> Mish. Synthesized by caf_agent_data from torch.nn.LeakyReLU, torch.nn.SiLU, torch.clamp, torch.nn.Mish."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.LeakyReLU(0.2)
        self.op1 = nn.SiLU()
        self.op3 = nn.Mish()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = torch.clamp(x, min=-1.0, max=1.0)
        x = self.op3(x)
        return x


batch_size = 2
input_shape = (4, 32, 32)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
