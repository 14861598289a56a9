"""Level 2: Unfold -> sigmoid -> SELU -> Hardtanh. Synthesized by caf_agent_data from torch.nn.Unfold, torch.nn.functional.sigmoid, torch.nn.SELU, torch.nn.Hardtanh."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Unfold(kernel_size=2)
        self.op2 = nn.SELU()
        self.op3 = nn.Hardtanh()

    def forward(self, x):
        x = self.op0(x)
        x = F.sigmoid(x)
        x = self.op2(x)
        x = self.op3(x)
        return x


batch_size = 2
input_shape = (4, 8, 8)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
