// RUN: ipu-opt %s --ipu-convert-poptorch-ops --ipu-import-annotations --split-input-file \
// RUN:   | FileCheck %s
// RUN: ipu-opt %s --ipu-convert-poptorch-ops --split-input-file --mlir-print-debuginfo \
// RUN:   | FileCheck %s --check-prefix=LOC

// poptorch.set_available_memory on a matrix product: the proportion annotates the mm
// (in its location, imported as an attribute) and the tensor goes on unchanged.
// CHECK-LABEL: func.func @matmul
// CHECK:         %[[MM:.*]] = torch.aten.mm %arg0, %arg1 {ipu.available_memory = 2.000000e-01 : f64}
// CHECK-NOT:     torch.poptorch.set_available_memory
// CHECK:         return %[[MM]]
// LOC-LABEL: func.func @matmul
// LOC:         torch.aten.mm {{.*}} loc([[MM:#loc[0-9]*]])
// LOC:         [[MM]] = loc(fused<{ipu.available_memory = 2.000000e-01 : f64}>[#loc{{[0-9]+}}])
func.func @matmul(%a: !torch.vtensor<[2,3],f32>, %b: !torch.vtensor<[3,4],f32>) -> !torch.vtensor<[2,4],f32> {
  %0 = torch.aten.mm %a, %b : !torch.vtensor<[2,3],f32>, !torch.vtensor<[3,4],f32> -> !torch.vtensor<[2,4],f32> loc("model.py":3:4)
  %p = torch.constant.float 2.000000e-01
  %1 = torch.operator "torch.poptorch.set_available_memory"(%0, %p) : (!torch.vtensor<[2,4],f32>, !torch.float) -> !torch.vtensor<[2,4],f32>
  return %1 : !torch.vtensor<[2,4],f32>
}

// -----

// nn.Linear as torch.export leaves it: views around a bmm and the bias addition. The
// annotation goes through the addition and the view to the bmm, not onto them.
// CHECK-LABEL: func.func @linear_bias
// CHECK:         torch.aten.bmm %{{.*}}, %{{.*}} {ipu.available_memory = 5.000000e-01 : f64}
// CHECK:         %[[VIEW:.*]] = torch.aten.view %{{[^{]*}} :
// CHECK-NEXT:    %[[ADD:.*]] = torch.aten.add.Tensor %[[VIEW]], %arg2, %{{[^{]*}} :
// CHECK-NEXT:    return %[[ADD]]
func.func @linear_bias(%x: !torch.vtensor<[1,2,3],f32>, %w: !torch.vtensor<[1,3,4],f32>, %bias: !torch.vtensor<[4],f32>) -> !torch.vtensor<[2,4],f32> {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int4 = torch.constant.int 4
  %0 = torch.aten.bmm %x, %w : !torch.vtensor<[1,2,3],f32>, !torch.vtensor<[1,3,4],f32> -> !torch.vtensor<[1,2,4],f32>
  %shape = torch.prim.ListConstruct %int2, %int4 : (!torch.int, !torch.int) -> !torch.list<int>
  %1 = torch.aten.view %0, %shape : !torch.vtensor<[1,2,4],f32>, !torch.list<int> -> !torch.vtensor<[2,4],f32>
  %2 = torch.aten.add.Tensor %1, %bias, %int1 : !torch.vtensor<[2,4],f32>, !torch.vtensor<[4],f32>, !torch.int -> !torch.vtensor<[2,4],f32>
  %p = torch.constant.float 5.000000e-01
  %3 = torch.operator "torch.poptorch.set_available_memory"(%2, %p) : (!torch.vtensor<[2,4],f32>, !torch.float) -> !torch.vtensor<[2,4],f32>
  return %3 : !torch.vtensor<[2,4],f32>
}

// -----

// An embedding lookup keeps the annotations it already has (its name scope) beside the
// proportion; an integer proportion (1) is read as 1.0.
// CHECK-LABEL: func.func @embedding
// CHECK:         torch.aten.embedding {{.*}} {ipu.available_memory = 1.000000e+00 : f64, ipu.name_scope = "emb"}
// LOC-LABEL: func.func @embedding
// LOC:         torch.aten.embedding {{.*}} loc([[EMB:#loc[0-9]*]])
// LOC:         [[EMB]] = loc(fused<{ipu.available_memory = 1.000000e+00 : f64, ipu.name_scope = "emb"}>[#loc{{[0-9]+}}])
func.func @embedding(%w: !torch.vtensor<[10,4],f32>, %i: !torch.vtensor<[2],si64>) -> !torch.vtensor<[2,4],f32> {
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %0 = torch.aten.embedding %w, %i, %int-1, %false, %false : !torch.vtensor<[10,4],f32>, !torch.vtensor<[2],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,4],f32> loc(fused<{ipu.name_scope = "emb"}>["model.py":7:8])
  %one = torch.constant.int 1
  %1 = torch.operator "torch.poptorch.set_available_memory"(%0, %one) : (!torch.vtensor<[2,4],f32>, !torch.int) -> !torch.vtensor<[2,4],f32>
  return %1 : !torch.vtensor<[2,4],f32>
}

// -----

// On the output of any other op (and on a block argument) the statement is an identity.
// CHECK-LABEL: func.func @identity
// CHECK-NOT:     ipu.available_memory
// CHECK:         %[[R:.*]] = torch.aten.relu %arg0
// CHECK-NEXT:    return %[[R]], %arg0
func.func @identity(%x: !torch.vtensor<[4],f32>) -> (!torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>) {
  %0 = torch.aten.relu %x : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
  %p = torch.constant.float 3.000000e-01
  %1 = torch.operator "torch.poptorch.set_available_memory"(%0, %p) : (!torch.vtensor<[4],f32>, !torch.float) -> !torch.vtensor<[4],f32>
  %2 = torch.operator "torch.poptorch.set_available_memory"(%x, %p) : (!torch.vtensor<[4],f32>, !torch.float) -> !torch.vtensor<[4],f32>
  return %1, %2 : !torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>
}
