"""Level 2: instance_norm -> AdaptiveMaxPool1d. Synthesized by caf_agent_data from torch.nn.functional.instance_norm, torch.nn.AdaptiveMaxPool1d."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op1 = nn.AdaptiveMaxPool1d(2)

    def forward(self, x):
        x = F.instance_norm(x)
        x = self.op1(x)
        return x


batch_size = 4
input_shape = (32, 64)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
