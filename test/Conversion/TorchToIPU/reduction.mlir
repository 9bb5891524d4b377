// RUN: ipu-opt %s --ipu-convert-torch-to-ipu --canonicalize --split-input-file | FileCheck %s

// One function per lowering of passes/conversion/reduction.py. Dims come out sorted and
// non-negative; operands are cast to the torch result's element type first.

// aten.sum: no dims operand reduces every dim.
// CHECK-LABEL: func.func @sum$all
// CHECK:         %[[X:.*]] = torch_c.to_builtin_tensor %arg0
// CHECK-NEXT:    %[[S:.*]] = "ipu.reduce"(%[[X]]) {dims = array<i64: 0, 1>, keepdim = false, kind = "sum"} : (tensor<3x4xf32>) -> tensor<f32>
// CHECK-NEXT:    torch_c.from_builtin_tensor %[[S]]
func.func @sum$all(%x: !torch.vtensor<[3,4],f32>) -> !torch.vtensor<[],f32> {
  %none = torch.constant.none
  %0 = torch.aten.sum %x, %none : !torch.vtensor<[3,4],f32>, !torch.none -> !torch.vtensor<[],f32>
  return %0 : !torch.vtensor<[],f32>
}

// -----

// Negative and unsorted dims are normalised: [-1, 0] becomes [0, 2].
// CHECK-LABEL: func.func @sum$dims_keepdim
// CHECK:         "ipu.reduce"(%{{.*}}) {dims = array<i64: 0, 2>, keepdim = true, kind = "sum"} : (tensor<3x4x5xf32>) -> tensor<1x4x1xf32>
func.func @sum$dims_keepdim(%x: !torch.vtensor<[3,4,5],f32>) -> !torch.vtensor<[1,4,1],f32> {
  %none = torch.constant.none
  %true = torch.constant.bool true
  %int-1 = torch.constant.int -1
  %int0 = torch.constant.int 0
  %dims = torch.prim.ListConstruct %int-1, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.aten.sum.dim_IntList %x, %dims, %true, %none : !torch.vtensor<[3,4,5],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[1,4,1],f32>
  return %0 : !torch.vtensor<[1,4,1],f32>
}

// -----

// A sum of booleans is an int64 sum: the operand is cast to the result's type first.
// CHECK-LABEL: func.func @sum$bool
// CHECK:         %[[I:.*]] = "ipu.cast"(%{{.*}}) : (tensor<3x4xi1>) -> tensor<3x4xi64>
// CHECK-NEXT:    "ipu.reduce"(%[[I]]) {dims = array<i64: 1>, keepdim = false, kind = "sum"} : (tensor<3x4xi64>) -> tensor<3xi64>
func.func @sum$bool(%x: !torch.vtensor<[3,4],i1>) -> !torch.vtensor<[3],si64> {
  %none = torch.constant.none
  %false = torch.constant.bool false
  %int1 = torch.constant.int 1
  %dims = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
  %0 = torch.aten.sum.dim_IntList %x, %dims, %false, %none : !torch.vtensor<[3,4],i1>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[3],si64>
  return %0 : !torch.vtensor<[3],si64>
}

// -----

// CHECK-LABEL: func.func @mean$dim
// CHECK:         "ipu.reduce"(%{{.*}}) {dims = array<i64: 0>, keepdim = false, kind = "mean"} : (tensor<3x4xf16>) -> tensor<4xf16>
func.func @mean$dim(%x: !torch.vtensor<[3,4],f16>) -> !torch.vtensor<[4],f16> {
  %none = torch.constant.none
  %false = torch.constant.bool false
  %int0 = torch.constant.int 0
  %dims = torch.prim.ListConstruct %int0 : (!torch.int) -> !torch.list<int>
  %0 = torch.aten.mean.dim %x, %dims, %false, %none : !torch.vtensor<[3,4],f16>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[4],f16>
  return %0 : !torch.vtensor<[4],f16>
}

// -----

// CHECK-LABEL: func.func @prod$dim_int
// CHECK:         "ipu.reduce"(%{{.*}}) {dims = array<i64: 1>, keepdim = true, kind = "prod"} : (tensor<3x4xf32>) -> tensor<3x1xf32>
func.func @prod$dim_int(%x: !torch.vtensor<[3,4],f32>) -> !torch.vtensor<[3,1],f32> {
  %none = torch.constant.none
  %true = torch.constant.bool true
  %int1 = torch.constant.int 1
  %0 = torch.aten.prod.dim_int %x, %int1, %true, %none : !torch.vtensor<[3,4],f32>, !torch.int, !torch.bool, !torch.none -> !torch.vtensor<[3,1],f32>
  return %0 : !torch.vtensor<[3,1],f32>
}

