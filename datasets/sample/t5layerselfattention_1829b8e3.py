"""Level 1: T5LayerSelfAttention. Synthesized by caf_agent_data from transformers.models.t5.modeling_t5.T5LayerSelfAttention."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers.models.t5.modeling_t5 import T5LayerSelfAttention
from transformers import T5Config


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = T5LayerSelfAttention(T5Config(d_model=32, d_ff=64, num_heads=2, d_kv=16, attn_implementation='eager'))

    def forward(self, x):
        x = self.op0(x)[0]
        return x


batch_size = 4
input_shape = (16, 32)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
