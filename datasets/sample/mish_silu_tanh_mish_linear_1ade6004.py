"""Level 2: mish -> SiLU -> tanh -> mish -> Linear. Synthesized by caf_agent_data from torch.nn.functional.mish, torch.nn.SiLU, torch.nn.functional.tanh, torch.nn.Linear."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op1 = nn.SiLU()
        self.op4 = nn.Linear(64, 32)

    def forward(self, x):
        x = F.mish(x)
        x = self.op1(x)
        x = F.tanh(x)
        x = F.mish(x)
        x = self.op4(x)
        return x


batch_size = 16
input_shape = (64,)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
