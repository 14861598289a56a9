"""Level 2: Conv1d -> mean -> selu -> CELU. Synthesized by caf_agent_data from torch.nn.Conv1d, torch.mean, torch.nn.functional.selu, torch.nn.CELU."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Conv1d(8, 16, kernel_size=1, stride=2, padding=0)
        self.op3 = nn.CELU(alpha=2.0)

    def forward(self, x):
        x = self.op0(x)
        x = torch.mean(x, dim=-1, keepdim=True)
        x = F.selu(x)
        x = self.op3(x)
        return x


batch_size = 4
input_shape = (8, 64)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
