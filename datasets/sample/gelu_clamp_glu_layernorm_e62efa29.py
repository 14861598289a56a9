"""Level 2: GELU -> clamp -> glu -> LayerNorm. Synthesized by caf_agent_data from torch.nn.GELU, torch.clamp, torch.nn.functional.glu, torch.nn.LayerNorm."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.GELU()
        self.op3 = nn.LayerNorm(64)

    def forward(self, x):
        x = self.op0(x)
        x = torch.clamp(x, min=-1.0, max=1.0)
        x = F.glu(x, dim=-1)
        x = self.op3(x)
        return x


batch_size = 8
input_shape = (128,)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
