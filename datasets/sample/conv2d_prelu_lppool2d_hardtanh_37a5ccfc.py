"""Level 2: Conv2d -> PReLU -> LPPool2d -> Hardtanh. Synthesized by caf_agent_data from torch.nn.Conv2d, torch.nn.PReLU, torch.nn.LPPool2d, torch.nn.Hardtanh."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Conv2d(16, 8, kernel_size=3, stride=2, padding=1)
        self.op1 = nn.PReLU()
        self.op2 = nn.LPPool2d(2, kernel_size=2, stride=2)
        self.op3 = nn.Hardtanh()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        x = self.op3(x)
        return x


batch_size = 2
input_shape = (16, 32, 32)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
