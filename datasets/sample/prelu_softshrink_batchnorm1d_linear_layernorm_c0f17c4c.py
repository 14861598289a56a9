"""Level 2: PReLU -> Softshrink -> BatchNorm1d -> Linear -> LayerNorm. Synthesized by caf_agent_data from torch.nn.PReLU, torch.nn.Softshrink, torch.nn.BatchNorm1d, torch.nn.Linear, torch.nn.LayerNorm."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.PReLU()
        self.op1 = nn.Softshrink(0.5)
        self.op2 = nn.BatchNorm1d(128)
        self.op3 = nn.Linear(128, 128)
        self.op4 = nn.LayerNorm(128)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
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
