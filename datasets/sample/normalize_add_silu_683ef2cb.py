"""Level 2: normalize -> add -> SiLU. Synthesized by caf_agent_data from torch.nn.functional.normalize, torch.add, torch.nn.SiLU."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op2 = nn.SiLU()

    def forward(self, x):
        x = F.normalize(x, dim=1)
        x = x + 1.0
        x = self.op2(x)
        return x


batch_size = 16
input_shape = (64,)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
