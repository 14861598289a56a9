"""Level 2: TransformerEncoderLayer -> TransformerDecoderLayer -> Hardswish -> sigmoid -> CELU. Synthesized by caf_agent_data from torch.nn.TransformerEncoderLayer, torch.nn.TransformerDecoderLayer, torch.nn.Hardswish, torch.nn.functional.sigmoid, torch.nn.CELU."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.TransformerEncoderLayer(128, 4, dim_feedforward=256, batch_first=True)
        self.op1 = nn.TransformerDecoderLayer(128, 4, dim_feedforward=256, batch_first=True)
        self.op2 = nn.Hardswish()
        self.op4 = nn.CELU(alpha=2.0)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x, x)
        x = self.op2(x)
        x = F.sigmoid(x)
        x = self.op4(x)
        return x


batch_size = 8
input_shape = (8, 128)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