// -----

// amax over an empty dim list reduces every dim, as torch does.
// CHECK-LABEL: func.func @amax_amin
// CHECK:         "ipu.reduce"(%{{.*}}) {dims = array<i64: 0, 1>, keepdim = false, kind = "max"} : (tensor<3x4xf32>) -> tensor<f32>
// CHECK:         "ipu.reduce"(%{{.*}}) {dims = array<i64: 1>, keepdim = false, kind = "min"} : (tensor<3x4xf32>) -> tensor<3xf32>
func.func @amax_amin(%x: !torch.vtensor<[3,4],f32>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[3],f32>) {
  %false = torch.constant.bool false
  %int1 = torch.constant.int 1
  %dims = torch.prim.ListConstruct  : () -> !torch.list<int>
  %one = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
  %0 = torch.aten.amax %x, %dims, %false : !torch.vtensor<[3,4],f32>, !torch.list<int>, !torch.bool -> !torch.vtensor<[],f32>
  %1 = torch.aten.amin %x, %one, %false : !torch.vtensor<[3,4],f32>, !torch.list<int>, !torch.bool -> !torch.vtensor<[3],f32>
  return %0, %1 : !torch.vtensor<[],f32>, !torch.vtensor<[3],f32>
}

// -----

// max.dim: the values and the first indices, as i64 because the torch result says si64.
// CHECK-LABEL: func.func @max$dim
// CHECK:         %[[X:.*]] = torch_c.to_builtin_tensor %arg0
// CHECK-NEXT:    %[[V:.*]] = "ipu.reduce"(%[[X]]) {dims = array<i64: 1>, keepdim = false, kind = "max"} : (tensor<3x4xf32>) -> tensor<3xf32>
// CHECK-NEXT:    %[[I:.*]] = "ipu.arg_max"(%[[X]]) {dim = 1 : i64, keepdim = false} : (tensor<3x4xf32>) -> tensor<3xi64>
// CHECK-DAG:     torch_c.from_builtin_tensor %[[V]]
// CHECK-DAG:     torch_c.from_builtin_tensor %[[I]]
func.func @max$dim(%x: !torch.vtensor<[3,4],f32>) -> (!torch.vtensor<[3],f32>, !torch.vtensor<[3],si64>) {
  %false = torch.constant.bool false
  %int-1 = torch.constant.int -1
  %values, %indices = torch.aten.max.dim %x, %int-1, %false : !torch.vtensor<[3,4],f32>, !torch.int, !torch.bool -> !torch.vtensor<[3],f32>, !torch.vtensor<[3],si64>
  return %values, %indices : !torch.vtensor<[3],f32>, !torch.vtensor<[3],si64>
}

// -----

// CHECK-LABEL: func.func @min
// CHECK:         "ipu.reduce"(%{{.*}}) {dims = array<i64: 0, 1>, keepdim = false, kind = "min"} : (tensor<3x4xi32>) -> tensor<i32>
func.func @min(%x: !torch.vtensor<[3,4],si32>) -> !torch.vtensor<[],si32> {
  %0 = torch.aten.min %x : !torch.vtensor<[3,4],si32> -> !torch.vtensor<[],si32>
  return %0 : !torch.vtensor<[],si32>
}

// -----

// argmax without a dim works on the flattened operand; keepdim gives all-ones dims.
// CHECK-LABEL: func.func @argmax$flat_keepdim
// CHECK:         %[[F:.*]] = "ipu.reshape"(%{{.*}}) : (tensor<3x4xf32>) -> tensor<12xf32>
// CHECK-NEXT:    %[[I:.*]] = "ipu.arg_max"(%[[F]]) {dim = 0 : i64, keepdim = false} : (tensor<12xf32>) -> tensor<i64>
// CHECK-NEXT:    "ipu.reshape"(%[[I]]) : (tensor<i64>) -> tensor<1x1xi64>
func.func @argmax$flat_keepdim(%x: !torch.vtensor<[3,4],f32>) -> !torch.vtensor<[1,1],si64> {
  %none = torch.constant.none
  %true = torch.constant.bool true
  %0 = torch.aten.argmax %x, %none, %true : !torch.vtensor<[3,4],f32>, !torch.none, !torch.bool -> !torch.vtensor<[1,1],si64>
  return %0 : !torch.vtensor<[1,1],si64>
}

