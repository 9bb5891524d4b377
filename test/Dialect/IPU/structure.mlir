// RUN: ipu-opt %s | FileCheck %s
// RUN: ipu-opt %s | ipu-opt | FileCheck %s
// RUN: ipu-opt %s -o %t.1 && ipu-opt %t.1 -o %t.2 && diff %t.1 %t.2

// The ops of dialects/structure.py that place and move values (inter-IPU copies, host
// streams, replica all-reduce, streaming-memory transfers) and the #ipu.stage-tagged
// functions of a pipeline parse, verify and print back in generic form (attributes
// sorted by name); the second RUN line checks that the printed form parses to the same
// IR, the third that it prints the same again.

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

// Streaming-memory transfers of phased execution.
// CHECK-LABEL: func.func @remote
// CHECK:         "ipu.remote_store"(%arg0) {ipu = 0 : i64} : (tensor<4xf32>) -> ()
// CHECK:         "ipu.remote_load"(%arg0) {ipu = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
func.func @remote(%x: tensor<4xf32>) -> tensor<4xf32> {
  "ipu.remote_store"(%x) {ipu = 0 : i64} : (tensor<4xf32>) -> ()
  %0 = "ipu.remote_load"(%x) {ipu = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
