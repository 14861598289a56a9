"""Level 2: LogSigmoid -> ReflectionPad2d -> GELU -> tanh. Synthesized by caf_agent_data from torch.nn.LogSigmoid, torch.nn.ReflectionPad2d, torch.nn.GELU, torch.nn.functional.tanh."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.LogSigmoid()
        self.op1 = nn.ReflectionPad2d(1)
        self.op2 = nn.GELU()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        x = F.tanh(x)
        return x


batch_size = 4
input_shape = (4, 32, 32)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
