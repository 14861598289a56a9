"""Level 2: logsumexp -> leaky_relu -> tanhshrink -> hardshrink -> RReLU. Synthesized by caf_agent_data from torch.logsumexp, torch.nn.functional.leaky_relu, torch.nn.functional.tanhshrink, torch.nn.functional.hardshrink, torch.nn.RReLU."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op4 = nn.RReLU()

    def forward(self, x):
        x = torch.logsumexp(x, dim=-1, keepdim=True)
        x = F.leaky_relu(x, 0.1)
        x = F.tanhshrink(x)
        x = F.hardshrink(x)
        x = self.op4(x)
        return x


batch_size = 2
input_shape = (16, 16, 16)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
