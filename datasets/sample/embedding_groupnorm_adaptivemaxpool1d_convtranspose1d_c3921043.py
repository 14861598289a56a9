"""Level 2: Embedding -> GroupNorm -> AdaptiveMaxPool1d -> ConvTranspose1d. Synthesized by caf_agent_data from torch.nn.Embedding, torch.nn.GroupNorm, torch.nn.AdaptiveMaxPool1d, torch.nn.ConvTranspose1d."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Embedding(NUM_EMBEDDINGS, 64)
        self.op1 = nn.GroupNorm(8, 64)
        self.op2 = nn.AdaptiveMaxPool1d(4)
        self.op3 = nn.ConvTranspose1d(64, 32, kernel_size=1, stride=2, padding=0, output_padding=1)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        x = self.op3(x)
        return x


NUM_EMBEDDINGS = 1000
batch_size = 16
input_shape = (64,)


def get_inputs():
    return [torch.randint(0, NUM_EMBEDDINGS, (batch_size, *input_shape))]


def get_init_inputs():
    return []
