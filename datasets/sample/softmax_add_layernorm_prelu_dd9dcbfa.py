"""Level 2: softmax -> add -> LayerNorm -> PReLU. Synthesized by caf_agent_data from torch.nn.functional.softmax, torch.add, torch.nn.LayerNorm, torch.nn.PReLU."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op2 = nn.LayerNorm(64)
        self.op3 = nn.PReLU()

    def forward(self, x):
        x = F.softmax(x, dim=-1)
        x = x + 1.0
        x = self.op2(x)
        x = self.op3(x)
        return x


batch_size = 8
input_shape = (8, 64)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
