"""Level 2: Linear -> silu -> Mish -> elu. Synthesized by caf_agent_data from torch.nn.Linear, torch.nn.functional.silu, torch.nn.Mish, torch.nn.functional.elu."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Linear(256, 256)
        self.op2 = nn.Mish()

    def forward(self, x):
        x = self.op0(x)
        x = F.silu(x)
        x = self.op2(x)
        x = F.elu(x)
        return x


batch_size = 32
input_shape = (256,)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
