"""PopTorch's ops beyond spec 4.6's simple ones: one module per family.

`poptorch.ops` holds the identity-like ops (nop, print, checkpoints, identity_loss);
the modules here hold the ops that need more than a torch.library custom op: dynamic
slicing, serialised matrix products, multi-convolutions, the CTC beam search decoder,
control flow (`for_loop`, `cond`), host callbacks (`CPU`) and user custom ops
(`custom_op`). `poptorch/__init__.py` exposes their public names.
"""
