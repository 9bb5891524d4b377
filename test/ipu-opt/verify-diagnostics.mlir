// --verify-diagnostics fails, naming each mismatch, when expectations are not met.

// RUN: not ipu-opt %s --split-input-file --verify-diagnostics 2>&1 >/dev/null | FileCheck %s
// CHECK: verify-diagnostics.mlir:[[# @LINE + 10]]:8: error: unexpected error: 'ipu.copy' op copies from IPU 0 to itself; remove the copy
// CHECK-NEXT: verify-diagnostics.mlir:[[# @LINE + 8]]:6: error: expected error "wrong message" was not produced
// CHECK-NEXT: verify-diagnostics.mlir:[[# @LINE + 15]]:6: error: expected error "never emitted" was not produced
// CHECK-NOT: {{.+}}

// RUN: not ipu-opt %s --split-input-file 2>&1 >/dev/null | FileCheck %s --check-prefix=PLAIN
// PLAIN: verify-diagnostics.mlir:[[# @LINE + 4]]:8: error: 'ipu.copy' op copies from IPU 0 to itself; remove the copy

func.func @wrong_message(%a: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{wrong message}}
  %0 = "ipu.copy"(%a) {src_ipu = 0 : i64, dst_ipu = 0 : i64} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @nothing_wrong(%a: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{never emitted}}
  %0 = "ipu.copy"(%a) {src_ipu = 0 : i64, dst_ipu = 1 : i64} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
