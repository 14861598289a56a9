"""Level 2: InstanceNorm2d -> RMSNorm. Synthesized by caf_agent_data from torch.nn.InstanceNorm2d, torch.nn.RMSNorm."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.InstanceNorm2d(8, affine=True)
        self.op1 = nn.RMSNorm(8)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        return x


batch_size = 2
input_shape = (8, 8, 8)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
