"""Level 2: celu -> MaxPool3d -> tanhshrink -> tanh. Synthesized by caf_agent_data from torch.nn.functional.celu, torch.nn.MaxPool3d, torch.nn.functional.tanhshrink, torch.tanh."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op1 = nn.MaxPool3d(kernel_size=3, stride=2)

    def forward(self, x):
        x = F.celu(x)
        x = self.op1(x)
        x = F.tanhshrink(x)
        x = x + torch.tanh(x) * 1.0
        return x


batch_size = 2
input_shape = (4, 4, 4, 4)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
