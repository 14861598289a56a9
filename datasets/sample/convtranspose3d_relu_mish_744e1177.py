"""Level 2: ConvTranspose3d -> ReLU -> Mish. Synthesized by caf_agent_data from torch.nn.ConvTranspose3d, torch.nn.ReLU, torch.nn.Mish."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.ConvTranspose3d(8, 8, kernel_size=3, stride=2, padding=1, output_padding=1)
        self.op1 = nn.ReLU()
        self.op2 = nn.Mish()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        return x


batch_size = 2
input_shape = (8, 4, 4, 4)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
