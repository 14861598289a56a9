"""Level 2: RMSNorm -> Softsign -> normalize -> BatchNorm1d -> LogSigmoid. Synthesized by caf_agent_data from torch.nn.RMSNorm, torch.nn.Softsign, torch.nn.functional.normalize, torch.nn.BatchNorm1d, torch.nn.LogSigmoid."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.RMSNorm(128)
        self.op1 = nn.Softsign()
        self.op3 = nn.BatchNorm1d(128)
        self.op4 = nn.LogSigmoid()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = F.normalize(x, dim=1)
        x = self.op3(x)
        x = self.op4(x)
        return x


batch_size = 32
input_shape = (128,)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
