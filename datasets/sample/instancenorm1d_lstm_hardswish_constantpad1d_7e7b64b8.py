"""Level 2: InstanceNorm1d -> LSTM -> hardswish -> ConstantPad1d. Synthesized by caf_agent_data from torch.nn.InstanceNorm1d, torch.nn.LSTM, torch.nn.functional.hardswish, torch.nn.ConstantPad1d."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.InstanceNorm1d(16, affine=True)
        self.op1 = nn.LSTM(128, 32, batch_first=True)
        self.op3 = nn.ConstantPad1d(2, 0.5)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)[0]
        x = F.hardswish(x)
        x = self.op3(x)
        return x


batch_size = 8
input_shape = (16, 128)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
