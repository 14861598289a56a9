"""Level 2: Linear -> Tanh. Synthesized by caf_agent_data from torch.nn.Linear, torch.nn.Tanh."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Linear(32, 32)
        self.op1 = nn.Tanh()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        return x


batch_size = 4
input_shape = (8, 32, 32)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