// -----

// CHECK-LABEL: func.func @argmin$dim
// CHECK:         "ipu.arg_min"(%{{.*}}) {dim = 0 : i64, keepdim = false} : (tensor<3x4xf16>) -> tensor<4xi64>
func.func @argmin$dim(%x: !torch.vtensor<[3,4],f16>) -> !torch.vtensor<[4],si64> {
  %false = torch.constant.bool false
  %int0 = torch.constant.int 0
  %0 = torch.aten.argmin %x, %int0, %false : !torch.vtensor<[3,4],f16>, !torch.int, !torch.bool -> !torch.vtensor<[4],si64>
  return %0 : !torch.vtensor<[4],si64>
}

// -----

// any/all reduce i1: a float operand is cast (nonzero is true).
// CHECK-LABEL: func.func @any_all
// CHECK:         %[[B:.*]] = "ipu.cast"(%{{.*}}) : (tensor<3x4xf32>) -> tensor<3x4xi1>
// CHECK-NEXT:    "ipu.reduce"(%[[B]]) {dims = array<i64: 1>, keepdim = true, kind = "any"} : (tensor<3x4xi1>) -> tensor<3x1xi1>
// CHECK:         "ipu.reduce"(%{{.*}}) {dims = array<i64: 0, 1>, keepdim = false, kind = "all"} : (tensor<3x4xi1>) -> tensor<i1>
func.func @any_all(%x: !torch.vtensor<[3,4],f32>, %b: !torch.vtensor<[3,4],i1>) -> (!torch.vtensor<[3,1],i1>, !torch.vtensor<[],i1>) {
  %true = torch.constant.bool true
  %int1 = torch.constant.int 1
  %0 = torch.aten.any.dim %x, %int1, %true : !torch.vtensor<[3,4],f32>, !torch.int, !torch.bool -> !torch.vtensor<[3,1],i1>
  %1 = torch.aten.all %b : !torch.vtensor<[3,4],i1> -> !torch.vtensor<[],i1>
  return %0, %1 : !torch.vtensor<[3,1],i1>, !torch.vtensor<[],i1>
}

// -----

// An int32 cumsum is an int64 one in torch; cumprod's dim -1 becomes 1.
// CHECK-LABEL: func.func @cumsum_cumprod
// CHECK:         %[[I:.*]] = "ipu.cast"(%{{.*}}) : (tensor<3x4xi32>) -> tensor<3x4xi64>
// CHECK-NEXT:    "ipu.cumsum"(%[[I]]) {dim = 0 : i64} : (tensor<3x4xi64>) -> tensor<3x4xi64>
// CHECK:         "ipu.cumprod"(%{{.*}}) {dim = 1 : i64} : (tensor<3x4xf32>) -> tensor<3x4xf32>
func.func @cumsum_cumprod(%x: !torch.vtensor<[3,4],si32>, %y: !torch.vtensor<[3,4],f32>) -> (!torch.vtensor<[3,4],si64>, !torch.vtensor<[3,4],f32>) {
  %none = torch.constant.none
  %int0 = torch.constant.int 0
  %int-1 = torch.constant.int -1
  %0 = torch.aten.cumsum %x, %int0, %none : !torch.vtensor<[3,4],si32>, !torch.int, !torch.none -> !torch.vtensor<[3,4],si64>
  %1 = torch.aten.cumprod %y, %int-1, %none : !torch.vtensor<[3,4],f32>, !torch.int, !torch.none -> !torch.vtensor<[3,4],f32>
  return %0, %1 : !torch.vtensor<[3,4],si64>, !torch.vtensor<[3,4],f32>
}

// -----

// CHECK-LABEL: func.func @vector_norm$l2
// CHECK:         %[[S:.*]] = "ipu.reduce"(%{{.*}}) {dims = array<i64: 1>, keepdim = false, kind = "square_sum"} : (tensor<3x4xf32>) -> tensor<3xf32>
// CHECK-NEXT:    "ipu.sqrt"(%[[S]]) : (tensor<3xf32>) -> tensor<3xf32>
func.func @vector_norm$l2(%x: !torch.vtensor<[3,4],f32>) -> !torch.vtensor<[3],f32> {
  %none = torch.constant.none
  %false = torch.constant.bool false
  %int2 = torch.constant.int 2
  %int1 = torch.constant.int 1
  %dims = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
  %0 = torch.aten.linalg_vector_norm %x, %int2, %dims, %false, %none : !torch.vtensor<[3,4],f32>, !torch.int, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[3],f32>
  return %0 : !torch.vtensor<[3],f32>
}

