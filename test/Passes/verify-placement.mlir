// RUN: ipu-opt %s --ipu-verify-placement --split-input-file --verify-diagnostics

// Once a function places its ops (ipu.block, ipu.ipu_id, ipu.stage), every computing op
// needs a placement; constants need none (they are cloned into the stages that read them).
func.func @gap(%a: tensor<4xf32>) -> tensor<4xf32> {
  %c = "ipu.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %0 = "ipu.add"(%a, %c) {ipu.block = "A", ipu.ipu_id = 0 : i64} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  // expected-error @+1 {{'ipu.relu' has no placement (ipu.block, ipu.ipu_id or ipu.stage) in a function whose other ops have one; the pass that created it must give it the placement of the op it replaces}}
  %1 = "ipu.relu"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// A model without blocks has nothing to check; a backward op without a block of its own
// is placed by ipu-assign-stages, next to its neighbours.
func.func @no_blocks(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.relu"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func @backward(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.relu"(%a) {ipu.block = "A"} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "ipu.neg"(%0) {ipu.backward = true} : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
