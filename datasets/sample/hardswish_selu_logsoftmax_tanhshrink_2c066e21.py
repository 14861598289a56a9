"""Level 2: Hardswish -> SELU -> LogSoftmax -> Tanhshrink. Synthesized by caf_agent_data from torch.nn.Hardswish, torch.nn.SELU, torch.nn.LogSoftmax, torch.nn.Tanhshrink."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Hardswish()
        self.op1 = nn.SELU()
        self.op2 = nn.LogSoftmax(dim=1)
        self.op3 = nn.Tanhshrink()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        x = self.op3(x)
        return x


batch_size = 16
input_shape = (256,)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