// -----

// float16 squares are summed in float32, as PyTorch does (a norm of 300 stays finite).
// CHECK-LABEL: func.func @vector_norm$l2_f16
// CHECK:         %[[W:.*]] = "ipu.cast"(%{{.*}}) : (tensor<3x4xf16>) -> tensor<3x4xf32>
// CHECK-NEXT:    %[[S:.*]] = "ipu.reduce"(%[[W]]) {dims = array<i64: 1>, keepdim = false, kind = "square_sum"} : (tensor<3x4xf32>) -> tensor<3xf32>
// CHECK-NEXT:    %[[R:.*]] = "ipu.sqrt"(%[[S]]) : (tensor<3xf32>) -> tensor<3xf32>
// CHECK-NEXT:    "ipu.cast"(%[[R]]) : (tensor<3xf32>) -> tensor<3xf16>
func.func @vector_norm$l2_f16(%x: !torch.vtensor<[3,4],f16>) -> !torch.vtensor<[3],f16> {
  %none = torch.constant.none
  %false = torch.constant.bool false
  %int2 = torch.constant.int 2
  %int1 = torch.constant.int 1
  %dims = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
  %0 = torch.aten.linalg_vector_norm %x, %int2, %dims, %false, %none : !torch.vtensor<[3,4],f16>, !torch.int, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[3],f16>
  return %0 : !torch.vtensor<[3],f16>
}

// -----

// CHECK-LABEL: func.func @vector_norm$inf
// CHECK:         %[[A:.*]] = "ipu.abs"(%{{.*}}) : (tensor<3x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:    "ipu.reduce"(%[[A]]) {dims = array<i64: 0, 1>, keepdim = false, kind = "max"} : (tensor<3x4xf32>) -> tensor<f32>
func.func @vector_norm$inf(%x: !torch.vtensor<[3,4],f32>) -> !torch.vtensor<[],f32> {
  %none = torch.constant.none
  %false = torch.constant.bool false
  %inf = torch.constant.float 0x7FF0000000000000
  %0 = torch.aten.linalg_vector_norm %x, %inf, %none, %false, %none : !torch.vtensor<[3,4],f32>, !torch.float, !torch.none, !torch.bool, !torch.none -> !torch.vtensor<[],f32>
  return %0 : !torch.vtensor<[],f32>
}

// -----

// A general p-norm: (sum |x|^p)^(1/p).
// CHECK-LABEL: func.func @vector_norm$p3
// CHECK:         %[[A:.*]] = "ipu.abs"(%{{.*}}) : (tensor<3x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:    %[[P:.*]] = "ipu.constant"() {value = dense<3.000000e+00> : tensor<f32>} : () -> tensor<f32>
// CHECK-NEXT:    %[[W:.*]] = "ipu.pow"(%[[A]], %[[P]]) : (tensor<3x4xf32>, tensor<f32>) -> tensor<3x4xf32>
// CHECK-NEXT:    %[[S:.*]] = "ipu.reduce"(%[[W]]) {dims = array<i64: 1>, keepdim = false, kind = "sum"} : (tensor<3x4xf32>) -> tensor<3xf32>
// CHECK-NEXT:    %[[R:.*]] = "ipu.constant"() {value = dense<0.333333343> : tensor<f32>} : () -> tensor<f32>
// CHECK-NEXT:    "ipu.pow"(%[[S]], %[[R]]) : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
func.func @vector_norm$p3(%x: !torch.vtensor<[3,4],f32>) -> !torch.vtensor<[3],f32> {
  %none = torch.constant.none
  %false = torch.constant.bool false
  %int3 = torch.constant.int 3
  %int1 = torch.constant.int 1
  %dims = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
  %0 = torch.aten.linalg_vector_norm %x, %int3, %dims, %false, %none : !torch.vtensor<[3,4],f32>, !torch.int, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[3],f32>
  return %0 : !torch.vtensor<[3],f32>
}

// -----

