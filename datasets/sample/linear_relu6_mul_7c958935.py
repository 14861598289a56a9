"""Level 2: Linear -> relu6 -> mul. Synthesized by caf_agent_data from torch.nn.Linear, torch.nn.functional.relu6, torch.mul."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Linear(64, 256)

    def forward(self, x):
        x = self.op0(x)
        x = F.relu6(x)
        x = x * 1.5
        return x


batch_size = 32
input_shape = (64,)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
