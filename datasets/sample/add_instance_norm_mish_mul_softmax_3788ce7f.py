"""Level 2: add -> instance_norm -> mish -> mul -> Softmax. Synthesized by caf_agent_data from torch.add, torch.nn.functional.instance_norm, torch.nn.functional.mish, torch.mul, torch.nn.Softmax."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op4 = nn.Softmax(dim=1)

    def forward(self, x):
        x = x + 1.0
        x = F.instance_norm(x)
        x = F.mish(x)
        x = x * 2.0
        x = self.op4(x)
        return x


batch_size = 2
input_shape = (16, 16, 16)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
