"""Level 2: Hardsigmoid -> ReLU6 -> LogSigmoid -> Linear. Synthesized by caf_agent_data from torch.nn.Hardsigmoid, torch.nn.ReLU6, torch.nn.LogSigmoid, torch.nn.Linear."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Hardsigmoid()
        self.op1 = nn.ReLU6()
        self.op2 = nn.LogSigmoid()
        self.op3 = nn.Linear(256, 128)

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
