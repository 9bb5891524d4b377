// RUN: ipu-opt %s --ipu-convert-torch-to-ipu --canonicalize --cse --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @views
// CHECK:         %[[V:.*]] = "ipu.reshape"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<6xf32>
// CHECK-NEXT:    "ipu.reshape"(%[[V]]) : (tensor<6xf32>) -> tensor<1x6xf32>
func.func @views(%x: !torch.vtensor<[2,3],f32>) -> !torch.vtensor<[1,6],f32> {
  %int0 = torch.constant.int 0
  %int6 = torch.constant.int 6
  %s = torch.prim.ListConstruct %int6 : (!torch.int) -> !torch.list<int>
  %0 = torch.aten.view %x, %s : !torch.vtensor<[2,3],f32>, !torch.list<int> -> !torch.vtensor<[6],f32>
  %1 = torch.aten.unsqueeze %0, %int0 : !torch.vtensor<[6],f32>, !torch.int -> !torch.vtensor<[1,6],f32>
  return %1 : !torch.vtensor<[1,6],f32>
}

// -----

// CHECK-LABEL: func.func @transpose_and_permute
// CHECK:         %[[T:.*]] = "ipu.permute"(%{{.*}}) {dims = array<i64: 0, 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
// CHECK-NEXT:    "ipu.permute"(%[[T]]) {dims = array<i64: 2, 0, 1>} : (tensor<2x4x3xf32>) -> tensor<3x2x4xf32>
func.func @transpose_and_permute(%x: !torch.vtensor<[2,3,4],f32>) -> !torch.vtensor<[3,2,4],f32> {
  %int1 = torch.constant.int 1
  %intm1 = torch.constant.int -1
  %int0 = torch.constant.int 0
  %0 = torch.aten.transpose.int %x, %int1, %intm1 : !torch.vtensor<[2,3,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,4,3],f32>
  %p = torch.prim.ListConstruct %intm1, %int0, %int1 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %1 = torch.aten.permute %0, %p : !torch.vtensor<[2,4,3],f32>, !torch.list<int> -> !torch.vtensor<[3,2,4],f32>
  return %1 : !torch.vtensor<[3,2,4],f32>
}

// -----

// slice(x, 1, -3, MAX, 2) and select(x, 0, -1): Python slicing rules, then a reshape.
// CHECK-LABEL: func.func @slice_select
// CHECK:         "ipu.slice"(%[[X:.*]]) {ends = array<i64: 2, 5>, starts = array<i64: 0, 2>, steps = array<i64: 1, 2>} : (tensor<2x5xf32>) -> tensor<2x2xf32>
// CHECK:         %[[S:.*]] = "ipu.slice"(%[[X]]) {ends = array<i64: 2, 5>, starts = array<i64: 1, 0>, steps = array<i64: 1, 1>} : (tensor<2x5xf32>) -> tensor<1x5xf32>
// CHECK-NEXT:    "ipu.reshape"(%[[S]]) : (tensor<1x5xf32>) -> tensor<5xf32>
func.func @slice_select(%x: !torch.vtensor<[2,5],f32>) -> (!torch.vtensor<[2,2],f32>, !torch.vtensor<[5],f32>) {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %intm1 = torch.constant.int -1
  %intm3 = torch.constant.int -3
  %max = torch.constant.int 9223372036854775807
  %0 = torch.aten.slice.Tensor %x, %int1, %intm3, %max, %int2 : !torch.vtensor<[2,5],f32>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,2],f32>
  %1 = torch.aten.select.int %x, %int0, %intm1 : !torch.vtensor<[2,5],f32>, !torch.int, !torch.int -> !torch.vtensor<[5],f32>
  return %0, %1 : !torch.vtensor<[2,2],f32>, !torch.vtensor<[5],f32>
}

// -----

// cat of three tensors is a chain of two binary concats.
// CHECK-LABEL: func.func @cat
// CHECK:         %[[AB:.*]] = "ipu.concat"(%{{.*}}, %{{.*}}) {dim = 0 : i64} : (tensor<1x3xf32>, tensor<2x3xf32>) -> tensor<3x3xf32>
// CHECK-NEXT:    "ipu.concat"(%[[AB]], %{{.*}}) {dim = 0 : i64} : (tensor<3x3xf32>, tensor<1x3xf32>) -> tensor<4x3xf32>
func.func @cat(%a: !torch.vtensor<[1,3],f32>, %b: !torch.vtensor<[2,3],f32>) -> !torch.vtensor<[4,3],f32> {
  %int0 = torch.constant.int 0
  %l = torch.prim.ListConstruct %a, %b, %a : (!torch.vtensor<[1,3],f32>, !torch.vtensor<[2,3],f32>, !torch.vtensor<[1,3],f32>) -> !torch.list<vtensor>
  %0 = torch.aten.cat %l, %int0 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[4,3],f32>
  return %0 : !torch.vtensor<[4,3],f32>
}

// -----

// CHECK-LABEL: func.func @expand
// CHECK:         "ipu.broadcast"(%{{.*}}) : (tensor<1x3xf32>) -> tensor<2x4x3xf32>
func.func @expand(%x: !torch.vtensor<[1,3],f32>) -> !torch.vtensor<[2,4,3],f32> {
  %int2 = torch.constant.int 2
  %int4 = torch.constant.int 4
  %intm1 = torch.constant.int -1
  %false = torch.constant.bool false
  %s = torch.prim.ListConstruct %int2, %int4, %intm1 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.aten.expand %x, %s, %false : !torch.vtensor<[1,3],f32>, !torch.list<int>, !torch.bool -> !torch.vtensor<[2,4,3],f32>
  return %0 : !torch.vtensor<[2,4,3],f32>
}
