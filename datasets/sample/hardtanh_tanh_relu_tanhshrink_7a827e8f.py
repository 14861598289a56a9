"""Level 2: Hardtanh -> tanh -> ReLU -> tanhshrink. Synthesized by caf_agent_data from torch.nn.Hardtanh, torch.tanh, torch.nn.ReLU, torch.nn.functional.tanhshrink."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Hardtanh()
        self.op2 = nn.ReLU()

    def forward(self, x):
        x = self.op0(x)
        x = x + torch.tanh(x) * 0.5
        x = self.op2(x)
        x = F.tanhshrink(x)
        return x


batch_size = 16
input_shape = (64,)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
