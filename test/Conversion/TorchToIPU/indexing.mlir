// RUN: ipu-opt %s --ipu-convert-torch-to-ipu --canonicalize --split-input-file | FileCheck %s

// One function per lowering of passes/conversion/indexing.py.

// Negative dims are normalised; int64 indices stay int64.
// CHECK-LABEL: func.func @gather
// CHECK-DAG:     %[[X:.*]] = torch_c.to_builtin_tensor %arg0
// CHECK-DAG:     %[[I:.*]] = torch_c.to_builtin_tensor %arg1 : !torch.vtensor<[4,2],si64> -> tensor<4x2xi64>
// CHECK:         "ipu.gather"(%[[X]], %[[I]]) {dim = 1 : i64} : (tensor<4x5xf32>, tensor<4x2xi64>) -> tensor<4x2xf32>
func.func @gather(%x: !torch.vtensor<[4,5],f32>, %i: !torch.vtensor<[4,2],si64>) -> !torch.vtensor<[4,2],f32> {
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %0 = torch.aten.gather %x, %int-1, %i, %false : !torch.vtensor<[4,5],f32>, !torch.int, !torch.vtensor<[4,2],si64>, !torch.bool -> !torch.vtensor<[4,2],f32>
  return %0 : !torch.vtensor<[4,2],f32>
}

// -----

// A 0-d index selects a size-1 slice: it becomes a 1-element index.
// CHECK-LABEL: func.func @index_select
// CHECK:         "ipu.index_select"(%{{.*}}, %{{.*}}) {dim = 1 : i64} : (tensor<4x5xf32>, tensor<3xi32>) -> tensor<4x3xf32>
// CHECK:         %[[J:.*]] = "ipu.reshape"(%{{.*}}) : (tensor<i32>) -> tensor<1xi32>
// CHECK-NEXT:    "ipu.index_select"(%{{.*}}, %[[J]]) {dim = 0 : i64} : (tensor<4x5xf32>, tensor<1xi32>) -> tensor<1x5xf32>
func.func @index_select(%x: !torch.vtensor<[4,5],f32>, %i: !torch.vtensor<[3],si32>, %j: !torch.vtensor<[],si32>) -> (!torch.vtensor<[4,3],f32>, !torch.vtensor<[1,5],f32>) {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %0 = torch.aten.index_select %x, %int1, %i : !torch.vtensor<[4,5],f32>, !torch.int, !torch.vtensor<[3],si32> -> !torch.vtensor<[4,3],f32>
  %1 = torch.aten.index_select %x, %int0, %j : !torch.vtensor<[4,5],f32>, !torch.int, !torch.vtensor<[],si32> -> !torch.vtensor<[1,5],f32>
  return %0, %1 : !torch.vtensor<[4,3],f32>, !torch.vtensor<[1,5],f32>
}

// -----

// CHECK-LABEL: func.func @embedding
// CHECK:         "ipu.index_select"(%{{.*}}, %{{.*}}) {dim = 0 : i64} : (tensor<10x3xf32>, tensor<2x4xi32>) -> tensor<2x4x3xf32>
func.func @embedding(%w: !torch.vtensor<[10,3],f32>, %i: !torch.vtensor<[2,4],si32>) -> !torch.vtensor<[2,4,3],f32> {
  %int0 = torch.constant.int 0
  %false = torch.constant.bool false
  %0 = torch.aten.embedding %w, %i, %int0, %false, %false : !torch.vtensor<[10,3],f32>, !torch.vtensor<[2,4],si32>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,4,3],f32>
  return %0 : !torch.vtensor<[2,4,3],f32>
}

// -----

// x[i] with one index tensor is an index_select of dim 0.
// CHECK-LABEL: func.func @index$single
// CHECK:         "ipu.index_select"(%{{.*}}, %{{.*}}) {dim = 0 : i64} : (tensor<4x5xf32>, tensor<3xi32>) -> tensor<3x5xf32>
func.func @index$single(%x: !torch.vtensor<[4,5],f32>, %i: !torch.vtensor<[3],si32>) -> !torch.vtensor<[3,5],f32> {
  %0 = torch.prim.ListConstruct %i : (!torch.vtensor<[3],si32>) -> !torch.list<vtensor>
  %1 = torch.aten.index.Tensor_hacked_twin %x, %0 : !torch.vtensor<[4,5],f32>, !torch.list<vtensor> -> !torch.vtensor<[3,5],f32>
  return %1 : !torch.vtensor<[3,5],f32>
}

