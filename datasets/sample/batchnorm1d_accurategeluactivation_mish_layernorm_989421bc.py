"""Level 2: BatchNorm1d -> AccurateGELUActivation -> Mish -> LayerNorm. Synthesized by caf_agent_data from torch.nn.BatchNorm1d, transformers.activations.AccurateGELUActivation, torch.nn.Mish, torch.nn.LayerNorm."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers.activations import AccurateGELUActivation


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.BatchNorm1d(256)
        self.op1 = AccurateGELUActivation()
        self.op2 = nn.Mish()
        self.op3 = nn.LayerNorm(256)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        x = self.op3(x)
        return x


batch_size = 8
input_shape = (256,)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
