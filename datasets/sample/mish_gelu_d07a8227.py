"""Level 2: mish -> GELU. Synthesized by caf_agent_data from torch.nn.functional.mish, torch.nn.GELU."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op1 = nn.GELU()

    def forward(self, x):
        x = F.mish(x)
        x = self.op1(x)
        return x


batch_size = 4
input_shape = (16, 16, 16)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