// -----

// x[a, i]: the index tensors broadcast to 4x3, the i32 one is widened to i64, and they
// are stacked on a last axis.
// CHECK-LABEL: func.func @index$broadcast
// CHECK:         %[[A:.*]] = "ipu.broadcast"(%{{.*}}) : (tensor<4x1xi64>) -> tensor<4x3xi64>
// CHECK-NEXT:    %[[A1:.*]] = "ipu.reshape"(%[[A]]) : (tensor<4x3xi64>) -> tensor<4x3x1xi64>
// CHECK:         %[[I:.*]] = "ipu.cast"(%{{.*}}) : (tensor<3xi32>) -> tensor<3xi64>
// CHECK-NEXT:    %[[IB:.*]] = "ipu.broadcast"(%[[I]]) : (tensor<3xi64>) -> tensor<4x3xi64>
// CHECK-NEXT:    %[[I1:.*]] = "ipu.reshape"(%[[IB]]) : (tensor<4x3xi64>) -> tensor<4x3x1xi64>
// CHECK-NEXT:    %[[S:.*]] = "ipu.concat"(%[[A1]], %[[I1]]) {dim = 2 : i64} : (tensor<4x3x1xi64>, tensor<4x3x1xi64>) -> tensor<4x3x2xi64>
// CHECK-NEXT:    "ipu.index"(%{{.*}}, %[[S]]) : (tensor<4x5x6xf32>, tensor<4x3x2xi64>) -> tensor<4x3x6xf32>
func.func @index$broadcast(%x: !torch.vtensor<[4,5,6],f32>, %a: !torch.vtensor<[4,1],si64>, %i: !torch.vtensor<[3],si32>) -> !torch.vtensor<[4,3,6],f32> {
  %0 = torch.prim.ListConstruct %a, %i : (!torch.vtensor<[4,1],si64>, !torch.vtensor<[3],si32>) -> !torch.list<vtensor>
  %1 = torch.aten.index.Tensor_hacked_twin %x, %0 : !torch.vtensor<[4,5,6],f32>, !torch.list<vtensor> -> !torch.vtensor<[4,3,6],f32>
  return %1 : !torch.vtensor<[4,3,6],f32>
}

// -----

// CHECK-LABEL: func.func @index_put$accumulate
// CHECK:         %[[S:.*]] = "ipu.concat"(%{{.*}}, %{{.*}}) {dim = 1 : i64} : (tensor<3x1xi32>, tensor<3x1xi32>) -> tensor<3x2xi32>
// CHECK:         "ipu.index_put"(%{{.*}}, %[[S]], %{{.*}}) {accumulate = true} : (tensor<4x5xf32>, tensor<3x2xi32>, tensor<f32>) -> tensor<4x5xf32>
func.func @index_put$accumulate(%x: !torch.vtensor<[4,5],f32>, %i: !torch.vtensor<[3],si32>, %j: !torch.vtensor<[3],si32>, %v: !torch.vtensor<[],f32>) -> !torch.vtensor<[4,5],f32> {
  %true = torch.constant.bool true
  %0 = torch.prim.ListConstruct %i, %j : (!torch.vtensor<[3],si32>, !torch.vtensor<[3],si32>) -> !torch.list<vtensor>
  %1 = torch.aten.index_put.hacked_twin %x, %0, %v, %true : !torch.vtensor<[4,5],f32>, !torch.list<vtensor>, !torch.vtensor<[],f32>, !torch.bool -> !torch.vtensor<[4,5],f32>
  return %1 : !torch.vtensor<[4,5],f32>
}

// -----

// torch reads only the index-shaped box of a larger src.
// CHECK-LABEL: func.func @scatter$src
// CHECK:         %[[S:.*]] = "ipu.slice"(%{{.*}}) {ends = array<i64: 4, 2>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<4x3xf32>) -> tensor<4x2xf32>
// CHECK-NEXT:    "ipu.scatter"(%{{.*}}, %{{.*}}, %[[S]]) {dim = 1 : i64, include_self = true, reduction = "none"} : (tensor<4x5xf32>, tensor<4x2xi32>, tensor<4x2xf32>) -> tensor<4x5xf32>
func.func @scatter$src(%x: !torch.vtensor<[4,5],f32>, %i: !torch.vtensor<[4,2],si32>, %s: !torch.vtensor<[4,3],f32>) -> !torch.vtensor<[4,5],f32> {
  %int1 = torch.constant.int 1
  %0 = torch.aten.scatter.src %x, %int1, %i, %s : !torch.vtensor<[4,5],f32>, !torch.int, !torch.vtensor<[4,2],si32>, !torch.vtensor<[4,3],f32> -> !torch.vtensor<[4,5],f32>
  return %0 : !torch.vtensor<[4,5],f32>
}

