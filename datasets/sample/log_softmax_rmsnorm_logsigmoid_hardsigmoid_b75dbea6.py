"""Level 2: log_softmax -> RMSNorm -> logsigmoid -> hardsigmoid. Synthesized by caf_agent_data from torch.nn.functional.log_softmax, torch.nn.RMSNorm, torch.nn.functional.logsigmoid, torch.nn.functional.hardsigmoid."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op1 = nn.RMSNorm(32)

    def forward(self, x):
        x = F.log_softmax(x, dim=-1)
        x = self.op1(x)
        x = F.logsigmoid(x)
        x = F.hardsigmoid(x)
        return x


batch_size = 4
input_shape = (32, 32)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
