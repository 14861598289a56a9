"""Level 2: SiLU -> Qwen3RMSNorm -> T5DenseGatedActDense -> hardswish. Synthesized by caf_agent_data from torch.nn.SiLU, transformers.models.qwen3.modeling_qwen3.Qwen3RMSNorm, transformers.models.t5.modeling_t5.T5DenseGatedActDense, torch.nn.functional.hardswish."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm
from transformers.models.t5.modeling_t5 import T5DenseGatedActDense
from transformers import T5Config


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.SiLU()
        self.op1 = Qwen3RMSNorm(128)
        self.op2 = T5DenseGatedActDense(T5Config(d_model=128, d_ff=256, num_heads=4, d_kv=32, attn_implementation='eager'))

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        x = F.hardswish(x)
        return x


batch_size = 4
input_shape = (16, 128)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
