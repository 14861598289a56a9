"""Level 2: LayerNorm -> PytorchGELUTanh. Synthesized by caf_agent_data from torch.nn.LayerNorm, transformers.activations.PytorchGELUTanh."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers.activations import PytorchGELUTanh


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.LayerNorm(8)
        self.op1 = PytorchGELUTanh()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        return x


batch_size = 2
input_shape = (4, 8, 8, 8)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
