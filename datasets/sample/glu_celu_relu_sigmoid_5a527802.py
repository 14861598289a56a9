"""Level 2: GLU -> CELU -> relu -> Sigmoid. Synthesized by caf_agent_data from torch.nn.GLU, torch.nn.CELU, torch.nn.functional.relu, torch.nn.Sigmoid."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.GLU(dim=-1)
        self.op1 = nn.CELU(alpha=1.0)
        self.op3 = nn.Sigmoid()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = F.relu(x)
        x = self.op3(x)
        return x


batch_size = 2
input_shape = (4, 8, 8)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
