"""Level 2: InstanceNorm1d -> mul -> Qwen2RMSNorm -> BatchNorm1d. Synthesized by caf_agent_data from torch.nn.InstanceNorm1d, torch.mul, transformers.models.qwen2.modeling_qwen2.Qwen2RMSNorm, torch.nn.BatchNorm1d."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers.models.qwen2.modeling_qwen2 import Qwen2RMSNorm


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.InstanceNorm1d(8, affine=True)
        self.op2 = Qwen2RMSNorm(128)
        self.op3 = nn.BatchNorm1d(8)

    def forward(self, x):
        x = self.op0(x)
        x = x * 2.0
        x = self.op2(x)
        x = self.op3(x)
        return x


batch_size = 4
input_shape = (8, 128)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
