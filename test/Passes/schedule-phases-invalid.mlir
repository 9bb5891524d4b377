// RUN: ipu-opt %s --ipu-schedule-phases --split-input-file --verify-diagnostics
// RUN: not ipu-opt %s --ipu-schedule-phases=liveness=on-chip --split-input-file -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=LIVENESS

// A Liveness the pass does not know (second RUN line), reported at the module.
// LIVENESS: schedule-phases-invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: error: liveness must be one of always-live, off-chip-after-fwd, off-chip-after-fwd-no-overlap, off-chip-after-each-phase, got 'on-chip'

// A stage outside every Phase: phased execution cannot place it.
func.func @no_phase(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = call @s0(%x) {ipu.phase = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  // expected-error @+1 {{stage 1 has no ipu.phase; phased execution needs every stage in a Phase}}
  %1 = call @s1(%0) {ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
func.func private @s0(%a: tensor<4xf32>) -> tensor<4xf32> attributes {ipu.phase = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>} {
  %0 = "ipu.relu"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func private @s1(%a: tensor<4xf32>) -> tensor<4xf32> attributes {ipu.stage = #ipu.stage<1 : i64, 1 : i64>} {
  %0 = "ipu.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