// The 0-"norm" counts the nonzero elements.
// CHECK-LABEL: func.func @vector_norm$l0
// CHECK:         %[[NZ:.*]] = "ipu.ne"(%{{.*}}, %{{.*}}) : (tensor<3x4xf32>, tensor<f32>) -> tensor<3x4xi1>
// CHECK-NEXT:    %[[F:.*]] = "ipu.cast"(%[[NZ]]) : (tensor<3x4xi1>) -> tensor<3x4xf32>
// CHECK-NEXT:    "ipu.reduce"(%[[F]]) {dims = array<i64: 1>, keepdim = false, kind = "sum"} : (tensor<3x4xf32>) -> tensor<3xf32>
func.func @vector_norm$l0(%x: !torch.vtensor<[3,4],f32>) -> !torch.vtensor<[3],f32> {
  %none = torch.constant.none
  %false = torch.constant.bool false
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %dims = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
  %0 = torch.aten.linalg_vector_norm %x, %int0, %dims, %false, %none : !torch.vtensor<[3,4],f32>, !torch.int, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[3],f32>
  return %0 : !torch.vtensor<[3],f32>
}

// -----

// linalg_norm without ord: the 2-norm over every element (Frobenius for a matrix).
// CHECK-LABEL: func.func @linalg_norm$frobenius
// CHECK:         %[[S:.*]] = "ipu.reduce"(%{{.*}}) {dims = array<i64: 0, 1>, keepdim = false, kind = "square_sum"} : (tensor<3x4xf32>) -> tensor<f32>
// CHECK-NEXT:    "ipu.sqrt"(%[[S]]) : (tensor<f32>) -> tensor<f32>
func.func @linalg_norm$frobenius(%x: !torch.vtensor<[3,4],f32>) -> !torch.vtensor<[],f32> {
  %none = torch.constant.none
  %false = torch.constant.bool false
  %0 = torch.aten.linalg_norm %x, %none, %none, %false, %none : !torch.vtensor<[3,4],f32>, !torch.none, !torch.none, !torch.bool, !torch.none -> !torch.vtensor<[],f32>
  return %0 : !torch.vtensor<[],f32>
}

// -----

// var: squared deviations from the (kept-dim) mean over N - correction = 3.
// CHECK-LABEL: func.func @var$correction
// CHECK:         %[[X:.*]] = torch_c.to_builtin_tensor %arg0
// CHECK-NEXT:    %[[M:.*]] = "ipu.reduce"(%[[X]]) {dims = array<i64: 1>, keepdim = true, kind = "mean"} : (tensor<3x4xf32>) -> tensor<3x1xf32>
// CHECK-NEXT:    %[[D:.*]] = "ipu.sub"(%[[X]], %[[M]]) : (tensor<3x4xf32>, tensor<3x1xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:    %[[S:.*]] = "ipu.reduce"(%[[D]]) {dims = array<i64: 1>, keepdim = true, kind = "square_sum"} : (tensor<3x4xf32>) -> tensor<3x1xf32>
// CHECK-NEXT:    %[[N:.*]] = "ipu.constant"() {value = dense<3.000000e+00> : tensor<f32>} : () -> tensor<f32>
// CHECK-NEXT:    "ipu.div"(%[[S]], %[[N]]) : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
func.func @var$correction(%x: !torch.vtensor<[3,4],f32>) -> !torch.vtensor<[3,1],f32> {
  %true = torch.constant.bool true
  %int1 = torch.constant.int 1
  %dims = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
  %0 = torch.aten.var.correction %x, %dims, %int1, %true : !torch.vtensor<[3,4],f32>, !torch.list<int>, !torch.int, !torch.bool -> !torch.vtensor<[3,1],f32>
  return %0 : !torch.vtensor<[3,1],f32>
}

// -----

// std over all 12 elements with correction 0, then the square root.
// CHECK-LABEL: func.func @std$correction
// CHECK:         "ipu.reduce"(%{{.*}}) {dims = array<i64: 0, 1>, keepdim = true, kind = "mean"} : (tensor<3x4xf32>) -> tensor<1x1xf32>
// CHECK:         %[[S:.*]] = "ipu.reduce"(%{{.*}}) {dims = array<i64: 0, 1>, keepdim = false, kind = "square_sum"} : (tensor<3x4xf32>) -> tensor<f32>
// CHECK-NEXT:    %[[N:.*]] = "ipu.constant"() {value = dense<1.200000e+01> : tensor<f32>} : () -> tensor<f32>
// CHECK-NEXT:    %[[V:.*]] = "ipu.div"(%[[S]], %[[N]]) : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT:    "ipu.sqrt"(%[[V]]) : (tensor<f32>) -> tensor<f32>
func.func @std$correction(%x: !torch.vtensor<[3,4],f32>) -> !torch.vtensor<[],f32> {
  %none = torch.constant.none
  %false = torch.constant.bool false
  %int0 = torch.constant.int 0
  %0 = torch.aten.std.correction %x, %none, %int0, %false : !torch.vtensor<[3,4],f32>, !torch.none, !torch.int, !torch.bool -> !torch.vtensor<[],f32>
  return %0 : !torch.vtensor<[],f32>
}

