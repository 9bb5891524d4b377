// RUN: ipu-opt %s --ipu-simplify --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @neutral_elements
// CHECK-NEXT:    %[[M:.*]] = "ipu.matmul"(%arg0, %arg1)
// CHECK-NEXT:    return %[[M]]
func.func @neutral_elements(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %one = "ipu.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %zero = "ipu.constant"() {value = dense<0.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %0 = "ipu.matmul"(%a, %b) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %1 = "ipu.mul"(%0, %one) : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %2 = "ipu.add"(%zero, %1) : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %3 = "ipu.div"(%2, %one) : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %4 = "ipu.sub"(%3, %zero) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %4 : tensor<2x4xf32>
}

// -----

// Broadcasting by the neutral element changes the type: it stays.
// CHECK-LABEL: func.func @broadcasting_kept
// CHECK:         "ipu.mul"(%arg0, %{{.*}}) : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK:         "ipu.sub"(%{{.*}}, %arg0) : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
func.func @broadcasting_kept(%x: tensor<4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>) {
  %one = "ipu.constant"() {value = dense<1.0> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
  %zero = "ipu.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %0 = "ipu.mul"(%x, %one) : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %1 = "ipu.sub"(%zero, %x) : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<2x4xf32>, tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @layout_no_ops
// CHECK-NEXT:    %[[P:.*]] = "ipu.permute"(%arg0) {dims = array<i64: 1, 0>}
// CHECK-NEXT:    return %arg0, %[[P]]
func.func @layout_no_ops(%x: tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<3x3xf32>) {
  %0 = "ipu.reshape"(%x) : (tensor<3x3xf32>) -> tensor<3x3xf32>
  %1 = "ipu.permute"(%0) {dims = array<i64: 0, 1>} : (tensor<3x3xf32>) -> tensor<3x3xf32>
  %2 = "ipu.broadcast"(%1) : (tensor<3x3xf32>) -> tensor<3x3xf32>
  %3 = "ipu.permute"(%x) {dims = array<i64: 1, 0>} : (tensor<3x3xf32>) -> tensor<3x3xf32>
  return %2, %3 : tensor<3x3xf32>, tensor<3x3xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_chains
// CHECK-NEXT:    %[[R:.*]] = "ipu.reshape"(%arg0) : (tensor<16xf32>) -> tensor<16x1x1xf32>
// CHECK-NEXT:    return %[[R]], %arg0
func.func @reshape_chains(%x: tensor<16xf32>) -> (tensor<16x1x1xf32>, tensor<16xf32>) {
  %0 = "ipu.reshape"(%x) : (tensor<16xf32>) -> tensor<16x1xf32>
  %1 = "ipu.reshape"(%0) : (tensor<16x1xf32>) -> tensor<16x1x1xf32>
  %2 = "ipu.reshape"(%1) : (tensor<16x1x1xf32>) -> tensor<16xf32>
  return %1, %2 : tensor<16x1x1xf32>, tensor<16xf32>
}

// -----

// CHECK-LABEL: func.func @permute_chains
// CHECK-NEXT:    %[[P:.*]] = "ipu.permute"(%arg0) {dims = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
// CHECK-NEXT:    %[[Q:.*]] = "ipu.permute"(%arg0) {dims = array<i64: 1, 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
// CHECK-NEXT:    return %arg0, %[[P]], %[[Q]], %[[Q]]
func.func @permute_chains(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<4x2x3xf32>,
                                                    tensor<3x2x4xf32>, tensor<3x2x4xf32>) {
  // a transpose transposed back is the operand
  %0 = "ipu.permute"(%x) {dims = array<i64: 1, 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  %1 = "ipu.permute"(%0) {dims = array<i64: 1, 0, 2>} : (tensor<3x2x4xf32>) -> tensor<2x3x4xf32>
  // two rotations are one: result dim i is %x's dim first[second[i]]
  %2 = "ipu.permute"(%x) {dims = array<i64: 1, 2, 0>} : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
  %3 = "ipu.permute"(%2) {dims = array<i64: 1, 2, 0>} : (tensor<3x4x2xf32>) -> tensor<4x2x3xf32>
  // a permute read twice stays, and a chain over it becomes one permute of %x
  %4 = "ipu.permute"(%x) {dims = array<i64: 1, 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  %5 = "ipu.permute"(%4) {dims = array<i64: 0, 1, 2>} : (tensor<3x2x4xf32>) -> tensor<3x2x4xf32>
  return %1, %3, %4, %5 : tensor<2x3x4xf32>, tensor<4x2x3xf32>, tensor<3x2x4xf32>, tensor<3x2x4xf32>
}

// -----

// A reshape moves below the unary ops that read it, which keep their attributes (the
// reshape gets them too); the relu's reshape back to the add's shape folds away, and
// the relu follows the add.
// CHECK-LABEL: func.func @unary_of_reshape
// CHECK-NEXT:    %[[A:.*]] = "ipu.add"(%arg0, %arg1) {ipu.name_scope = "fc"}
// CHECK-NEXT:    %[[R:.*]] = "ipu.relu"(%[[A]]) {ipu.name_scope = "act"} : (tensor<64x512xf32>) -> tensor<64x512xf32>
// CHECK-NEXT:    %[[T:.*]] = "ipu.tanh"(%[[A]]) {ipu.name_scope = "act"} : (tensor<64x512xf32>) -> tensor<64x512xf32>
// CHECK-NEXT:    %[[E:.*]] = "ipu.exp"(%[[T]]) : (tensor<64x512xf32>) -> tensor<64x512xf32>
// CHECK-NEXT:    %[[S:.*]] = "ipu.reshape"(%[[E]]) : (tensor<64x512xf32>) -> tensor<8x8x512xf32>
// CHECK-NEXT:    return %[[R]], %[[S]]
func.func @unary_of_reshape(%x: tensor<64x512xf32>, %b: tensor<512xf32>)
    -> (tensor<64x512xf32>, tensor<8x8x512xf32>) {
  %0 = "ipu.add"(%x, %b) {ipu.name_scope = "fc"} : (tensor<64x512xf32>, tensor<512xf32>) -> tensor<64x512xf32>
  %1 = "ipu.reshape"(%0) {ipu.name_scope = "fc"} : (tensor<64x512xf32>) -> tensor<8x8x512xf32>
  %2 = "ipu.relu"(%1) {ipu.name_scope = "act"} : (tensor<8x8x512xf32>) -> tensor<8x8x512xf32>
  %3 = "ipu.reshape"(%2) : (tensor<8x8x512xf32>) -> tensor<64x512xf32>
  %4 = "ipu.tanh"(%1) {ipu.name_scope = "act"} : (tensor<8x8x512xf32>) -> tensor<8x8x512xf32>
  %5 = "ipu.exp"(%4) : (tensor<8x8x512xf32>) -> tensor<8x8x512xf32>
  return %3, %5 : tensor<64x512xf32>, tensor<8x8x512xf32>
}

// -----

// A sum of products x^T y (an RNN's weight gradient, one per step) is one product of
// the concatenated operands; the new ops keep the add's attributes.
// CHECK-LABEL: func.func @sum_of_products
// CHECK-NEXT:    %[[X:.*]] = "ipu.concat"(%arg0, %arg2) {dim = 0 : i64, ipu.name_scope = "lstm"} : (tensor<32x512xf32>, tensor<32x512xf32>) -> tensor<64x512xf32>
// CHECK-NEXT:    %[[Y:.*]] = "ipu.concat"(%arg1, %arg3) {dim = 0 : i64, ipu.name_scope = "lstm"} : (tensor<32x128xf32>, tensor<32x128xf32>) -> tensor<64x128xf32>
// CHECK-NEXT:    %[[X3:.*]] = "ipu.concat"(%[[X]], %arg4) {dim = 0 : i64} : (tensor<64x512xf32>, tensor<16x512xf32>) -> tensor<80x512xf32>
// CHECK-NEXT:    %[[Y3:.*]] = "ipu.concat"(%[[Y]], %arg5) {dim = 0 : i64} : (tensor<64x128xf32>, tensor<16x128xf32>) -> tensor<80x128xf32>
// CHECK-NEXT:    %[[T:.*]] = "ipu.permute"(%[[X3]]) {dims = array<i64: 1, 0>} : (tensor<80x512xf32>) -> tensor<512x80xf32>
// CHECK-NEXT:    %[[P:.*]] = "ipu.matmul"(%[[T]], %[[Y3]]) : (tensor<512x80xf32>, tensor<80x128xf32>) -> tensor<512x128xf32>
// CHECK-NEXT:    return %[[P]]
func.func @sum_of_products(%x1: tensor<32x512xf32>, %y1: tensor<32x128xf32>,
                           %x2: tensor<32x512xf32>, %y2: tensor<32x128xf32>,
                           %x3: tensor<16x512xf32>, %y3: tensor<16x128xf32>) -> tensor<512x128xf32> {
  %p1 = "ipu.permute"(%x1) {dims = array<i64: 1, 0>} : (tensor<32x512xf32>) -> tensor<512x32xf32>
  %m1 = "ipu.matmul"(%p1, %y1) : (tensor<512x32xf32>, tensor<32x128xf32>) -> tensor<512x128xf32>
  %p2 = "ipu.permute"(%x2) {dims = array<i64: 1, 0>} : (tensor<32x512xf32>) -> tensor<512x32xf32>
  %m2 = "ipu.matmul"(%p2, %y2) : (tensor<512x32xf32>, tensor<32x128xf32>) -> tensor<512x128xf32>
  %s = "ipu.add"(%m1, %m2) {ipu.name_scope = "lstm"} : (tensor<512x128xf32>, tensor<512x128xf32>) -> tensor<512x128xf32>
  %p3 = "ipu.permute"(%x3) {dims = array<i64: 1, 0>} : (tensor<16x512xf32>) -> tensor<512x16xf32>
  %m3 = "ipu.matmul"(%p3, %y3) : (tensor<512x16xf32>, tensor<16x128xf32>) -> tensor<512x128xf32>
  %t = "ipu.add"(%s, %m3) : (tensor<512x128xf32>, tensor<512x128xf32>) -> tensor<512x128xf32>
  return %t : tensor<512x128xf32>
}

// -----

// Products read elsewhere too, batched products and broadcasting adds stay.
// CHECK-LABEL: func.func @products_kept
// CHECK-NOT: "ipu.concat"
// CHECK:     "ipu.matmul"
// CHECK:     "ipu.add"
// CHECK-COUNT-2: "ipu.matmul"
// CHECK:     "ipu.add"
func.func @products_kept(%x: tensor<32x512xf32>, %y: tensor<32x128xf32>,
                         %b: tensor<2x32x512xf32>, %c: tensor<2x32x128xf32>)
    -> (tensor<512x128xf32>, tensor<512x128xf32>, tensor<2x512x128xf32>) {
  %p = "ipu.permute"(%x) {dims = array<i64: 1, 0>} : (tensor<32x512xf32>) -> tensor<512x32xf32>
  %m = "ipu.matmul"(%p, %y) : (tensor<512x32xf32>, tensor<32x128xf32>) -> tensor<512x128xf32>
  %s = "ipu.add"(%m, %m) : (tensor<512x128xf32>, tensor<512x128xf32>) -> tensor<512x128xf32>
  %q = "ipu.permute"(%b) {dims = array<i64: 0, 2, 1>} : (tensor<2x32x512xf32>) -> tensor<2x512x32xf32>
  %n = "ipu.matmul"(%q, %c) : (tensor<2x512x32xf32>, tensor<2x32x128xf32>) -> tensor<2x512x128xf32>
  %k = "ipu.matmul"(%q, %c) : (tensor<2x512x32xf32>, tensor<2x32x128xf32>) -> tensor<2x512x128xf32>
  %t = "ipu.add"(%n, %k) : (tensor<2x512x128xf32>, tensor<2x512x128xf32>) -> tensor<2x512x128xf32>
  return %s, %m, %t : tensor<512x128xf32>, tensor<512x128xf32>, tensor<2x512x128xf32>
}

// -----

// A reduction over size-1 dims is its operand (reshaped when the dims go); a square
// sum, and a reduction over a larger dim, stay.
// CHECK-LABEL: func.func @unit_reduce
// CHECK-NEXT:    %[[R:.*]] = "ipu.reshape"(%arg0) {ipu.name_scope = "lstm"} : (tensor<1x32x512xf32>) -> tensor<32x512xf32>
// CHECK-NEXT:    %[[Q:.*]] = "ipu.reduce"(%arg0) {dims = array<i64: 0>, keepdim = true, kind = "square_sum"}
// CHECK-NEXT:    %[[S:.*]] = "ipu.reduce"(%arg0) {dims = array<i64: 0, 1>, keepdim = true, kind = "max"}
// CHECK-NEXT:    return %arg0, %[[R]], %[[Q]], %[[S]]
func.func @unit_reduce(%x: tensor<1x32x512xf32>)
    -> (tensor<1x32x512xf32>, tensor<32x512xf32>, tensor<1x32x512xf32>, tensor<1x1x512xf32>) {
  %0 = "ipu.reduce"(%x) {kind = "sum", dims = array<i64: 0>, keepdim = true} : (tensor<1x32x512xf32>) -> tensor<1x32x512xf32>
  %1 = "ipu.reduce"(%x) {kind = "mean", dims = array<i64: 0>, keepdim = false, ipu.name_scope = "lstm"} : (tensor<1x32x512xf32>) -> tensor<32x512xf32>
  %2 = "ipu.reduce"(%x) {kind = "square_sum", dims = array<i64: 0>, keepdim = true} : (tensor<1x32x512xf32>) -> tensor<1x32x512xf32>
  %3 = "ipu.reduce"(%x) {kind = "max", dims = array<i64: 0, 1>, keepdim = true} : (tensor<1x32x512xf32>) -> tensor<1x1x512xf32>
  return %0, %1, %2, %3 : tensor<1x32x512xf32>, tensor<32x512xf32>, tensor<1x32x512xf32>, tensor<1x1x512xf32>
}

// -----

// A sum of sums over the same dims (an RNN's bias gradient, one per step), each maybe
// reshaped alike, is one sum of the concatenation along the first summed dim; the new
// ops keep the add's attributes (the first pair's sum and reshape go once the second
// add takes in their concatenation).
// CHECK-LABEL: func.func @sum_of_reductions
// CHECK-NEXT:    %[[X:.*]] = "ipu.concat"(%arg0, %arg1) {dim = 0 : i64, ipu.name_scope = "lstm"} : (tensor<32x512xf32>, tensor<32x512xf32>) -> tensor<64x512xf32>
// CHECK-NEXT:    %[[X3:.*]] = "ipu.concat"(%[[X]], %arg2) {dim = 0 : i64} : (tensor<64x512xf32>, tensor<16x512xf32>) -> tensor<80x512xf32>
// CHECK-NEXT:    %[[S3:.*]] = "ipu.reduce"(%[[X3]]) {dims = array<i64: 0>, keepdim = true, kind = "sum"} : (tensor<80x512xf32>) -> tensor<1x512xf32>
// CHECK-NEXT:    %[[R3:.*]] = "ipu.reshape"(%[[S3]]) : (tensor<1x512xf32>) -> tensor<512xf32>
// CHECK-NEXT:    return %[[R3]]
func.func @sum_of_reductions(%x1: tensor<32x512xf32>, %x2: tensor<32x512xf32>,
                             %x3: tensor<16x512xf32>) -> tensor<512xf32> {
  %s1 = "ipu.reduce"(%x1) {kind = "sum", dims = array<i64: 0>, keepdim = true} : (tensor<32x512xf32>) -> tensor<1x512xf32>
  %r1 = "ipu.reshape"(%s1) : (tensor<1x512xf32>) -> tensor<512xf32>
  %s2 = "ipu.reduce"(%x2) {kind = "sum", dims = array<i64: 0>, keepdim = true} : (tensor<32x512xf32>) -> tensor<1x512xf32>
  %r2 = "ipu.reshape"(%s2) : (tensor<1x512xf32>) -> tensor<512xf32>
  %a = "ipu.add"(%r1, %r2) {ipu.name_scope = "lstm"} : (tensor<512xf32>, tensor<512xf32>) -> tensor<512xf32>
  %s3 = "ipu.reduce"(%x3) {kind = "sum", dims = array<i64: 0>, keepdim = true} : (tensor<16x512xf32>) -> tensor<1x512xf32>
  %r3 = "ipu.reshape"(%s3) : (tensor<1x512xf32>) -> tensor<512xf32>
  %b = "ipu.add"(%a, %r3) : (tensor<512xf32>, tensor<512xf32>) -> tensor<512xf32>
  return %b : tensor<512xf32>
}

// -----

// Sums read elsewhere too, of other kinds or dims, or of operands that differ beyond the
// summed dim stay.
// CHECK-LABEL: func.func @reductions_kept
// CHECK-NOT: "ipu.concat"
// CHECK-COUNT-2: "ipu.add"
func.func @reductions_kept(%x: tensor<32x512xf32>, %y: tensor<4x8x512xf32>, %z: tensor<8x4x512xf32>)
    -> (tensor<1x512xf32>, tensor<1x512xf32>, tensor<1x1x512xf32>) {
  %s = "ipu.reduce"(%x) {kind = "sum", dims = array<i64: 0>, keepdim = true} : (tensor<32x512xf32>) -> tensor<1x512xf32>
  %m = "ipu.reduce"(%x) {kind = "max", dims = array<i64: 0>, keepdim = true} : (tensor<32x512xf32>) -> tensor<1x512xf32>
  %a = "ipu.add"(%s, %m) : (tensor<1x512xf32>, tensor<1x512xf32>) -> tensor<1x512xf32>
  %p = "ipu.reduce"(%y) {kind = "sum", dims = array<i64: 0, 1>, keepdim = true} : (tensor<4x8x512xf32>) -> tensor<1x1x512xf32>
  %q = "ipu.reduce"(%z) {kind = "sum", dims = array<i64: 0, 1>, keepdim = true} : (tensor<8x4x512xf32>) -> tensor<1x1x512xf32>
  %b = "ipu.add"(%p, %q) : (tensor<1x1x512xf32>, tensor<1x1x512xf32>) -> tensor<1x1x512xf32>
  return %a, %s, %b : tensor<1x512xf32>, tensor<1x512xf32>, tensor<1x1x512xf32>
}

// -----

// An RNN's last output, `out.permute(1, 0, 2)[:, -1]` of the concatenated steps, is the
// last step's output: the slice moves above the permute, then into the concat's operand
// it lies in (the operand itself when it is all of it); the concat goes unused. A slice
// across both operands stays a slice of the concat.
// CHECK-LABEL: func.func @last_step
// CHECK-NEXT:    %[[AB:.*]] = "ipu.concat"(%arg0, %arg1) {dim = 0 : i64}
// CHECK-NEXT:    %[[ABC:.*]] = "ipu.concat"(%[[AB]], %arg2) {dim = 0 : i64}
// CHECK-NEXT:    %[[P:.*]] = "ipu.permute"(%arg2) {dims = array<i64: 1, 0, 2>, ipu.name_scope = "head"} : (tensor<1x32x128xf32>) -> tensor<32x1x128xf32>
// CHECK-NEXT:    %[[S:.*]] = "ipu.slice"(%arg0) {ends = array<i64: 2, 32, 100>, ipu.name_scope = "mid", starts = array<i64: 1, 0, 0>, steps = array<i64: 1, 2, 1>} : (tensor<2x32x128xf32>) -> tensor<1x16x100xf32>
// CHECK-NEXT:    %[[X:.*]] = "ipu.slice"(%[[ABC]]) {ends = array<i64: 4, 32, 128>, starts = array<i64: 2, 0, 0>, steps = array<i64: 1, 1, 1>} : (tensor<4x32x128xf32>) -> tensor<2x32x128xf32>
// CHECK-NEXT:    %[[M:.*]] = "ipu.permute"(%[[X]]) {dims = array<i64: 1, 0, 2>} : (tensor<2x32x128xf32>) -> tensor<32x2x128xf32>
// CHECK-NEXT:    return %[[P]], %[[S]], %[[M]]
func.func @last_step(%a: tensor<2x32x128xf32>, %b: tensor<1x32x128xf32>, %c: tensor<1x32x128xf32>)
    -> (tensor<32x1x128xf32>, tensor<1x16x100xf32>, tensor<32x2x128xf32>) {
  %ab = "ipu.concat"(%a, %b) {dim = 0 : i64} : (tensor<2x32x128xf32>, tensor<1x32x128xf32>) -> tensor<3x32x128xf32>
  %abc = "ipu.concat"(%ab, %c) {dim = 0 : i64} : (tensor<3x32x128xf32>, tensor<1x32x128xf32>) -> tensor<4x32x128xf32>
  %p = "ipu.permute"(%abc) {dims = array<i64: 1, 0, 2>} : (tensor<4x32x128xf32>) -> tensor<32x4x128xf32>
  %last = "ipu.slice"(%p) {starts = array<i64: 0, 3, 0>, ends = array<i64: 32, 4, 128>, steps = array<i64: 1, 1, 1>, ipu.name_scope = "head"} : (tensor<32x4x128xf32>) -> tensor<32x1x128xf32>
  %q = "ipu.slice"(%ab) {starts = array<i64: 1, 0, 0>, ends = array<i64: 2, 32, 100>, steps = array<i64: 1, 2, 1>, ipu.name_scope = "mid"} : (tensor<3x32x128xf32>) -> tensor<1x16x100xf32>
  %p2 = "ipu.permute"(%abc) {dims = array<i64: 1, 0, 2>} : (tensor<4x32x128xf32>) -> tensor<32x4x128xf32>
  %across = "ipu.slice"(%p2) {starts = array<i64: 0, 2, 0>, ends = array<i64: 32, 4, 128>, steps = array<i64: 1, 1, 1>} : (tensor<32x4x128xf32>) -> tensor<32x2x128xf32>
  return %last, %q, %across : tensor<32x1x128xf32>, tensor<1x16x100xf32>, tensor<32x2x128xf32>
}