// -----

// CHECK-LABEL: func.func @scatter$value
// CHECK:         %[[V:.*]] = "ipu.constant"() {value = dense<2.500000e+00> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
// CHECK-NEXT:    "ipu.scatter"(%{{.*}}, %{{.*}}, %[[V]]) {dim = 1 : i64, include_self = true, reduction = "none"}
func.func @scatter$value(%x: !torch.vtensor<[4,5],f32>, %i: !torch.vtensor<[4,2],si32>) -> !torch.vtensor<[4,5],f32> {
  %int1 = torch.constant.int 1
  %float = torch.constant.float 2.500000e+00
  %0 = torch.aten.scatter.value %x, %int1, %i, %float : !torch.vtensor<[4,5],f32>, !torch.int, !torch.vtensor<[4,2],si32>, !torch.float -> !torch.vtensor<[4,5],f32>
  return %0 : !torch.vtensor<[4,5],f32>
}

// -----

// CHECK-LABEL: func.func @scatter_add
// CHECK:         "ipu.scatter"(%{{.*}}, %{{.*}}, %{{.*}}) {dim = 0 : i64, include_self = true, reduction = "sum"} : (tensor<4x5xf32>, tensor<4x2xi32>, tensor<4x2xf32>) -> tensor<4x5xf32>
func.func @scatter_add(%x: !torch.vtensor<[4,5],f32>, %i: !torch.vtensor<[4,2],si32>, %s: !torch.vtensor<[4,2],f32>) -> !torch.vtensor<[4,5],f32> {
  %int0 = torch.constant.int 0
  %0 = torch.aten.scatter_add %x, %int0, %i, %s : !torch.vtensor<[4,5],f32>, !torch.int, !torch.vtensor<[4,2],si32>, !torch.vtensor<[4,2],f32> -> !torch.vtensor<[4,5],f32>
  return %0 : !torch.vtensor<[4,5],f32>
}

// -----

// CHECK-LABEL: func.func @scatter_reduce
// CHECK:         "ipu.scatter"(%{{.*}}, %{{.*}}, %{{.*}}) {dim = 1 : i64, include_self = false, reduction = "amax"}
func.func @scatter_reduce(%x: !torch.vtensor<[4,5],f32>, %i: !torch.vtensor<[4,2],si32>, %s: !torch.vtensor<[4,2],f32>) -> !torch.vtensor<[4,5],f32> {
  %int1 = torch.constant.int 1
  %str = torch.constant.str "amax"
  %false = torch.constant.bool false
  %0 = torch.aten.scatter_reduce.two %x, %int1, %i, %s, %str, %false : !torch.vtensor<[4,5],f32>, !torch.int, !torch.vtensor<[4,2],si32>, !torch.vtensor<[4,2],f32>, !torch.str, !torch.bool -> !torch.vtensor<[4,5],f32>
  return %0 : !torch.vtensor<[4,5],f32>
}

// -----

// CHECK-LABEL: func.func @sort
// CHECK:         %[[S:.*]]:2 = "ipu.sort"(%{{.*}}) {descending = true, dim = 1 : i64} : (tensor<4x5xf32>) -> (tensor<4x5xf32>, tensor<4x5xi64>)
// CHECK-NEXT:    torch_c.from_builtin_tensor %[[S]]#0
// CHECK-NEXT:    torch_c.from_builtin_tensor %[[S]]#1 : tensor<4x5xi64> -> !torch.vtensor<[4,5],si64>
func.func @sort(%x: !torch.vtensor<[4,5],f32>) -> (!torch.vtensor<[4,5],f32>, !torch.vtensor<[4,5],si64>) {
  %int-1 = torch.constant.int -1
  %true = torch.constant.bool true
  %values, %indices = torch.aten.sort %x, %int-1, %true : !torch.vtensor<[4,5],f32>, !torch.int, !torch.bool -> !torch.vtensor<[4,5],f32>, !torch.vtensor<[4,5],si64>
  return %values, %indices : !torch.vtensor<[4,5],f32>, !torch.vtensor<[4,5],si64>
}

