"""poptorch.options (spec 11.1): `Options` and `TensorLocationSettings`, and what they are
built from.

- `options.py`: the `Options` class, its general options and PopTorch's camelCase setters.
- `categories.py`: the option categories (`Training`, `Precision`, `TensorLocations`,
  `Distributed`, `Jit`) and the argument checks every setter uses.
- `strategies.py`: the execution strategies (`PipelinedExecution`, `Stage`, `Phase`...).
- `popart.py`: `Options._Popart`, the PopART session options this compiler honours.
- `config_file.py`: `Options.loadFromFile`'s file format.
- `schema.py`: which options exist, which are compile-time or run-time, and freezing.
- `encoding.py`: an option value as JSON data and as text (`str(options)`).
- `serialise.py`: options to and from a JSON document (executable files, the executable
  cache), run-time options applied to a loaded executable, compile-time differences.

Layers, lowest first (each imports only those before it): `categories`, `popart`, `config_file`,
`schema`, `strategies`, `encoding`, `options`, `serialise`.
"""

from poptorch.options.categories import TensorLocationSettings
from poptorch.options.options import Options

__all__ = ["Options", "TensorLocationSettings"]
