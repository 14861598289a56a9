"""Level 2: Linear -> hardswish -> Hardtanh -> Hardswish -> Softsign. Synthesized by caf_agent_data from torch.nn.Linear, torch.nn.functional.hardswish, torch.nn.Hardtanh, torch.nn.Hardswish, torch.nn.Softsign."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Linear(128, 128)
        self.op2 = nn.Hardtanh()
        self.op3 = nn.Hardswish()
        self.op4 = nn.Softsign()

    def forward(self, x):
        x = self.op0(x)
        x = F.hardswish(x)
        x = self.op2(x)
        x = self.op3(x)
        x = self.op4(x)
        return x


batch_size = 32
input_shape = (128,)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
