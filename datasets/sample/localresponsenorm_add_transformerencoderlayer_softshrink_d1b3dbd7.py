"""Level 2: LocalResponseNorm -> add -> TransformerEncoderLayer -> Softshrink. Synthesized by caf_agent_data from torch.nn.LocalResponseNorm, torch.add, torch.nn.TransformerEncoderLayer, torch.nn.Softshrink."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.LocalResponseNorm(3)
        self.op2 = nn.TransformerEncoderLayer(128, 2, dim_feedforward=256, batch_first=True)
        self.op3 = nn.Softshrink(0.25)

    def forward(self, x):
        x = self.op0(x)
        x = x + 0.5
        x = self.op2(x)
        x = self.op3(x)
        return x


batch_size = 4
input_shape = (16, 128)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
