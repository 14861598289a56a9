"""Level 2: relu -> ReLU6 -> ConvTranspose1d -> ReLU6 -> Hardshrink. Synthesized by caf_agent_data from torch.nn.functional.relu, torch.nn.ReLU6, torch.nn.ConvTranspose1d, torch.nn.Hardshrink."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op1 = nn.ReLU6()
        self.op2 = nn.ConvTranspose1d(8, 8, kernel_size=3, stride=1, padding=0)
        self.op3 = nn.ReLU6()
        self.op4 = nn.Hardshrink(0.5)

    def forward(self, x):
        x = F.relu(x)
        x = self.op1(x)
        x = self.op2(x)
        x = self.op3(x)
        x = self.op4(x)
        return x


batch_size = 4
input_shape = (8, 64)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
