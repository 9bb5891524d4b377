// The spec's ParallelPhasedExecution example (Listing 4.13): blocks "0" to "5", phases
// of two stages on IPUs 0, 2 / 1, 3 / 0, 2 (even phases on even IPUs), through the whole
// multi-IPU chain. (A file of its own: its Stage map names other blocks than
// schedule-phases.mlir's.)
// RUN: ipu-opt %s --pass-pipeline='builtin.module(ipu-assign-stages{stages=0=0:0:0,1=1:2:0,2=2:1:1,3=3:3:1,4=4:0:2,5=5:2:2 parallel-phased=true phase-ipus=0=0/2,1=1/3,2=0/2},ipu-outline-stages,ipu-insert-copies,ipu-schedule-phases{liveness=always-live},ipu-schedule{strategy=phased micro-batches=2})' \
// RUN:   | FileCheck %s --check-prefix=LIVE
// RUN: ipu-opt %s --pass-pipeline='builtin.module(ipu-assign-stages{stages=0=0:0:0,1=1:2:0,2=2:1:1,3=3:3:1,4=4:0:2,5=5:2:2 parallel-phased=true phase-ipus=0=0/2,1=1/3,2=0/2},ipu-outline-stages,ipu-insert-copies,ipu-schedule-phases{liveness=off-chip-after-each-phase},ipu-schedule{strategy=phased micro-batches=2})' \
// RUN:   | FileCheck %s --check-prefix=EACH

