"""Level 2: InstanceNorm3d -> hardtanh -> InstanceNorm3d -> elu -> Softmin. Synthesized by caf_agent_data from torch.nn.InstanceNorm3d, torch.nn.functional.hardtanh, torch.nn.functional.elu, torch.nn.Softmin."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.InstanceNorm3d(8, affine=True)
        self.op2 = nn.InstanceNorm3d(8, affine=True)
        self.op4 = nn.Softmin(dim=-1)

    def forward(self, x):
        x = self.op0(x)
        x = F.hardtanh(x)
        x = self.op2(x)
        x = F.elu(x)
        x = self.op4(x)
        return x


batch_size = 2
input_shape = (8, 8, 8, 8)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
