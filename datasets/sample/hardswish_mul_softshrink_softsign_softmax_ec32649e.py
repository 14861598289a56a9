"""Level 2: Hardswish -> mul -> softshrink -> Softsign -> softmax. Synthesized by caf_agent_data from torch.nn.Hardswish, torch.mul, torch.nn.functional.softshrink, torch.nn.Softsign, torch.nn.functional.softmax."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Hardswish()
        self.op3 = nn.Softsign()

    def forward(self, x):
        x = self.op0(x)
        x = x * 1.5
        x = F.softshrink(x)
        x = self.op3(x)
        x = F.softmax(x, dim=-1)
        return x


batch_size = 4
input_shape = (4, 32, 32)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
