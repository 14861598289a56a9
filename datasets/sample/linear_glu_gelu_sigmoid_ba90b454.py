"""Level 2: Linear -> glu -> gelu -> sigmoid. Synthesized by caf_agent_data from torch.nn.Linear, torch.nn.functional.glu, torch.nn.functional.gelu, torch.nn.functional.sigmoid."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Linear(8, 128)

    def forward(self, x):
        x = self.op0(x)
        x = F.glu(x, dim=-1)
        x = F.gelu(x, approximate='none')
        x = F.sigmoid(x)
        return x


batch_size = 2
input_shape = (4, 8, 8, 8)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
