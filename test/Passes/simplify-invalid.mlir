// RUN: ipu-opt %s --ipu-simplify --verify-diagnostics

// The pass never sees invalid ipu IR: the verifier rejects it before the pass runs.
func.func @bad_input(%x: tensor<4xf32>) -> tensor<2x4xf32> {
  %one = "ipu.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  // expected-error @+1 {{'ipu.mul' op result shape 2x4 is not the broadcast shape 4 of its operands}}
  %0 = "ipu.mul"(%x, %one) : (tensor<4xf32>, tensor<f32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}
