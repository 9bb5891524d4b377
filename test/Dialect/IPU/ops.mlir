// RUN: ipu-opt %s | FileCheck %s
// RUN: ipu-opt %s | ipu-opt | FileCheck %s
// RUN: ipu-opt %s -o %t.1 && ipu-opt %t.1 -o %t.2 && diff %t.1 %t.2

// Every ipu op parses, verifies and prints back in generic form; the second RUN line
// checks that the printed form parses to the same IR.

// A two-stage pipeline: each stage is a function tagged with #ipu.stage<stage, ipu>,
// called with the same tag; the value crossing IPUs goes through ipu.copy. Results of
// different types leave a stage (IRDL ops cannot return such lists; see dialects/ipu.py).
// CHECK-LABEL: func.func private @stage0(
// CHECK-SAME:      %[[X:.*]]: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi32>) attributes {ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    %[[N:.*]] = "ipu.neg"(%[[X]]) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[I:.*]] = "ipu.host_load"() {stream = "ids"} : () -> tensor<4xi32>
// CHECK-NEXT:    return %[[N]], %[[I]] : tensor<4xf32>, tensor<4xi32>
// CHECK-LABEL: func.func private @stage1(
// CHECK-SAME:      attributes {ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// CHECK-LABEL: func.func @pipeline(
// CHECK-SAME:      %[[X:.*]]: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[S0:.*]]:2 = call @stage0(%[[X]]) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi32>)
// CHECK-NEXT:    %[[C:.*]] = "ipu.copy"(%[[S0]]#0) {dst_ipu = 1 : i64, src_ipu = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[S1:.*]] = call @stage1(%[[C]]) {ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    return %[[S1]] : tensor<4xf32>
func.func private @stage0(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi32>) attributes {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} {
  %0 = "ipu.neg"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "ipu.host_load"() {stream = "ids"} : () -> tensor<4xi32>
  return %0, %1 : tensor<4xf32>, tensor<4xi32>
}
func.func private @stage1(%x: tensor<4xf32>) -> tensor<4xf32> attributes {ipu.stage = #ipu.stage<1 : i64, 1 : i64>} {
  %0 = "ipu.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func @pipeline(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0:2 = func.call @stage0(%x) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi32>)
  %1 = "ipu.copy"(%0#0) {src_ipu = 0 : i64, dst_ipu = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = func.call @stage1(%1) {ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}

// CHECK-LABEL: func.func @copy(
// CHECK-SAME:      %[[X:.*]]: tensor<2x?xbf16>) -> tensor<2x?xbf16>
// CHECK-NEXT:    %[[C:.*]] = "ipu.copy"(%[[X]]) {dst_ipu = 0 : i64, src_ipu = 3 : i64} : (tensor<2x?xbf16>) -> tensor<2x?xbf16>
// CHECK-NEXT:    return %[[C]] : tensor<2x?xbf16>
func.func @copy(%x: tensor<2x?xbf16>) -> tensor<2x?xbf16> {
  %0 = "ipu.copy"(%x) {src_ipu = 3 : i64, dst_ipu = 0 : i64} : (tensor<2x?xbf16>) -> tensor<2x?xbf16>
  return %0 : tensor<2x?xbf16>
}

// CHECK-LABEL: func.func @host_streams()
// CHECK-NEXT:    %[[X:.*]] = "ipu.host_load"() {stream = "input0"} : () -> tensor<8x4xf32>
// CHECK-NEXT:    %[[I:.*]] = "ipu.host_load"() {stream = "labels"} : () -> tensor<8xi32>
// CHECK-NEXT:    "ipu.host_store"(%[[X]]) {stream = "output0"} : (tensor<8x4xf32>) -> ()
// CHECK-NEXT:    "ipu.host_store"(%[[I]]) {stream = "output1"} : (tensor<8xi32>) -> ()
// CHECK-NEXT:    return
func.func @host_streams() {
  %0 = "ipu.host_load"() {stream = "input0"} : () -> tensor<8x4xf32>
  %1 = "ipu.host_load"() {stream = "labels"} : () -> tensor<8xi32>
  "ipu.host_store"(%0) {stream = "output0"} : (tensor<8x4xf32>) -> ()
  "ipu.host_store"(%1) {stream = "output1"} : (tensor<8xi32>) -> ()
  return
}

// CHECK-LABEL: func.func @all_reduce$all(
// CHECK-SAME:      %[[X:.*]]: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[G:.*]] = "ipu.all_reduce"(%[[X]]) {group = #ipu.replica_group<"all", 0 : i64>, reduction = "sum"} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    return %[[G]] : tensor<4xf32>
func.func @all_reduce$all(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.all_reduce"(%x) {reduction = "sum", group = #ipu.replica_group<"all", 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// CHECK-LABEL: func.func @all_reduce$consecutive(
// CHECK-SAME:      %[[X:.*]]: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[G:.*]] = "ipu.all_reduce"(%[[X]]) {group = #ipu.replica_group<"consecutive", 2 : i64>, reduction = "mean"} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    return %[[G]] : tensor<4xf32>
func.func @all_reduce$consecutive(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.all_reduce"(%x) {reduction = "mean", group = #ipu.replica_group<"consecutive", 2 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// CHECK-LABEL: func.func @all_reduce$orthogonal(
// CHECK-SAME:      %[[X:.*]]: tensor<?x3xf16>) -> tensor<?x3xf16>
// CHECK-NEXT:    %[[G:.*]] = "ipu.all_reduce"(%[[X]]) {group = #ipu.replica_group<"orthogonal", 4 : i64>, reduction = "max"} : (tensor<?x3xf16>) -> tensor<?x3xf16>
// CHECK-NEXT:    return %[[G]] : tensor<?x3xf16>
func.func @all_reduce$orthogonal(%x: tensor<?x3xf16>) -> tensor<?x3xf16> {
  %0 = "ipu.all_reduce"(%x) {reduction = "max", group = #ipu.replica_group<"orthogonal", 4 : i64>} : (tensor<?x3xf16>) -> tensor<?x3xf16>
  return %0 : tensor<?x3xf16>
}

// CHECK-LABEL: func.func @all_reduce$no_grouping(
// CHECK-SAME:      %[[X:.*]]: tensor<i32>) -> tensor<i32>
// CHECK-NEXT:    %[[G:.*]] = "ipu.all_reduce"(%[[X]]) {group = #ipu.replica_group<"no_grouping", 0 : i64>, reduction = "min"} : (tensor<i32>) -> tensor<i32>
// CHECK-NEXT:    return %[[G]] : tensor<i32>
func.func @all_reduce$no_grouping(%x: tensor<i32>) -> tensor<i32> {
  %0 = "ipu.all_reduce"(%x) {reduction = "min", group = #ipu.replica_group<"no_grouping", 0 : i64>} : (tensor<i32>) -> tensor<i32>
  return %0 : tensor<i32>
}

// CHECK-LABEL: func.func @unary(
// CHECK-SAME:      %[[X:.*]]: tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[NEG:.*]] = "ipu.neg"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[ABS:.*]] = "ipu.abs"(%[[NEG]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[EXP:.*]] = "ipu.exp"(%[[ABS]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[LOG:.*]] = "ipu.log"(%[[EXP]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[SQRT:.*]] = "ipu.sqrt"(%[[LOG]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[RSQRT:.*]] = "ipu.rsqrt"(%[[SQRT]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[TANH:.*]] = "ipu.tanh"(%[[RSQRT]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[SIGMOID:.*]] = "ipu.sigmoid"(%[[TANH]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[RELU:.*]] = "ipu.relu"(%[[SIGMOID]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[GELU:.*]] = "ipu.gelu"(%[[RELU]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    return %[[GELU]] : tensor<2x3xf32>
func.func @unary(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "ipu.neg"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = "ipu.abs"(%0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = "ipu.exp"(%1) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = "ipu.log"(%2) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %4 = "ipu.sqrt"(%3) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %5 = "ipu.rsqrt"(%4) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %6 = "ipu.tanh"(%5) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %7 = "ipu.sigmoid"(%6) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %8 = "ipu.relu"(%7) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %9 = "ipu.gelu"(%8) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %9 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @unary$dynamic(
// CHECK-SAME:      %[[X:.*]]: tensor<?x?xi32>) -> tensor<?x?xi32>
// CHECK-NEXT:    %[[Y:.*]] = "ipu.abs"(%[[X]]) : (tensor<?x?xi32>) -> tensor<?x?xi32>
// CHECK-NEXT:    return %[[Y]] : tensor<?x?xi32>
func.func @unary$dynamic(%x: tensor<?x?xi32>) -> tensor<?x?xi32> {
  %0 = "ipu.abs"(%x) : (tensor<?x?xi32>) -> tensor<?x?xi32>
  return %0 : tensor<?x?xi32>
}

// CHECK-LABEL: func.func @binary(
// CHECK-SAME:      %[[X:.*]]: tensor<4xf32>, %[[Y:.*]]: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[ADD:.*]] = "ipu.add"(%[[X]], %[[Y]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[SUB:.*]] = "ipu.sub"(%[[ADD]], %[[Y]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[MUL:.*]] = "ipu.mul"(%[[SUB]], %[[Y]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[DIV:.*]] = "ipu.div"(%[[MUL]], %[[Y]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[POW:.*]] = "ipu.pow"(%[[DIV]], %[[Y]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[MAX:.*]] = "ipu.max"(%[[POW]], %[[Y]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[MIN:.*]] = "ipu.min"(%[[MAX]], %[[Y]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    return %[[MIN]] : tensor<4xf32>
func.func @binary(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.add"(%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "ipu.sub"(%0, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %2 = "ipu.mul"(%1, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = "ipu.div"(%2, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %4 = "ipu.pow"(%3, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %5 = "ipu.max"(%4, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %6 = "ipu.min"(%5, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %6 : tensor<4xf32>
}

// NumPy broadcasting: size-1 and missing leading dimensions stretch.
// CHECK-LABEL: func.func @binary$broadcast(
// CHECK-SAME:      %[[X:.*]]: tensor<2x1x4xf32>, %[[Y:.*]]: tensor<3x1xf32>, %[[S:.*]]: tensor<f32>) -> tensor<2x3x4xf32>
// CHECK-NEXT:    %[[M:.*]] = "ipu.mul"(%[[X]], %[[Y]]) : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT:    %[[A:.*]] = "ipu.add"(%[[S]], %[[M]]) : (tensor<f32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT:    return %[[A]] : tensor<2x3x4xf32>
func.func @binary$broadcast(%x: tensor<2x1x4xf32>, %y: tensor<3x1xf32>, %s: tensor<f32>) -> tensor<2x3x4xf32> {
  %0 = "ipu.mul"(%x, %y) : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  %1 = "ipu.add"(%s, %0) : (tensor<f32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %1 : tensor<2x3x4xf32>
}

// A dynamic size may equal a static one at run time, and the result may stay dynamic.
// CHECK-LABEL: func.func @binary$dynamic(
// CHECK-SAME:      %[[X:.*]]: tensor<?x4xf32>, %[[Y:.*]]: tensor<3x?xf32>) -> tensor<3x?xf32>
// CHECK-NEXT:    %[[D:.*]] = "ipu.sub"(%[[X]], %[[Y]]) : (tensor<?x4xf32>, tensor<3x?xf32>) -> tensor<3x?xf32>
// CHECK-NEXT:    return %[[D]] : tensor<3x?xf32>
func.func @binary$dynamic(%x: tensor<?x4xf32>, %y: tensor<3x?xf32>) -> tensor<3x?xf32> {
  %0 = "ipu.sub"(%x, %y) : (tensor<?x4xf32>, tensor<3x?xf32>) -> tensor<3x?xf32>
  return %0 : tensor<3x?xf32>
}

// CHECK-LABEL: func.func @matmul(
// CHECK-SAME:      %[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<3x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    %[[C:.*]] = "ipu.matmul"(%[[A]], %[[B]]) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    return %[[C]] : tensor<2x4xf32>
func.func @matmul(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %0 = "ipu.matmul"(%a, %b) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @matmul$batched(
// CHECK-SAME:      %[[A:.*]]: tensor<5x2x3xf16>, %[[B:.*]]: tensor<5x3x4xf16>) -> tensor<5x2x4xf16>
// CHECK-NEXT:    %[[C:.*]] = "ipu.matmul"(%[[A]], %[[B]]) : (tensor<5x2x3xf16>, tensor<5x3x4xf16>) -> tensor<5x2x4xf16>
// CHECK-NEXT:    return %[[C]] : tensor<5x2x4xf16>
func.func @matmul$batched(%a: tensor<5x2x3xf16>, %b: tensor<5x3x4xf16>) -> tensor<5x2x4xf16> {
  %0 = "ipu.matmul"(%a, %b) : (tensor<5x2x3xf16>, tensor<5x3x4xf16>) -> tensor<5x2x4xf16>
  return %0 : tensor<5x2x4xf16>
}

// Batch dimensions broadcast as in torch.matmul: 7x1 against 5 gives 7x5, a 2-D
// operand is shared by every batch.
// CHECK-LABEL: func.func @matmul$broadcast_batch(
// CHECK-SAME:      %[[A:.*]]: tensor<7x1x2x3xf32>, %[[B:.*]]: tensor<5x3x4xf32>, %[[W:.*]]: tensor<4x6xf32>) -> tensor<7x5x2x6xf32>
// CHECK-NEXT:    %[[C:.*]] = "ipu.matmul"(%[[A]], %[[B]]) : (tensor<7x1x2x3xf32>, tensor<5x3x4xf32>) -> tensor<7x5x2x4xf32>
// CHECK-NEXT:    %[[D:.*]] = "ipu.matmul"(%[[C]], %[[W]]) : (tensor<7x5x2x4xf32>, tensor<4x6xf32>) -> tensor<7x5x2x6xf32>
// CHECK-NEXT:    return %[[D]] : tensor<7x5x2x6xf32>
func.func @matmul$broadcast_batch(%a: tensor<7x1x2x3xf32>, %b: tensor<5x3x4xf32>, %w: tensor<4x6xf32>) -> tensor<7x5x2x6xf32> {
  %0 = "ipu.matmul"(%a, %b) : (tensor<7x1x2x3xf32>, tensor<5x3x4xf32>) -> tensor<7x5x2x4xf32>
  %1 = "ipu.matmul"(%0, %w) : (tensor<7x5x2x4xf32>, tensor<4x6xf32>) -> tensor<7x5x2x6xf32>
  return %1 : tensor<7x5x2x6xf32>
}

// CHECK-LABEL: func.func @matmul$dynamic(
// CHECK-SAME:      %[[A:.*]]: tensor<?x?x3xf32>, %[[B:.*]]: tensor<?x4xf32>) -> tensor<?x?x4xf32>
// CHECK-NEXT:    %[[C:.*]] = "ipu.matmul"(%[[A]], %[[B]]) : (tensor<?x?x3xf32>, tensor<?x4xf32>) -> tensor<?x?x4xf32>
// CHECK-NEXT:    return %[[C]] : tensor<?x?x4xf32>
func.func @matmul$dynamic(%a: tensor<?x?x3xf32>, %b: tensor<?x4xf32>) -> tensor<?x?x4xf32> {
  %0 = "ipu.matmul"(%a, %b) : (tensor<?x?x3xf32>, tensor<?x4xf32>) -> tensor<?x?x4xf32>
  return %0 : tensor<?x?x4xf32>
}

// -----

// Streaming-memory transfers of phased execution.
// CHECK-LABEL: func.func @remote
// CHECK:         "ipu.remote_store"(%arg0) {ipu = 0 : i64} : (tensor<4xf32>) -> ()
// CHECK:         "ipu.remote_load"(%arg0) {ipu = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
func.func @remote(%x: tensor<4xf32>) -> tensor<4xf32> {
  "ipu.remote_store"(%x) {ipu = 0 : i64} : (tensor<4xf32>) -> ()
  %0 = "ipu.remote_load"(%x) {ipu = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
