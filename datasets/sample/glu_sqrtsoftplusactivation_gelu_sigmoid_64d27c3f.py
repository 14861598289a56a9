"""Level 2: GLU -> SqrtSoftplusActivation -> gelu -> Sigmoid. Synthesized by caf_agent_data from torch.nn.GLU, transformers.activations.SqrtSoftplusActivation, torch.nn.functional.gelu, torch.nn.Sigmoid."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers.activations import SqrtSoftplusActivation


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.GLU(dim=-1)
        self.op1 = SqrtSoftplusActivation()
        self.op3 = nn.Sigmoid()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = F.gelu(x, approximate='none')
        x = self.op3(x)
        return x


batch_size = 2
input_shape = (8, 16, 16)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
