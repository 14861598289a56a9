"""Level 2: Linear -> ELU -> Linear -> softshrink -> Hardswish. Synthesized by caf_agent_data from torch.nn.Linear, torch.nn.ELU, torch.nn.functional.softshrink, torch.nn.Hardswish."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Linear(128, 256)
        self.op1 = nn.ELU(alpha=0.5)
        self.op2 = nn.Linear(256, 32)
        self.op4 = nn.Hardswish()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        x = F.softshrink(x)
        x = self.op4(x)
        return x


batch_size = 8
input_shape = (128,)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
