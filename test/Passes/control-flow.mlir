// RUN: ipu-opt %s --split-input-file | ipu-opt --split-input-file | FileCheck %s --check-prefix=ROUND
// RUN: ipu-opt %s --split-input-file \
// RUN:   --pass-pipeline='builtin.module(ipu-assign-stages{stages=A=0:0,B=1:1}, ipu-outline-stages, ipu-verify-placement)' \
// RUN:   | FileCheck %s

// poptorch.for_loop(4, body, [h]) in block B on IPU 1 after block A on IPU 0: the loop is
// an scf.for whose body appears once, carrying the iteration counter and h; the body
// reads the weight %w from outside the loop. Round trip (ROUND): the loop prints and
// parses back as it is. Stages: the loop, its body and its bounds move into stage 1's
// function together, %w becomes an argument of that function, and every op keeps its
// block and IPU.
// ROUND-LABEL: func.func @loop_in_stage1
// ROUND:         scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (tensor<i32>, tensor<4x8xf32>) {
// ROUND-COUNT-1: "ipu.matmul"
// ROUND:           scf.yield
// ROUND-NEXT:    } {ipu.block = "B", ipu.ipu_id = 1 : i64}

// CHECK-LABEL: func.func @loop_in_stage1
// CHECK-SAME:      (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8x8xf32>)
// CHECK-NEXT:    %[[S0:.*]] = call @loop_in_stage1_stage0(%[[X]]) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    %[[S1:.*]] = call @loop_in_stage1_stage1(%[[S0]], %[[W]]) {ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    return %[[S1]]
// CHECK:       func.func private @loop_in_stage1_stage0(%{{.*}}: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    "ipu.relu"
// CHECK-NEXT:    return
// CHECK:       func.func private @loop_in_stage1_stage1(%[[H:.*]]: tensor<4x8xf32>, %[[W1:.*]]: tensor<8x8xf32>) -> tensor<4x8xf32> attributes {ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// CHECK-DAG:     %[[LB:.*]] = arith.constant {ipu.block = "B", ipu.ipu_id = 1 : i64} 0 : index
// CHECK-DAG:     %[[UB:.*]] = arith.constant {ipu.block = "B", ipu.ipu_id = 1 : i64} 4 : index
// CHECK-DAG:     %[[ST:.*]] = arith.constant {ipu.block = "B", ipu.ipu_id = 1 : i64} 1 : index
// CHECK-DAG:     %[[ZERO:.*]] = "ipu.constant"() {value = dense<0> : tensor<i32>}
// CHECK:         %[[LOOP:.*]]:2 = scf.for %{{.*}} = %[[LB]] to %[[UB]] step %[[ST]] iter_args(%[[I:.*]] = %[[ZERO]], %[[A:.*]] = %[[H]])
// CHECK:           "ipu.add"(%[[I]], %{{.*}}) {ipu.block = "B", ipu.ipu_id = 1 : i64}
// CHECK:           %[[MM:.*]] = "ipu.matmul"(%[[A]], %[[W1]]) {ipu.block = "B", ipu.ipu_id = 1 : i64}
// CHECK-NEXT:      %[[T:.*]] = "ipu.tanh"(%[[MM]]) {ipu.block = "B", ipu.ipu_id = 1 : i64}
// CHECK-NEXT:      scf.yield {{.*}}, %[[T]]
// CHECK-NEXT:    } {ipu.block = "B", ipu.ipu_id = 1 : i64}
// CHECK-NEXT:    return %[[LOOP]]#1
// CHECK-NOT:   ipu.stage = #ipu.stage<1 : i64, 1 : i64>, value
func.func @loop_in_stage1(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %h = "ipu.relu"(%x) {ipu.block = "A", ipu.ipu_id = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %lb = arith.constant {ipu.block = "B", ipu.ipu_id = 1 : i64} 0 : index
  %ub = arith.constant {ipu.block = "B", ipu.ipu_id = 1 : i64} 4 : index
  %step = arith.constant {ipu.block = "B", ipu.ipu_id = 1 : i64} 1 : index
  %zero = "ipu.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
  %one = "ipu.constant"() {value = dense<1> : tensor<i32>} : () -> tensor<i32>
  %r:2 = scf.for %iv = %lb to %ub step %step iter_args(%i = %zero, %a = %h) -> (tensor<i32>, tensor<4x8xf32>) {
    %i1 = "ipu.add"(%i, %one) {ipu.block = "B", ipu.ipu_id = 1 : i64} : (tensor<i32>, tensor<i32>) -> tensor<i32>
    %mm = "ipu.matmul"(%a, %w) {ipu.block = "B", ipu.ipu_id = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %t = "ipu.tanh"(%mm) {ipu.block = "B", ipu.ipu_id = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    scf.yield {ipu.block = "B", ipu.ipu_id = 1 : i64} %i1, %t : tensor<i32>, tensor<4x8xf32>
  } {ipu.block = "B", ipu.ipu_id = 1 : i64}
  return %r#1 : tensor<4x8xf32>
}

// -----

// poptorch.cond in block B: an scf.if on the one element of the condition tensor, each
// branch yielding its result; it moves into stage 1 with both branches.
// ROUND-LABEL: func.func @cond_in_stage1
// ROUND:         %[[E:.*]] = tensor.extract %{{.*}}[] {{.*}}: tensor<i1>
// ROUND-NEXT:    scf.if %[[E]] -> (tensor<4xf32>) {
// ROUND-NEXT:      "ipu.mul"
// ROUND-NEXT:      scf.yield
// ROUND-NEXT:    } else {
// ROUND-NEXT:      "ipu.sub"
// ROUND-NEXT:      scf.yield

// CHECK-LABEL: func.func @cond_in_stage1
// CHECK-SAME:      (%[[C:.*]]: tensor<i1>, %[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT:    %[[S0:.*]] = call @cond_in_stage1_stage0(%[[X]])
// CHECK-NEXT:    %[[S1:.*]] = call @cond_in_stage1_stage1(%[[C]], %[[S0]], %[[X]]) {ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// CHECK:       func.func private @cond_in_stage1_stage1(%[[C1:.*]]: tensor<i1>, %[[A:.*]]: tensor<4xf32>, %[[X1:.*]]: tensor<4xf32>)
// CHECK-NEXT:    %[[E:.*]] = tensor.extract %[[C1]][] {ipu.block = "B", ipu.ipu_id = 1 : i64} : tensor<i1>
// CHECK-NEXT:    %[[R:.*]] = scf.if %[[E]] -> (tensor<4xf32>) {
// CHECK-NEXT:      %[[M:.*]] = "ipu.mul"(%[[A]], %[[X1]]) {ipu.block = "B", ipu.ipu_id = 1 : i64}
// CHECK-NEXT:      scf.yield {{.*}}%[[M]]
// CHECK-NEXT:    } else {
// CHECK-NEXT:      %[[D:.*]] = "ipu.sub"(%[[A]], %[[X1]]) {ipu.block = "B", ipu.ipu_id = 1 : i64}
// CHECK-NEXT:      scf.yield {{.*}}%[[D]]
// CHECK-NEXT:    } {ipu.block = "B", ipu.ipu_id = 1 : i64}
// CHECK-NEXT:    return %[[R]]
func.func @cond_in_stage1(%c: tensor<i1>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %h = "ipu.relu"(%x) {ipu.block = "A", ipu.ipu_id = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %e = tensor.extract %c[] {ipu.block = "B", ipu.ipu_id = 1 : i64} : tensor<i1>
  %r = scf.if %e -> (tensor<4xf32>) {
    %m = "ipu.mul"(%h, %x) {ipu.block = "B", ipu.ipu_id = 1 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    scf.yield {ipu.block = "B", ipu.ipu_id = 1 : i64} %m : tensor<4xf32>
  } else {
    %d = "ipu.sub"(%h, %x) {ipu.block = "B", ipu.ipu_id = 1 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    scf.yield {ipu.block = "B", ipu.ipu_id = 1 : i64} %d : tensor<4xf32>
  } {ipu.block = "B", ipu.ipu_id = 1 : i64}
  return %r : tensor<4xf32>
}
