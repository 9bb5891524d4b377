// RUN: ipu-opt %s --ipu-import-annotations --split-input-file --verify-diagnostics

// The ops' locations come from the model (here: unknown), so diagnostics are @unknown.

func.func @block_not_a_string(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @unknown {{annotation 'ipu.block' must be a string, got 3 : i64}}
  %0 = "ipu.relu"(%x) : (tensor<4xf32>) -> tensor<4xf32> loc(fused<{ipu.block = 3 : i64}>[unknown])
  return %0 : tensor<4xf32>
}

// -----

func.func @two_blocks_fused(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-warning @unknown {{op combines code annotated ipu.block = "A" and "B"; it keeps "A"}}
  %0 = "ipu.relu"(%x) : (tensor<4xf32>) -> tensor<4xf32> loc(fused<{ipu.block = "A"}>[fused<{ipu.block = "B"}>[unknown]])
  return %0 : tensor<4xf32>
}
