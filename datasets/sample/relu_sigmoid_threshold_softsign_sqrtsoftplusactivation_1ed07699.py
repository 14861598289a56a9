"""Level 2: ReLU -> Sigmoid -> Threshold -> softsign -> SqrtSoftplusActivation. Synthesized by caf_agent_data from torch.nn.ReLU, torch.nn.Sigmoid, torch.nn.Threshold, torch.nn.functional.softsign, transformers.activations.SqrtSoftplusActivation."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers.activations import SqrtSoftplusActivation


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.ReLU()
        self.op1 = nn.Sigmoid()
        self.op2 = nn.Threshold(0.5, -1.0)
        self.op4 = SqrtSoftplusActivation()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        x = F.softsign(x)
        x = self.op4(x)
        return x


batch_size = 2
input_shape = (8, 4, 4, 4)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
