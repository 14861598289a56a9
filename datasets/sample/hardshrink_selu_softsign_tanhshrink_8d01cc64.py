"""Level 2: Hardshrink -> SELU -> softsign -> tanhshrink. Synthesized by caf_agent_data from torch.nn.Hardshrink, torch.nn.SELU, torch.nn.functional.softsign, torch.nn.functional.tanhshrink."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Hardshrink(0.5)
        self.op1 = nn.SELU()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = F.softsign(x)
        x = F.tanhshrink(x)
        return x


batch_size = 4
input_shape = (16, 32)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
