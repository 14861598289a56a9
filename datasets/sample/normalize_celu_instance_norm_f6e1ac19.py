"""Level 2: normalize -> CELU -> instance_norm. Synthesized by caf_agent_data from torch.nn.functional.normalize, torch.nn.CELU, torch.nn.functional.instance_norm."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op1 = nn.CELU(alpha=1.0)

    def forward(self, x):
        x = F.normalize(x, dim=1)
        x = self.op1(x)
        x = F.instance_norm(x)
        return x


batch_size = 2
input_shape = (8, 4, 4, 4)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
