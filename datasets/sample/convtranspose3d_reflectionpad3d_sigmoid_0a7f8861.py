"""Level 2: ConvTranspose3d -> ReflectionPad3d -> Sigmoid. Synthesized by caf_agent_data from torch.nn.ConvTranspose3d, torch.nn.ReflectionPad3d, torch.nn.Sigmoid."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.ConvTranspose3d(8, 8, kernel_size=3, stride=2, padding=1, output_padding=1)
        self.op1 = nn.ReflectionPad3d(2)
        self.op2 = nn.Sigmoid()

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
