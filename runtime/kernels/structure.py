"""NumPy kernels of the structural ops that compute: nop and print."""

from __future__ import annotations

import numpy as np

from . import kernel, with_ranks


@kernel("ipu.nop")
def nop(x):
    return x


@kernel("ipu.print", static=with_ranks)
def print_tensor(x, title, rank):
    """Print the tensor after its title, once per replica when there are several."""
    copies = np.asarray(x).reshape((-1,) + x.shape[x.ndim - rank:])
    for replica, copy in enumerate(copies):
        label = f"{title} (replica {replica})" if len(copies) > 1 else title
        text = np.array2string(copy)
        print(f"{label}: {text}" if label else text)
    return x
