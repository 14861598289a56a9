"""Level 2: SELU -> Hardtanh -> gelu -> AdaptiveMaxPool2d. Synthesized by caf_agent_data from torch.nn.SELU, torch.nn.Hardtanh, torch.nn.functional.gelu, torch.nn.AdaptiveMaxPool2d."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.SELU()
        self.op1 = nn.Hardtanh()
        self.op3 = nn.AdaptiveMaxPool2d(4)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = F.gelu(x, approximate='none')
        x = self.op3(x)
        return x


batch_size = 4
input_shape = (16, 16, 16)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
