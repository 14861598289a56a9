"""Level 2: LayerNorm -> tanh -> ReLU6. Synthesized by caf_agent_data from torch.nn.LayerNorm, torch.tanh, torch.nn.ReLU6."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.LayerNorm(8)
        self.op2 = nn.ReLU6()

    def forward(self, x):
        x = self.op0(x)
        x = x + torch.tanh(x) * 0.5
        x = self.op2(x)
        return x


batch_size = 4
input_shape = (16, 8, 8)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
