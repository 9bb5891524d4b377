// RUN: ipu-opt %s --ipu-precision --split-input-file | FileCheck %s --check-prefix=NONE
// RUN: ipu-opt %s --ipu-precision="partials-type=half" --split-input-file | FileCheck %s --check-prefix=HALF
// RUN: ipu-opt %s --ipu-precision="partials-type=float" --split-input-file | FileCheck %s --check-prefix=FLOAT
// RUN: ipu-opt %s --ipu-precision="stable-norm=false" --split-input-file | FileCheck %s --check-prefix=PLAIN
// RUN: ipu-opt %s --ipu-precision="stochastic-rounding=true floating-point-exceptions=true" --split-input-file | FileCheck %s --check-prefix=SR

// An f16 matmul gets the partials type; an f32 one keeps float partials (no tag).
// NONE-LABEL: func.func @matmuls
// NONE-NOT:     ipu.partials_type
// HALF-LABEL: func.func @matmuls
// HALF:         "ipu.matmul"(%{{.*}}, %{{.*}}) {ipu.block = 1 : i64, ipu.partials_type = f16} : (tensor<2x3xf16>, tensor<3x4xf16>) -> tensor<2x4xf16>
// HALF-NEXT:    "ipu.matmul"(%{{.*}}, %{{.*}}) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
// FLOAT-LABEL: func.func @matmuls
// FLOAT:        "ipu.matmul"(%{{.*}}, %{{.*}}) {ipu.block = 1 : i64, ipu.partials_type = f32} : (tensor<2x3xf16>, tensor<3x4xf16>) -> tensor<2x4xf16>
// SR-LABEL: func.func @matmuls
// SR:           "ipu.matmul"(%{{.*}}, %{{.*}}) {ipu.block = 1 : i64, ipu.stochastic_rounding} : (tensor<2x3xf16>, tensor<3x4xf16>) -> tensor<2x4xf16>
// SR-NEXT:      "ipu.matmul"(%{{.*}}, %{{.*}}) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
func.func @matmuls(%a: tensor<2x3xf16>, %b: tensor<3x4xf16>, %c: tensor<2x3xf32>, %d: tensor<3x4xf32>) -> (tensor<2x4xf16>, tensor<2x4xf32>) {
  %0 = "ipu.matmul"(%a, %b) {ipu.block = 1 : i64} : (tensor<2x3xf16>, tensor<3x4xf16>) -> tensor<2x4xf16>
  %1 = "ipu.matmul"(%c, %d) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %0, %1 : tensor<2x4xf16>, tensor<2x4xf32>
}

// -----

// Stochastic rounding tags the ops with an f16 result: the cast to f16 and the f16 add,
// not the f32 one; floating-point exceptions tag the module.
// SR:         module attributes {ipu.floating_point_exceptions, ipu.stochastic_rounding}
// SR-LABEL:   func.func @rounded
// SR:           "ipu.cast"(%{{.*}}) {ipu.stochastic_rounding} : (tensor<4xf32>) -> tensor<4xf16>
// SR-NEXT:      "ipu.add"(%{{.*}}, %{{.*}}) {ipu.stochastic_rounding} : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
// SR-NEXT:      "ipu.add"(%{{.*}}, %{{.*}}) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// NONE-NOT:   ipu.floating_point_exceptions
// NONE-NOT:   ipu.stochastic_rounding
func.func @rounded(%x: tensor<4xf32>, %h: tensor<4xf16>) -> (tensor<4xf16>, tensor<4xf32>) {
  %0 = "ipu.cast"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  %1 = "ipu.add"(%0, %h) : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
  %2 = "ipu.add"(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %1, %2 : tensor<4xf16>, tensor<4xf32>
}

// -----

// LayerNorm's two-pass variance (torch's decomposition) becomes sum(x^2) - sum(x) * mean
// with the reduction's placement; the normalised value still reads x - mean.
// NONE-LABEL: func.func @variance
// NONE:         %[[D:.*]] = "ipu.sub"
// NONE-NEXT:    %[[Q:.*]] = "ipu.mul"(%[[D]], %[[D]])
// NONE-NEXT:    "ipu.reduce"(%[[Q]])
// PLAIN-LABEL: func.func @variance
// PLAIN-SAME:    (%[[X:.*]]: tensor<2x4xf32>)
// PLAIN-NEXT:    %[[S:.*]] = "ipu.reduce"(%[[X]]) {dims = array<i64: 1>, ipu.block = 0 : i64, keepdim = true, kind = "sum"}
// PLAIN-NEXT:    %[[N:.*]] = "ipu.constant"()
// PLAIN-NEXT:    %[[M:.*]] = "ipu.div"(%[[S]], %[[N]])
// PLAIN-NEXT:    %[[D:.*]] = "ipu.sub"(%[[X]], %[[M]])
// PLAIN-NEXT:    %[[XX:.*]] = "ipu.mul"(%[[X]], %[[X]]) {ipu.block = 0 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
// PLAIN-NEXT:    %[[S2:.*]] = "ipu.reduce"(%[[XX]]) {dims = array<i64: 1>, ipu.block = 0 : i64, keepdim = true, kind = "sum"} : (tensor<2x4xf32>) -> tensor<2x1xf32>
// PLAIN-NEXT:    %[[SM:.*]] = "ipu.mul"(%[[S]], %[[M]]) {ipu.block = 0 : i64} : (tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<2x1xf32>
// PLAIN-NEXT:    %[[V:.*]] = "ipu.sub"(%[[S2]], %[[SM]]) {ipu.block = 0 : i64} : (tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<2x1xf32>
// PLAIN-NEXT:    %[[VN:.*]] = "ipu.div"(%[[V]], %[[N]])
// PLAIN-NEXT:    return %[[VN]], %[[D]]
func.func @variance(%x: tensor<2x4xf32>) -> (tensor<2x1xf32>, tensor<2x4xf32>) {
  %0 = "ipu.reduce"(%x) {dims = array<i64: 1>, ipu.block = 0 : i64, keepdim = true, kind = "sum"} : (tensor<2x4xf32>) -> tensor<2x1xf32>
  %n = "ipu.constant"() {value = dense<4.0> : tensor<f32>} : () -> tensor<f32>
  %1 = "ipu.div"(%0, %n) {ipu.block = 0 : i64} : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %2 = "ipu.sub"(%x, %1) {ipu.block = 0 : i64} : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %3 = "ipu.mul"(%2, %2) {ipu.block = 0 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %4 = "ipu.reduce"(%3) {dims = array<i64: 1>, ipu.block = 0 : i64, keepdim = true, kind = "sum"} : (tensor<2x4xf32>) -> tensor<2x1xf32>
  %5 = "ipu.div"(%4, %n) {ipu.block = 0 : i64} : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  return %5, %2 : tensor<2x1xf32>, tensor<2x4xf32>
}
