"""Level 2: MistralRMSNorm -> hardsigmoid -> MultiheadAttention -> mul -> instance_norm. Synthesized by caf_agent_data from transformers.models.mistral.modeling_mistral.MistralRMSNorm, torch.nn.functional.hardsigmoid, torch.nn.MultiheadAttention, torch.mul, torch.nn.functional.instance_norm."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers.models.mistral.modeling_mistral import MistralRMSNorm


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = MistralRMSNorm(128)
        self.op2 = nn.MultiheadAttention(128, 2, batch_first=True)

    def forward(self, x):
        x = self.op0(x)
        x = F.hardsigmoid(x)
        x = self.op2(x, x, x, need_weights=False)[0]
        x = x * 0.5
        x = F.instance_norm(x)
        return x


batch_size = 8
input_shape = (8, 128)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
