"""Level 2: LayerNorm -> Hardswish -> RMSNorm -> hardshrink -> mul. Synthesized by caf_agent_data from torch.nn.LayerNorm, torch.nn.Hardswish, torch.nn.RMSNorm, torch.nn.functional.hardshrink, torch.mul."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.LayerNorm(8)
        self.op1 = nn.Hardswish()
        self.op2 = nn.RMSNorm(8)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        x = F.hardshrink(x)
        x = x * 0.5
        return x


batch_size = 4
input_shape = (8, 8, 8)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
