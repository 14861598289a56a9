"""Level 2: LeakyReLU -> LogSigmoid -> tanhshrink -> SELU -> clamp. Synthesized by caf_agent_data from torch.nn.LeakyReLU, torch.nn.LogSigmoid, torch.nn.functional.tanhshrink, torch.nn.SELU, torch.clamp."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.LeakyReLU(0.01)
        self.op1 = nn.LogSigmoid()
        self.op3 = nn.SELU()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = F.tanhshrink(x)
        x = self.op3(x)
        x = torch.clamp(x, min=-1.0, max=1.0)
        return x


batch_size = 2
input_shape = (16, 32, 32)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
