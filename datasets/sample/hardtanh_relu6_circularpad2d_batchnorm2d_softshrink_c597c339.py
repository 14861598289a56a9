"""Level 2: Hardtanh -> relu6 -> CircularPad2d -> BatchNorm2d -> Softshrink. Synthesized by caf_agent_data from torch.nn.Hardtanh, torch.nn.functional.relu6, torch.nn.CircularPad2d, torch.nn.BatchNorm2d, torch.nn.Softshrink."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Hardtanh()
        self.op2 = nn.CircularPad2d(1)
        self.op3 = nn.BatchNorm2d(8)
        self.op4 = nn.Softshrink(0.5)

    def forward(self, x):
        x = self.op0(x)
        x = F.relu6(x)
        x = self.op2(x)
        x = self.op3(x)
        x = self.op4(x)
        return x


batch_size = 2
input_shape = (8, 16, 16)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