// -----

// topk(k=2, dim=0, largest=false): the first two of an ascending sort.
// CHECK-LABEL: func.func @topk
// CHECK:         %[[S:.*]]:2 = "ipu.sort"(%{{.*}}) {descending = false, dim = 0 : i64} : (tensor<4x5xf32>) -> (tensor<4x5xf32>, tensor<4x5xi64>)
// CHECK-NEXT:    "ipu.slice"(%[[S]]#0) {ends = array<i64: 2, 5>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<4x5xf32>) -> tensor<2x5xf32>
// CHECK-NEXT:    "ipu.slice"(%[[S]]#1) {ends = array<i64: 2, 5>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<4x5xi64>) -> tensor<2x5xi64>
func.func @topk(%x: !torch.vtensor<[4,5],f32>) -> (!torch.vtensor<[2,5],f32>, !torch.vtensor<[2,5],si64>) {
  %int2 = torch.constant.int 2
  %int0 = torch.constant.int 0
  %false = torch.constant.bool false
  %true = torch.constant.bool true
  %values, %indices = torch.aten.topk %x, %int2, %int0, %false, %true : !torch.vtensor<[4,5],f32>, !torch.int, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,5],f32>, !torch.vtensor<[2,5],si64>
  return %values, %indices : !torch.vtensor<[2,5],f32>, !torch.vtensor<[2,5],si64>
}

// -----

// CHECK-LABEL: func.func @flip
// CHECK:         "ipu.flip"(%{{.*}}) {dims = array<i64: 0, 1>} : (tensor<4x5xf32>) -> tensor<4x5xf32>
func.func @flip(%x: !torch.vtensor<[4,5],f32>) -> !torch.vtensor<[4,5],f32> {
  %int-1 = torch.constant.int -1
  %int0 = torch.constant.int 0
  %0 = torch.prim.ListConstruct %int-1, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
  %1 = torch.aten.flip %x, %0 : !torch.vtensor<[4,5],f32>, !torch.list<int> -> !torch.vtensor<[4,5],f32>
  return %1 : !torch.vtensor<[4,5],f32>
}

// -----

// roll without dims rolls the flattened tensor: the last 3 elements move to the front.
// CHECK-LABEL: func.func @roll$flattened
// CHECK:         %[[F:.*]] = "ipu.reshape"(%{{.*}}) : (tensor<4x5xf32>) -> tensor<20xf32>
// CHECK-NEXT:    %[[T:.*]] = "ipu.slice"(%[[F]]) {ends = array<i64: 20>, starts = array<i64: 17>, steps = array<i64: 1>} : (tensor<20xf32>) -> tensor<3xf32>
// CHECK-NEXT:    %[[H:.*]] = "ipu.slice"(%[[F]]) {ends = array<i64: 17>, starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<20xf32>) -> tensor<17xf32>
// CHECK-NEXT:    %[[C:.*]] = "ipu.concat"(%[[T]], %[[H]]) {dim = 0 : i64} : (tensor<3xf32>, tensor<17xf32>) -> tensor<20xf32>
// CHECK-NEXT:    "ipu.reshape"(%[[C]]) : (tensor<20xf32>) -> tensor<4x5xf32>
func.func @roll$flattened(%x: !torch.vtensor<[4,5],f32>) -> !torch.vtensor<[4,5],f32> {
  %int3 = torch.constant.int 3
  %0 = torch.prim.ListConstruct %int3 : (!torch.int) -> !torch.list<int>
  %1 = torch.prim.ListConstruct : () -> !torch.list<int>
  %2 = torch.aten.roll %x, %0, %1 : !torch.vtensor<[4,5],f32>, !torch.list<int>, !torch.list<int> -> !torch.vtensor<[4,5],f32>
  return %2 : !torch.vtensor<[4,5],f32>
}

// -----

