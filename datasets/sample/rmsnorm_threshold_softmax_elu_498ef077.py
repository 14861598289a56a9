"""Level 2: RMSNorm -> Threshold -> Softmax -> elu. Synthesized by caf_agent_data from torch.nn.RMSNorm, torch.nn.Threshold, torch.nn.Softmax, torch.nn.functional.elu."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.RMSNorm(128)
        self.op1 = nn.Threshold(0.1, 0.0)
        self.op2 = nn.Softmax(dim=1)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        x = F.elu(x)
        return x


batch_size = 8
input_shape = (128,)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
