"""A layer in its own file, for test_options_effects' sourceLocationExcludes tests: its
op has no lowering (torch.lgamma), so compiling it fails at a source line."""

import torch


class Unsupported(torch.nn.Module):
    def forward(self, x):
        return torch.lgamma(x)  # the helper's line