// Shifts wrap: -1 along dim 1 is 4, and 4 along dim 0 (size 4) is no move at all.
// CHECK-LABEL: func.func @roll$dims
// CHECK:         %[[T:.*]] = "ipu.slice"(%{{.*}}) {ends = array<i64: 4, 5>, starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : (tensor<4x5xf32>) -> tensor<4x4xf32>
// CHECK-NEXT:    %[[H:.*]] = "ipu.slice"(%{{.*}}) {ends = array<i64: 4, 1>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<4x5xf32>) -> tensor<4x1xf32>
// CHECK-NEXT:    %[[C:.*]] = "ipu.concat"(%[[T]], %[[H]]) {dim = 1 : i64} : (tensor<4x4xf32>, tensor<4x1xf32>) -> tensor<4x5xf32>
// CHECK-NEXT:    torch_c.from_builtin_tensor %[[C]]
func.func @roll$dims(%x: !torch.vtensor<[4,5],f32>) -> !torch.vtensor<[4,5],f32> {
  %int-1 = torch.constant.int -1
  %int4 = torch.constant.int 4
  %int1 = torch.constant.int 1
  %int0 = torch.constant.int 0
  %0 = torch.prim.ListConstruct %int-1, %int4 : (!torch.int, !torch.int) -> !torch.list<int>
  %1 = torch.prim.ListConstruct %int1, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
  %2 = torch.aten.roll %x, %0, %1 : !torch.vtensor<[4,5],f32>, !torch.list<int>, !torch.list<int> -> !torch.vtensor<[4,5],f32>
  return %2 : !torch.vtensor<[4,5],f32>
}

// -----

// CHECK-LABEL: func.func @diagonal
// CHECK:         "ipu.diagonal"(%{{.*}}) {dim1 = 1 : i64, dim2 = 0 : i64, offset = -1 : i64} : (tensor<2x4x5xf32>) -> tensor<5x2xf32>
func.func @diagonal(%x: !torch.vtensor<[2,4,5],f32>) -> !torch.vtensor<[5,2],f32> {
  %int-1 = torch.constant.int -1
  %int1 = torch.constant.int 1
  %int0 = torch.constant.int 0
  %0 = torch.aten.diagonal %x, %int-1, %int1, %int0 : !torch.vtensor<[2,4,5],f32>, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[5,2],f32>
  return %0 : !torch.vtensor<[5,2],f32>
}

// -----

// CHECK-LABEL: func.func @slice_scatter
// CHECK:         "ipu.slice_update"(%{{.*}}, %{{.*}}) {ends = array<i64: 4, 5>, starts = array<i64: 0, 1>, steps = array<i64: 1, 2>} : (tensor<4x5xf32>, tensor<4x2xf32>) -> tensor<4x5xf32>
func.func @slice_scatter(%x: !torch.vtensor<[4,5],f32>, %s: !torch.vtensor<[4,2],f32>) -> !torch.vtensor<[4,5],f32> {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %none = torch.constant.none
  %0 = torch.aten.slice_scatter %x, %s, %int1, %int1, %none, %int2 : !torch.vtensor<[4,5],f32>, !torch.vtensor<[4,2],f32>, !torch.int, !torch.int, !torch.none, !torch.int -> !torch.vtensor<[4,5],f32>
  return %0 : !torch.vtensor<[4,5],f32>
}

// -----

// select_scatter at index -1 of dim 1: a 4x1 update of column 4.
// CHECK-LABEL: func.func @select_scatter
// CHECK:         %[[U:.*]] = "ipu.reshape"(%{{.*}}) : (tensor<4xf32>) -> tensor<4x1xf32>
// CHECK-NEXT:    "ipu.slice_update"(%{{.*}}, %[[U]]) {ends = array<i64: 4, 5>, starts = array<i64: 0, 4>, steps = array<i64: 1, 1>} : (tensor<4x5xf32>, tensor<4x1xf32>) -> tensor<4x5xf32>
func.func @select_scatter(%x: !torch.vtensor<[4,5],f32>, %s: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4,5],f32> {
  %int1 = torch.constant.int 1
  %int-1 = torch.constant.int -1
  %0 = torch.aten.select_scatter %x, %s, %int1, %int-1 : !torch.vtensor<[4,5],f32>, !torch.vtensor<[4],f32>, !torch.int, !torch.int -> !torch.vtensor<[4,5],f32>
  return %0 : !torch.vtensor<[4,5],f32>
}

// -----

