"""Level 2: Conv1d -> Softsign. Synthesized by caf_agent_data from torch.nn.Conv1d, torch.nn.Softsign."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Conv1d(32, 8, kernel_size=1, stride=2, padding=0)
        self.op1 = nn.Softsign()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        return x


batch_size = 8
input_shape = (32, 32)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
