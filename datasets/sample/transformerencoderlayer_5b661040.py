"""Level 1: TransformerEncoderLayer. Synthesized by caf_agent_data from torch.nn.TransformerEncoderLayer."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.TransformerEncoderLayer(32, 2, dim_feedforward=64, batch_first=True)

    def forward(self, x):
        x = self.op0(x)
        return x


batch_size = 4
input_shape = (16, 32)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