// mode 1 is mean; the three results for the backward pass are unused and vanish.
// CHECK-LABEL: func.func @embedding_bag
// CHECK:         "ipu.embedding_bag"(%{{.*}}, %{{.*}}, %{{.*}}) {include_last_offset = true, mode = "mean", padding_idx = 4 : i64} : (tensor<10x3xf32>, tensor<6xi32>, tensor<3xi32>) -> tensor<2x3xf32>
// CHECK-NOT:     "ipu.constant"
func.func @embedding_bag(%w: !torch.vtensor<[10,3],f32>, %i: !torch.vtensor<[6],si32>, %o: !torch.vtensor<[3],si32>) -> !torch.vtensor<[2,3],f32> {
  %false = torch.constant.bool false
  %true = torch.constant.bool true
  %int1 = torch.constant.int 1
  %int4 = torch.constant.int 4
  %none = torch.constant.none
  %r0, %r1, %r2, %r3 = torch.aten.embedding_bag.padding_idx %w, %i, %o, %false, %int1, %false, %none, %true, %int4 : !torch.vtensor<[10,3],f32>, !torch.vtensor<[6],si32>, !torch.vtensor<[3],si32>, !torch.bool, !torch.int, !torch.bool, !torch.none, !torch.bool, !torch.int -> !torch.vtensor<[2,3],f32>, !torch.vtensor<[0],si32>, !torch.vtensor<[2],si32>, !torch.vtensor<[2],si32>
  return %r0 : !torch.vtensor<[2,3],f32>
}

// -----

// per_sample_weights: the rows are weighted first, then summed per bag in order.
// CHECK-LABEL: func.func @embedding_bag$weighted
// CHECK:         %[[R:.*]] = "ipu.index_select"(%{{.*}}, %{{.*}}) {dim = 0 : i64} : (tensor<10x3xf32>, tensor<6xi32>) -> tensor<6x3xf32>
// CHECK-NEXT:    %[[P:.*]] = "ipu.reshape"(%{{.*}}) : (tensor<6xf32>) -> tensor<6x1xf32>
// CHECK-NEXT:    %[[W:.*]] = "ipu.mul"(%[[R]], %[[P]]) : (tensor<6x3xf32>, tensor<6x1xf32>) -> tensor<6x3xf32>
// CHECK-NEXT:    %[[I:.*]] = "ipu.constant"() {value = dense<[0, 1, 2, 3, 4, 5]> : tensor<6xi32>} : () -> tensor<6xi32>
// CHECK-NEXT:    "ipu.embedding_bag"(%[[W]], %[[I]], %{{.*}}) {include_last_offset = false, mode = "sum", padding_idx = -1 : i64} : (tensor<6x3xf32>, tensor<6xi32>, tensor<2xi32>) -> tensor<2x3xf32>
func.func @embedding_bag$weighted(%w: !torch.vtensor<[10,3],f32>, %i: !torch.vtensor<[6],si32>, %o: !torch.vtensor<[2],si32>, %p: !torch.vtensor<[6],f32>) -> !torch.vtensor<[2,3],f32> {
  %false = torch.constant.bool false
  %int0 = torch.constant.int 0
  %int-1 = torch.constant.int -1
  %r0, %r1, %r2, %r3 = torch.aten.embedding_bag.padding_idx %w, %i, %o, %false, %int0, %false, %p, %false, %int-1 : !torch.vtensor<[10,3],f32>, !torch.vtensor<[6],si32>, !torch.vtensor<[2],si32>, !torch.bool, !torch.int, !torch.bool, !torch.vtensor<[6],f32>, !torch.bool, !torch.int -> !torch.vtensor<[2,3],f32>, !torch.vtensor<[6],si32>, !torch.vtensor<[2],si32>, !torch.vtensor<[2],si32>
  return %r0 : !torch.vtensor<[2,3],f32>
}

// -----

// as_strided_scatter (the backward of the `as_strided` views functionalisation makes):
// a view covering the whole input in order is src reshaped.
// CHECK-LABEL: func.func @as_strided_scatter$reshape
// CHECK:         %[[S:.*]] = torch_c.to_builtin_tensor %arg1 : !torch.vtensor<[2,3],f32> -> tensor<2x3xf32>
// CHECK-NEXT:    %[[R:.*]] = "ipu.reshape"(%[[S]]) : (tensor<2x3xf32>) -> tensor<6xf32>
// CHECK-NEXT:    torch_c.from_builtin_tensor %[[R]]
func.func @as_strided_scatter$reshape(%x: !torch.vtensor<[6],f32>, %s: !torch.vtensor<[2,3],f32>) -> !torch.vtensor<[6],f32> {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %size = torch.prim.ListConstruct %int2, %int3 : (!torch.int, !torch.int) -> !torch.list<int>
  %stride = torch.prim.ListConstruct %int3, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.aten.as_strided_scatter %x, %s, %size, %stride, %int0 : !torch.vtensor<[6],f32>, !torch.vtensor<[2,3],f32>, !torch.list<int>, !torch.list<int>, !torch.int -> !torch.vtensor<[6],f32>
  return %0 : !torch.vtensor<[6],f32>
}

