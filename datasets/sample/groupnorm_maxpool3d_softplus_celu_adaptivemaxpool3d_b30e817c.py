"""Level 2: GroupNorm -> MaxPool3d -> Softplus -> CELU -> AdaptiveMaxPool3d. Synthesized by caf_agent_data from torch.nn.GroupNorm, torch.nn.MaxPool3d, torch.nn.Softplus, torch.nn.CELU, torch.nn.AdaptiveMaxPool3d."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.GroupNorm(4, 4)
        self.op1 = nn.MaxPool3d(kernel_size=3, stride=2)
        self.op2 = nn.Softplus(beta=1.0)
        self.op3 = nn.CELU(alpha=1.0)
        self.op4 = nn.AdaptiveMaxPool3d(1)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        x = self.op3(x)
        x = self.op4(x)
        return x


batch_size = 2
input_shape = (4, 4, 4, 4)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
