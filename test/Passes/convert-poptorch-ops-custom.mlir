// RUN: ipu-opt %s --ipu-convert-poptorch-ops --split-input-file | FileCheck %s

// poptorch.custom_op with two outputs (spec listing 4.24): one ipu.custom taking the
// tensors of the list, named by op, domain and version, its results of the example
// outputs' types (here of different dtypes, which is why the op has one optional slot
// per operand and result: dialects/custom.py).
// CHECK-LABEL: func.func @cube
// CHECK-DAG:     %[[X:.*]] = torch_c.to_builtin_tensor %arg0 : !torch.vtensor<[2,8],f32> -> tensor<2x8xf32>
// CHECK-DAG:     %[[B:.*]] = torch_c.to_builtin_tensor %arg1 : !torch.vtensor<[8],f32> -> tensor<8xf32>
// CHECK:         %[[C:.*]]:2 = "ipu.custom"(%[[X]], %[[B]]) {attrs = {}, domain = "com.acme", domain_version = 1 : i64, gradient = false, op_name = "Cube", operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<8xi32>)
// CHECK-DAG:     torch_c.from_builtin_tensor %[[C]]#0 : tensor<2x8xf32> -> !torch.vtensor<[2,8],f32>
// CHECK-DAG:     torch_c.from_builtin_tensor %[[C]]#1 : tensor<8xi32> -> !torch.vtensor<[8],si32>
func.func @cube(%x: !torch.vtensor<[2,8],f32>, %b: !torch.vtensor<[8],f32>) -> (!torch.vtensor<[2,8],f32>, !torch.vtensor<[8],si32>) {
  %list = torch.prim.ListConstruct %x, %b : (!torch.vtensor<[2,8],f32>, !torch.vtensor<[8],f32>) -> !torch.list<vtensor>
  %name = torch.constant.str "Cube"
  %domain = torch.constant.str "com.acme"
  %version = torch.constant.int 1
  %spec = torch.constant.str "{\22outputs\22: [[[2, 8], \22float32\22], [[8], \22int32\22]], \22attributes\22: {}, \22inputs\22: 2}"
  %0:2 = torch.operator "torch.poptorch.custom_operation_2"(%list, %name, %domain, %version, %spec) : (!torch.list<vtensor>, !torch.str, !torch.str, !torch.int, !torch.str) -> (!torch.vtensor<[2,8],f32>, !torch.vtensor<[8],si32>)
  return %0#0, %0#1 : !torch.vtensor<[2,8],f32>, !torch.vtensor<[8],si32>
}

// -----

// Attributes of every type of spec Table 4.1 (listing 4.26): a float is f32, an int i64,
// lists are arrays of those, strings keep their quotes and backslashes.
// CHECK-LABEL: func.func @many_attributes
// CHECK:         "ipu.custom"(%{{.*}}) {attrs = {a_string = "quote \22 slash \\ end", float_minus_two = -2.000000e+00 : f32, floats = [1.000000e+00 : f32, 2.500000e-01 : f32], int_minus_five = -5 : i64, ints = [1, -2], strs = ["abc", "def"]}, domain = "test.poptorch", domain_version = 3 : i64, gradient = false, op_name = "ManyAttributeOp", operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<3xf32>) -> tensor<3xf32>
func.func @many_attributes(%x: !torch.vtensor<[3],f32>) -> !torch.vtensor<[3],f32> {
  %list = torch.prim.ListConstruct %x : (!torch.vtensor<[3],f32>) -> !torch.list<vtensor>
  %name = torch.constant.str "ManyAttributeOp"
  %domain = torch.constant.str "test.poptorch"
  %version = torch.constant.int 3
  %spec = torch.constant.str "{\22outputs\22: [[[3], \22float32\22]], \22attributes\22: {\22float_minus_two\22: -2.0, \22int_minus_five\22: -5, \22floats\22: [1.0, 0.25], \22ints\22: [1, -2], \22a_string\22: \22quote \\\22 slash \\\\ end\22, \22strs\22: [\22abc\22, \22def\22]}, \22inputs\22: 1}"
  %0 = torch.operator "torch.poptorch.custom_operation_1"(%list, %name, %domain, %version, %spec) : (!torch.list<vtensor>, !torch.str, !torch.str, !torch.int, !torch.str) -> !torch.vtensor<[3],f32>
  return %0 : !torch.vtensor<[3],f32>
}

// -----

// The gradient of a custom op of two inputs and one output: ipu.custom with gradient =
// true, taking the inputs, the output and its gradient, returning the inputs' gradients.
// CHECK-LABEL: func.func @gradient
// CHECK:         "ipu.custom"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {attrs = {alpha = 5.000000e-01 : f32}, domain = "com.acme", domain_version = 1 : i64, gradient = true, op_name = "Scale", operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
func.func @gradient(%x: !torch.vtensor<[4],f32>, %y: !torch.vtensor<[4],f32>, %out: !torch.vtensor<[4],f32>, %grad: !torch.vtensor<[4],f32>) -> (!torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>) {
  %list = torch.prim.ListConstruct %x, %y, %out, %grad : (!torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>) -> !torch.list<vtensor>
  %name = torch.constant.str "Scale"
  %domain = torch.constant.str "com.acme"
  %version = torch.constant.int 1
  %spec = torch.constant.str "{\22outputs\22: [[[4], \22float32\22]], \22attributes\22: {\22alpha\22: 0.5}, \22inputs\22: 2, \22input_shapes\22: [[[4], \22float32\22], [[4], \22float32\22]]}"
  %0:2 = torch.operator "torch.poptorch.custom_operation_grad_2"(%list, %name, %domain, %version, %spec) : (!torch.list<vtensor>, !torch.str, !torch.str, !torch.int, !torch.str) -> (!torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>)
  return %0#0, %0#1 : !torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>
}

// -----

// poptorch.CPU: ipu.host_call with the callback's ID, its results of the layer's types.
// CHECK-LABEL: func.func @host_call
// CHECK:         %[[H:.*]]:2 = "ipu.host_call"(%{{.*}}) {callback = "MyCPUOp", operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<5xf32>) -> (tensor<5xf32>, tensor<f32>)
func.func @host_call(%x: !torch.vtensor<[5],f32>) -> (!torch.vtensor<[5],f32>, !torch.vtensor<[],f32>) {
  %list = torch.prim.ListConstruct %x : (!torch.vtensor<[5],f32>) -> !torch.list<vtensor>
  %id = torch.constant.str "MyCPUOp"
  %spec = torch.constant.str "{\22outputs\22: [[[5], \22float32\22], [[], \22float32\22]]}"
  %0:2 = torch.operator "torch.poptorch.host_call_2"(%list, %id, %spec) : (!torch.list<vtensor>, !torch.str, !torch.str) -> (!torch.vtensor<[5],f32>, !torch.vtensor<[],f32>)
  return %0#0, %0#1 : !torch.vtensor<[5],f32>, !torch.vtensor<[],f32>
}