// -----

// Positions 1, 3, ..., 11 of the flattened 4x5 input: one run in steps of 2.
// CHECK-LABEL: func.func @as_strided_scatter$run
// CHECK:         %[[X:.*]] = "ipu.reshape"(%{{.*}}) : (tensor<4x5xf32>) -> tensor<20xf32>
// CHECK-NEXT:    %[[S:.*]] = "ipu.reshape"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<6xf32>
// CHECK-NEXT:    %[[U:.*]] = "ipu.slice_update"(%[[X]], %[[S]]) {ends = array<i64: 12>, starts = array<i64: 1>, steps = array<i64: 2>} : (tensor<20xf32>, tensor<6xf32>) -> tensor<20xf32>
// CHECK-NEXT:    "ipu.reshape"(%[[U]]) : (tensor<20xf32>) -> tensor<4x5xf32>
func.func @as_strided_scatter$run(%x: !torch.vtensor<[4,5],f32>, %s: !torch.vtensor<[2,3],f32>) -> !torch.vtensor<[4,5],f32> {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %int6 = torch.constant.int 6
  %size = torch.prim.ListConstruct %int2, %int3 : (!torch.int, !torch.int) -> !torch.list<int>
  %stride = torch.prim.ListConstruct %int6, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.aten.as_strided_scatter %x, %s, %size, %stride, %int1 : !torch.vtensor<[4,5],f32>, !torch.vtensor<[2,3],f32>, !torch.list<int>, !torch.list<int>, !torch.int -> !torch.vtensor<[4,5],f32>
  return %0 : !torch.vtensor<[4,5],f32>
}

// -----

// x[0:3, 1::2] of a 4x5 input (offset 1, strides 5 and 2): a box of the input itself.
// CHECK-LABEL: func.func @as_strided_scatter$box
// CHECK-DAG:     %[[X:.*]] = torch_c.to_builtin_tensor %arg0
// CHECK-DAG:     %[[S:.*]] = torch_c.to_builtin_tensor %arg1
// CHECK:         "ipu.slice_update"(%[[X]], %[[S]]) {ends = array<i64: 3, 4>, starts = array<i64: 0, 1>, steps = array<i64: 1, 2>} : (tensor<4x5xf32>, tensor<3x2xf32>) -> tensor<4x5xf32>
func.func @as_strided_scatter$box(%x: !torch.vtensor<[4,5],f32>, %s: !torch.vtensor<[3,2],f32>) -> !torch.vtensor<[4,5],f32> {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %int5 = torch.constant.int 5
  %size = torch.prim.ListConstruct %int3, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %stride = torch.prim.ListConstruct %int5, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.aten.as_strided_scatter %x, %s, %size, %stride, %int1 : !torch.vtensor<[4,5],f32>, !torch.vtensor<[3,2],f32>, !torch.list<int>, !torch.list<int>, !torch.int -> !torch.vtensor<[4,5],f32>
  return %0 : !torch.vtensor<[4,5],f32>
}

// -----