// -----

// logsumexp shifts by the row maximum, replaced by 0 where it is infinite (as torch).
// CHECK-LABEL: func.func @logsumexp
// CHECK:         %[[X:.*]] = torch_c.to_builtin_tensor %arg0
// CHECK-NEXT:    %[[M:.*]] = "ipu.reduce"(%[[X]]) {dims = array<i64: 1>, keepdim = true, kind = "max"} : (tensor<3x4xf32>) -> tensor<3x1xf32>
// CHECK-NEXT:    %[[A:.*]] = "ipu.abs"(%[[M]])
// CHECK-NEXT:    %[[INF:.*]] = "ipu.constant"() {value = dense<0x7F800000> : tensor<f32>}
// CHECK-NEXT:    %[[IS:.*]] = "ipu.eq"(%[[A]], %[[INF]]) : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xi1>
// CHECK-NEXT:    %[[Z:.*]] = "ipu.constant"() {value = dense<0.000000e+00> : tensor<f32>}
// CHECK-NEXT:    %[[SH:.*]] = "ipu.select"(%[[IS]], %[[Z]], %[[M]]) : (tensor<3x1xi1>, tensor<f32>, tensor<3x1xf32>) -> tensor<3x1xf32>
// CHECK-NEXT:    %[[D:.*]] = "ipu.sub"(%[[X]], %[[SH]])
// CHECK-NEXT:    %[[E:.*]] = "ipu.exp"(%[[D]])
// CHECK-NEXT:    %[[S:.*]] = "ipu.reduce"(%[[E]]) {dims = array<i64: 1>, keepdim = false, kind = "sum"} : (tensor<3x4xf32>) -> tensor<3xf32>
// CHECK-NEXT:    %[[L:.*]] = "ipu.log"(%[[S]])
// CHECK-NEXT:    %[[R:.*]] = "ipu.reshape"(%[[SH]]) : (tensor<3x1xf32>) -> tensor<3xf32>
// CHECK-NEXT:    "ipu.add"(%[[L]], %[[R]]) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
func.func @logsumexp(%x: !torch.vtensor<[3,4],f32>) -> !torch.vtensor<[3],f32> {
  %false = torch.constant.bool false
  %int1 = torch.constant.int 1
  %dims = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
  %0 = torch.aten.logsumexp %x, %dims, %false : !torch.vtensor<[3,4],f32>, !torch.list<int>, !torch.bool -> !torch.vtensor<[3],f32>
  return %0 : !torch.vtensor<[3],f32>
}

// -----

// A reduction of a 0-d tensor keeps an empty dims array (which the op builder used to
// drop as falsy).
// CHECK-LABEL: func.func @sum$scalar
// CHECK:         "ipu.reduce"(%{{.*}}) {dims = array<i64>, keepdim = false, kind = "sum"} : (tensor<f32>) -> tensor<f32>
func.func @sum$scalar(%x: !torch.vtensor<[],f32>) -> !torch.vtensor<[],f32> {
  %none = torch.constant.none
  %0 = torch.aten.sum %x, %none : !torch.vtensor<[],f32>, !torch.none -> !torch.vtensor<[],f32>
  return %0 : !torch.vtensor<[],f32>
}

// -----

// CHECK-LABEL: func.func @any$scalar
// CHECK:         "ipu.reduce"(%{{.*}}) {dims = array<i64>, keepdim = true, kind = "any"} : (tensor<i1>) -> tensor<i1>
func.func @any$scalar(%x: !torch.vtensor<[],f32>) -> !torch.vtensor<[],i1> {
  %int0 = torch.constant.int 0
  %true = torch.constant.bool true
  %0 = torch.aten.any.dim %x, %int0, %true : !torch.vtensor<[],f32>, !torch.int, !torch.bool -> !torch.vtensor<[],i1>
  return %0 : !torch.vtensor<[],i1>
}
