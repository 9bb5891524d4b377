// RUN: ipu-opt %s --split-input-file --verify-diagnostics

// One case per way an op of dialects/slicing.py can fail to verify.

func.func @dynamic_slice$start_float(%x: tensor<8xf32>, %i: tensor<1xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'ipu.dynamic_slice' op start must hold signless integers, got f32}}
  %0 = "ipu.dynamic_slice"(%x, %i) {dim = 0 : i64, size = 2 : i64} : (tensor<8xf32>, tensor<1xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @dynamic_slice$start_shape(%x: tensor<8xf32>, %i: tensor<2xi32>) -> tensor<2xf32> {
  // expected-error @+1 {{'ipu.dynamic_slice' op start must hold one element, got 2}}
  %0 = "ipu.dynamic_slice"(%x, %i) {dim = 0 : i64, size = 2 : i64} : (tensor<8xf32>, tensor<2xi32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @dynamic_slice$size(%x: tensor<8xf32>, %i: tensor<1xi32>) -> tensor<9xf32> {
  // expected-error @+1 {{'ipu.dynamic_slice' op slice size 9 is not within 1..8, the size of dim 0}}
  %0 = "ipu.dynamic_slice"(%x, %i) {dim = 0 : i64, size = 9 : i64} : (tensor<8xf32>, tensor<1xi32>) -> tensor<9xf32>
  return %0 : tensor<9xf32>
}

// -----

func.func @dynamic_slice$dim(%x: tensor<8xf32>, %i: tensor<1xi32>) -> tensor<2xf32> {
  // expected-error @+1 {{'ipu.dynamic_slice' op attribute 'dim' = 1 is out of range for rank 1}}
  %0 = "ipu.dynamic_slice"(%x, %i) {dim = 1 : i64, size = 2 : i64} : (tensor<8xf32>, tensor<1xi32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @dynamic_slice$result(%x: tensor<8x3xf32>, %i: tensor<1xi32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{'ipu.dynamic_slice' op result type tensor<2x2xf32> should have shape 2x3 and element type f32}}
  %0 = "ipu.dynamic_slice"(%x, %i) {dim = 0 : i64, size = 2 : i64} : (tensor<8x3xf32>, tensor<1xi32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

func.func @dynamic_update$fit(%x: tensor<8x3xf32>, %u: tensor<2x2xf32>, %i: tensor<1xi32>) -> tensor<8x3xf32> {
  // expected-error @+1 {{'ipu.dynamic_update' op update 2x2 does not fit input 8x3 outside dim 0}}
  %0 = "ipu.dynamic_update"(%x, %u, %i) {dim = 0 : i64} : (tensor<8x3xf32>, tensor<2x2xf32>, tensor<1xi32>) -> tensor<8x3xf32>
  return %0 : tensor<8x3xf32>
}

// -----

func.func @dynamic_update$element(%x: tensor<8xf32>, %u: tensor<2xf16>, %i: tensor<1xi32>) -> tensor<8xf32> {
  // expected-error @+1 {{'ipu.dynamic_update' op update tensor<2xf16> must have the rank and element type of input tensor<8xf32>}}
  %0 = "ipu.dynamic_update"(%x, %u, %i) {dim = 0 : i64} : (tensor<8xf32>, tensor<2xf16>, tensor<1xi32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @dynamic_update$result(%x: tensor<8xf32>, %u: tensor<2xf32>, %i: tensor<1xi32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.dynamic_update' op result type tensor<4xf32> should be tensor<8xf32>}}
  %0 = "ipu.dynamic_update"(%x, %u, %i) {dim = 0 : i64} : (tensor<8xf32>, tensor<2xf32>, tensor<1xi32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
