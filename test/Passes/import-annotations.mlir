// RUN: ipu-opt %s --ipu-import-annotations --split-input-file | FileCheck %s
// RUN: ipu-opt %s --ipu-import-annotations=strip-metadata=true --split-input-file \
// RUN:   --mlir-print-debuginfo | FileCheck %s --check-prefix=STRIP
// RUN: ipu-opt %s --pass-pipeline='builtin.module(ipu-import-annotations, canonicalize)' \
// RUN:   --split-input-file | FileCheck %s --check-prefix=PIPE

// CHECK-LABEL: func.func @block_on_torch_op
// CHECK: torch.aten.relu %{{.*}} {ipu.block = "A"}
// STRIP-LABEL: func.func @block_on_torch_op
// STRIP: torch.aten.relu %{{.*}} {ipu.block = "A"} : {{.*}} loc([[RELU:#loc[0-9]*]])
// STRIP: [[RELU]] = loc("model.py":3:4)
// PIPE-LABEL: func.func @block_on_torch_op
// PIPE-NEXT: torch.aten.relu %{{.*}} {ipu.block = "A"}
func.func @block_on_torch_op(%x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
  %0 = torch.aten.relu %x : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32> loc(fused<{ipu.block = "A"}>["model.py":3:4])
  return %0 : !torch.vtensor<[4],f32>
}

// -----

// Every ipu.* key is imported, whatever its type; other metadata is left alone, and
// with strip-metadata it stays in the location.
// CHECK-LABEL: func.func @several_keys
// CHECK: "ipu.relu"(%{{.*}}) {ipu.block = "B", ipu.ipu_id = 1 : i64}
// CHECK-NOT: other
// STRIP-LABEL: func.func @several_keys
// STRIP: "ipu.relu"(%{{.*}}) {ipu.block = "B", ipu.ipu_id = 1 : i64} {{.*}} loc([[L:#loc[0-9]*]])
// STRIP-NOT: ipu.block = "B"}>
// STRIP: [[L]] = loc(fused<{other = "kept"}>[#loc{{[0-9]+}}])
func.func @several_keys(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.relu"(%x) : (tensor<4xf32>) -> tensor<4xf32> loc(fused<{ipu.block = "B", ipu.ipu_id = 1 : i64, other = "kept"}>["model.py":7:1])
  return %0 : tensor<4xf32>
}

// -----

// The annotation is found through name and call-site locations, and the outermost
// value wins when code from two blocks was fused into one op.
// CHECK-LABEL: func.func @nested_locations
// CHECK: "ipu.exp"(%{{.*}}) {ipu.block = "C"}
// CHECK: "ipu.neg"(%{{.*}}) {ipu.block = "D"}
func.func @nested_locations(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32> loc("layer"(callsite(fused<{ipu.block = "C"}>["lib.py":1:1] at "model.py":2:2)))
  %1 = "ipu.neg"(%0) : (tensor<4xf32>) -> tensor<4xf32> loc(fused<{ipu.block = "D"}>["model.py":9:1, fused<{ipu.block = "D"}>["model.py":9:5]])
  return %1 : tensor<4xf32>
}

// -----

// An attribute already on the op wins over the location.
// CHECK-LABEL: func.func @attribute_wins
// CHECK: "ipu.abs"(%{{.*}}) {ipu.block = "explicit"}
// CHECK-LABEL: func.func @no_annotation
// CHECK: "ipu.abs"(%{{.*}}) : (tensor<4xf32>) -> tensor<4xf32>
func.func @attribute_wins(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.abs"(%x) {ipu.block = "explicit"} : (tensor<4xf32>) -> tensor<4xf32> loc(fused<{ipu.block = "from-loc"}>["model.py":1:1])
  return %0 : tensor<4xf32>
}
func.func @no_annotation(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.abs"(%x) : (tensor<4xf32>) -> tensor<4xf32> loc("model.py":1:1)
  return %0 : tensor<4xf32>
}
