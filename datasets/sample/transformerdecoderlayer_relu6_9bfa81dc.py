"""Level 2: TransformerDecoderLayer -> ReLU6. Synthesized by caf_agent_data from torch.nn.TransformerDecoderLayer, torch.nn.ReLU6."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.TransformerDecoderLayer(128, 4, dim_feedforward=256, batch_first=True)
        self.op1 = nn.ReLU6()

    def forward(self, x):
        x = self.op0(x, x)
        x = self.op1(x)
        return x


batch_size = 4
input_shape = (32, 128)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
