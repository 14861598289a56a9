"""Level 2: BatchNorm3d -> mean -> ELU -> log_softmax -> selu. Synthesized by caf_agent_data from torch.nn.BatchNorm3d, torch.mean, torch.nn.ELU, torch.nn.functional.log_softmax, torch.nn.functional.selu."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.BatchNorm3d(8)
        self.op2 = nn.ELU(alpha=0.5)

    def forward(self, x):
        x = self.op0(x)
        x = torch.mean(x, dim=1, keepdim=True)
        x = self.op2(x)
        x = F.log_softmax(x, dim=-1)
        x = F.selu(x)
        return x


batch_size = 2
input_shape = (8, 8, 8, 8)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
