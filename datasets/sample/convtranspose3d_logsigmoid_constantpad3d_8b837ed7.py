"""Level 2: ConvTranspose3d -> logsigmoid -> ConstantPad3d. Synthesized by caf_agent_data from torch.nn.ConvTranspose3d, torch.nn.functional.logsigmoid, torch.nn.ConstantPad3d."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.ConvTranspose3d(4, 4, kernel_size=1, stride=1, padding=0)
        self.op2 = nn.ConstantPad3d(1, 0.5)

    def forward(self, x):
        x = self.op0(x)
        x = F.logsigmoid(x)
        x = self.op2(x)
        return x


batch_size = 2
input_shape = (4, 4, 4, 4)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
