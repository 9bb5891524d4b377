"""From nn.Module to the MLIR torch dialect.

- `capture.py`: torch.export of an inference model and its import with torch-mlir's
  FxImporter, inputs flattened and narrowed, errors at the user's line.
- `joint.py`: the training capture, one joint forward + backward graph.
- `annotations.py`: `Block`, `BeginBlock`, `BlockFunction`... kept as node metadata.
- `tied.py`: one argument per tensor for weights shared between modules.
"""
