"""Level 2: RNN -> CELU -> tanh. Synthesized by caf_agent_data from torch.nn.RNN, torch.nn.CELU, torch.nn.functional.tanh."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.RNN(128, 64, batch_first=True)
        self.op1 = nn.CELU(alpha=2.0)

    def forward(self, x):
        x = self.op0(x)[0]
        x = self.op1(x)
        x = F.tanh(x)
        return x


batch_size = 4
input_shape = (8, 128)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
