"""Level 2: LayerNorm -> LogSoftmax -> gelu -> Upsample -> FastGELUActivation. Synthesized by caf_agent_data from torch.nn.LayerNorm, torch.nn.LogSoftmax, torch.nn.functional.gelu, torch.nn.Upsample, transformers.activations.FastGELUActivation."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers.activations import FastGELUActivation


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.LayerNorm(4)
        self.op1 = nn.LogSoftmax(dim=1)
        self.op3 = nn.Upsample(scale_factor=2, mode='nearest')
        self.op4 = FastGELUActivation()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = F.gelu(x, approximate='none')
        x = self.op3(x)
        x = self.op4(x)
        return x


batch_size = 2
input_shape = (4, 4, 4, 4)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
