"""Level 1: InstanceNorm3d. Synthesized by caf_agent_data from torch.nn.InstanceNorm3d."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.InstanceNorm3d(8, affine=True)

    def forward(self, x):
        x = self.op0(x)
        return x


batch_size = 2
input_shape = (8, 4, 4, 4)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
