"""Level 2: GroupNorm -> SELU -> Hardtanh -> instance_norm. Synthesized by caf_agent_data from torch.nn.GroupNorm, torch.nn.SELU, torch.nn.Hardtanh, torch.nn.functional.instance_norm."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.GroupNorm(2, 16)
        self.op1 = nn.SELU()
        self.op2 = nn.Hardtanh()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        x = F.instance_norm(x)
        return x


batch_size = 8
input_shape = (16, 128)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
