"""Level 2: Linear -> hardsigmoid -> ConvTranspose3d -> cumsum. Synthesized by caf_agent_data from torch.nn.Linear, torch.nn.functional.hardsigmoid, torch.nn.ConvTranspose3d, torch.cumsum."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Linear(8, 128)
        self.op2 = nn.ConvTranspose3d(4, 8, kernel_size=3, stride=2, padding=1, output_padding=1)

    def forward(self, x):
        x = self.op0(x)
        x = F.hardsigmoid(x)
        x = self.op2(x)
        x = torch.cumsum(x, dim=-1)
        return x


batch_size = 2
input_shape = (4, 8, 8, 8)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
