"""Level 2: BatchNorm1d -> LayerNorm. Synthesized by caf_agent_data from torch.nn.BatchNorm1d, torch.nn.LayerNorm."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.BatchNorm1d(128)
        self.op1 = nn.LayerNorm(128)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        return x


batch_size = 32
input_shape = (128,)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