// A transposed view (strides 1, 3; no storage offset) is no box: an index_put of the
// flattened input at the view's positions.
// CHECK-LABEL: func.func @as_strided_scatter$transposed
// CHECK:         %[[I:.*]] = "ipu.constant"() {value = dense<{{\[}}[0], [3], [1], [4], [2], [5]]> : tensor<6x1xi32>} : () -> tensor<6x1xi32>
// CHECK-NEXT:    %[[X:.*]] = "ipu.reshape"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<6xf32>
// CHECK-NEXT:    %[[S:.*]] = "ipu.reshape"(%{{.*}}) : (tensor<3x2xf32>) -> tensor<6xf32>
// CHECK-NEXT:    %[[P:.*]] = "ipu.index_put"(%[[X]], %[[I]], %[[S]]) {accumulate = false} : (tensor<6xf32>, tensor<6x1xi32>, tensor<6xf32>) -> tensor<6xf32>
// CHECK-NEXT:    "ipu.reshape"(%[[P]]) : (tensor<6xf32>) -> tensor<2x3xf32>
func.func @as_strided_scatter$transposed(%x: !torch.vtensor<[2,3],f32>, %s: !torch.vtensor<[3,2],f32>) -> !torch.vtensor<[2,3],f32> {
  %none = torch.constant.none
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %size = torch.prim.ListConstruct %int3, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %stride = torch.prim.ListConstruct %int1, %int3 : (!torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.aten.as_strided_scatter %x, %s, %size, %stride, %none : !torch.vtensor<[2,3],f32>, !torch.vtensor<[3,2],f32>, !torch.list<int>, !torch.list<int>, !torch.none -> !torch.vtensor<[2,3],f32>
  return %0 : !torch.vtensor<[2,3],f32>
}

// -----

// Constant index tensors whose positions run in order (torch-mlir's gathers for
// `as_strided`, here of a channels-last mean and of a 6-vector, with a negative index)
// are the input reshaped; no gather is left.
// CHECK-LABEL: func.func @index$constant_run
// CHECK-NOT:     "ipu.index
// CHECK:         "ipu.reshape"(%{{.*}}) : (tensor<6xf32>) -> tensor<2x3xf32>
// CHECK-NOT:     "ipu.index
func.func @index$constant_run(%x: !torch.vtensor<[2,3,1,1],f32>, %y: !torch.vtensor<[6],f32>) -> (!torch.vtensor<[2,3,1,1],f32>, !torch.vtensor<[2,3],f32>) {
  %i0 = torch.vtensor.literal(dense<[[[[0]], [[0]], [[0]]], [[[1]], [[1]], [[1]]]]> : tensor<2x3x1x1xsi64>) : !torch.vtensor<[2,3,1,1],si64>
  %i1 = torch.vtensor.literal(dense<[[[[0]], [[1]], [[2]]], [[[0]], [[1]], [[2]]]]> : tensor<2x3x1x1xsi64>) : !torch.vtensor<[2,3,1,1],si64>
  %i2 = torch.vtensor.literal(dense<0> : tensor<2x3x1x1xsi64>) : !torch.vtensor<[2,3,1,1],si64>
  %0 = torch.prim.ListConstruct %i0, %i1, %i2, %i2 : (!torch.vtensor<[2,3,1,1],si64>, !torch.vtensor<[2,3,1,1],si64>, !torch.vtensor<[2,3,1,1],si64>, !torch.vtensor<[2,3,1,1],si64>) -> !torch.list<vtensor>
  %1 = torch.aten.index.Tensor_hacked_twin %x, %0 : !torch.vtensor<[2,3,1,1],f32>, !torch.list<vtensor> -> !torch.vtensor<[2,3,1,1],f32>
  %i3 = torch.vtensor.literal(dense<[[0, 1, 2], [3, 4, -1]]> : tensor<2x3xsi64>) : !torch.vtensor<[2,3],si64>
  %2 = torch.prim.ListConstruct %i3 : (!torch.vtensor<[2,3],si64>) -> !torch.list<vtensor>
  %3 = torch.aten.index.Tensor_hacked_twin %y, %2 : !torch.vtensor<[6],f32>, !torch.list<vtensor> -> !torch.vtensor<[2,3],f32>
  return %1, %3 : !torch.vtensor<[2,3,1,1],f32>, !torch.vtensor<[2,3],f32>
}

// -----

// Rows 1, 3, 5: a slice in steps of 2.
// CHECK-LABEL: func.func @index$constant_steps
// CHECK:         "ipu.slice"(%{{.*}}) {ends = array<i64: 6, 2>, starts = array<i64: 1, 0>, steps = array<i64: 2, 1>} : (tensor<8x2xf32>) -> tensor<3x2xf32>
func.func @index$constant_steps(%y: !torch.vtensor<[8,2],f32>) -> !torch.vtensor<[3,2],f32> {
  %i = torch.vtensor.literal(dense<[1, 3, 5]> : tensor<3xsi64>) : !torch.vtensor<[3],si64>
  %0 = torch.prim.ListConstruct %i : (!torch.vtensor<[3],si64>) -> !torch.list<vtensor>
  %1 = torch.aten.index.Tensor_hacked_twin %y, %0 : !torch.vtensor<[8,2],f32>, !torch.list<vtensor> -> !torch.vtensor<[3,2],f32>
  return %1 : !torch.vtensor<[3,2],f32>
}
