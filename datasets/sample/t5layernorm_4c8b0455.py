"""Level 1: T5LayerNorm. Synthesized by caf_agent_data from transformers.models.t5.modeling_t5.T5LayerNorm."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers.models.t5.modeling_t5 import T5LayerNorm


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = T5LayerNorm(32)

    def forward(self, x):
        x = self.op0(x)
        return x


batch_size = 8
input_shape = (32, 32)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
