"""Level 2: ConvTranspose1d -> Sigmoid. Synthesized by caf_agent_data from torch.nn.ConvTranspose1d, torch.nn.Sigmoid."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.ConvTranspose1d(32, 16, kernel_size=5, stride=1, padding=0)
        self.op1 = nn.Sigmoid()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        return x


batch_size = 8
input_shape = (32, 64)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
