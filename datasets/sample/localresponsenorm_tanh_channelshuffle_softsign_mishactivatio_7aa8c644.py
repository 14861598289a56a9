"""Level 2: LocalResponseNorm -> tanh -> ChannelShuffle -> softsign -> MishActivation. Synthesized by caf_agent_data from torch.nn.LocalResponseNorm, torch.nn.functional.tanh, torch.nn.ChannelShuffle, torch.nn.functional.softsign, transformers.activations.MishActivation."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers.activations import MishActivation


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.LocalResponseNorm(3)
        self.op2 = nn.ChannelShuffle(2)
        self.op4 = MishActivation()

    def forward(self, x):
        x = self.op0(x)
        x = F.tanh(x)
        x = self.op2(x)
        x = F.softsign(x)
        x = self.op4(x)
        return x


batch_size = 2
input_shape = (4, 4, 4, 4)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