// Liveness.AlwaysLive: phase 0 on IPUs 0 and 2 hands over to phase 1 on IPUs 1 and 3
// by ipu.copy (2 -> 1), and phase 1 to phase 2 likewise (3 -> 0).
// LIVE-LABEL: func.func @parallel_phased(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32>
// LIVE-SAME:    attributes {ipu.in_flight = array<i64: 1, 1, 1, 1>, ipu.micro_batches = 2 : i64, ipu.schedule = "phased",
// LIVE-SAME:    ipu.tasks = array<i64: 0, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 0, 1, 1, 1, 2, 1, 3, 1, 4, 1, 5, 1>}
// LIVE-NEXT:    %[[X0:.*]] = "ipu.remote_load"(%arg0) {ipu = 0 : i64, ipu.phase = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// LIVE-NEXT:    %[[W0:.*]] = "ipu.remote_load"(%arg1) {ipu = 0 : i64, ipu.phase = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// LIVE-NEXT:    %[[S0:.*]] = call @parallel_phased_stage0(%[[X0]], %[[W0]]) {ipu.phase = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// LIVE-NEXT:    %[[S0_2:.*]] = "ipu.copy"(%[[S0]]) {dst_ipu = 2 : i64, ipu.stage = #ipu.stage<1 : i64, 2 : i64>, src_ipu = 0 : i64}
// LIVE-NEXT:    %[[S1:.*]] = call @parallel_phased_stage1(%[[S0_2]]) {ipu.phase = 0 : i64, ipu.stage = #ipu.stage<1 : i64, 2 : i64>}
// LIVE-NEXT:    %[[S1_1:.*]] = "ipu.copy"(%[[S1]]) {dst_ipu = 1 : i64, ipu.stage = #ipu.stage<2 : i64, 1 : i64>, src_ipu = 2 : i64}
// LIVE-NEXT:    %[[W1:.*]] = "ipu.remote_load"(%arg1) {ipu = 1 : i64, ipu.phase = 1 : i64, ipu.stage = #ipu.stage<2 : i64, 1 : i64>}
// LIVE-NEXT:    %[[S2:.*]] = call @parallel_phased_stage2(%[[S1_1]], %[[W1]]) {ipu.phase = 1 : i64, ipu.stage = #ipu.stage<2 : i64, 1 : i64>}
// LIVE-NEXT:    %[[S2_3:.*]] = "ipu.copy"(%[[S2]]) {dst_ipu = 3 : i64, ipu.stage = #ipu.stage<3 : i64, 3 : i64>, src_ipu = 1 : i64}
// LIVE-NEXT:    %[[S3:.*]] = call @parallel_phased_stage3(%[[S2_3]]) {ipu.phase = 1 : i64, ipu.stage = #ipu.stage<3 : i64, 3 : i64>}
// LIVE-NEXT:    %[[S3_0:.*]] = "ipu.copy"(%[[S3]]) {dst_ipu = 0 : i64, ipu.stage = #ipu.stage<4 : i64, 0 : i64>, src_ipu = 3 : i64}
// LIVE-NEXT:    %[[W2:.*]] = "ipu.remote_load"(%arg1) {ipu = 0 : i64, ipu.phase = 2 : i64, ipu.stage = #ipu.stage<4 : i64, 0 : i64>}
// LIVE-NEXT:    %[[S4:.*]] = call @parallel_phased_stage4(%[[S3_0]], %[[W2]]) {ipu.phase = 2 : i64, ipu.stage = #ipu.stage<4 : i64, 0 : i64>}
// LIVE-NEXT:    %[[S4_2:.*]] = "ipu.copy"(%[[S4]]) {dst_ipu = 2 : i64, ipu.stage = #ipu.stage<5 : i64, 2 : i64>, src_ipu = 0 : i64}
// LIVE-NEXT:    %[[S5:.*]] = call @parallel_phased_stage5(%[[S4_2]]) {ipu.phase = 2 : i64, ipu.stage = #ipu.stage<5 : i64, 2 : i64>}
// LIVE-NEXT:    return %[[S5]]
// LIVE:       func.func private @parallel_phased_stage3({{.*}}) -> tensor<4xf32> attributes {ipu.phase = 1 : i64, ipu.stage = #ipu.stage<3 : i64, 3 : i64>}
// LIVE-NEXT:    "ipu.relu"(%arg0) {ipu.block = "3", ipu.phase = 1 : i64}
// Liveness.OffChipAfterEachPhase: the values handed between phases go through
// streaming memory, stored from the IPU of one phase and loaded onto the other's.
// EACH-LABEL: func.func @parallel_phased
// EACH:         %[[S1:.*]] = call @parallel_phased_stage1
// EACH-NEXT:    "ipu.remote_store"(%[[S1]]) {ipu = 2 : i64, ipu.phase = 0 : i64, ipu.stage = #ipu.stage<1 : i64, 2 : i64>}
// EACH-NEXT:    %[[S1L:.*]] = "ipu.remote_load"(%[[S1]]) {ipu = 1 : i64, ipu.phase = 1 : i64, ipu.stage = #ipu.stage<2 : i64, 1 : i64>}
// EACH-NEXT:    %[[W1:.*]] = "ipu.remote_load"(%arg1) {ipu = 1 : i64, ipu.phase = 1 : i64, ipu.stage = #ipu.stage<2 : i64, 1 : i64>}
// EACH-NEXT:    call @parallel_phased_stage2(%[[S1L]], %[[W1]])
// EACH:         %[[S3:.*]] = call @parallel_phased_stage3
// EACH-NEXT:    "ipu.remote_store"(%[[S3]]) {ipu = 3 : i64, ipu.phase = 1 : i64, ipu.stage = #ipu.stage<3 : i64, 3 : i64>}
// EACH-NEXT:    %[[S3L:.*]] = "ipu.remote_load"(%[[S3]]) {ipu = 0 : i64, ipu.phase = 2 : i64, ipu.stage = #ipu.stage<4 : i64, 0 : i64>}
// EACH-NEXT:    %[[W2:.*]] = "ipu.remote_load"(%arg1) {ipu = 0 : i64, ipu.phase = 2 : i64, ipu.stage = #ipu.stage<4 : i64, 0 : i64>}
// EACH-NEXT:    call @parallel_phased_stage4(%[[S3L]], %[[W2]])
func.func @parallel_phased(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.mul"(%x, %w) {ipu.block = "0"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "ipu.relu"(%0) {ipu.block = "1"} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "ipu.mul"(%1, %w) {ipu.block = "2"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = "ipu.relu"(%2) {ipu.block = "3"} : (tensor<4xf32>) -> tensor<4xf32>
  %4 = "ipu.mul"(%3, %w) {ipu.block = "4"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %5 = "ipu.relu"(%4) {ipu.block = "5"} : (tensor<4xf32>) -> tensor<4xf32>
  return %5 : tensor<4xf32>
}
