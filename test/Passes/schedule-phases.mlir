// The spec's SerialPhasedExecution example (Listing 4.12): three phases of two stages,
// blocks A, A2 / B, B2 / C, C2 on IPUs 0 and 1, through the whole multi-IPU chain, once
// per poptorch.Liveness.
// RUN: ipu-opt %s --split-input-file --pass-pipeline='builtin.module(ipu-assign-stages{stages=A=0:0:0,A2=1:1:0,B=2:0:1,B2=3:1:1,C=4:0:2,C2=5:1:2},ipu-outline-stages,ipu-insert-copies,ipu-schedule-phases{liveness=always-live},ipu-schedule{strategy=phased micro-batches=2})' \
// RUN:   | FileCheck %s --check-prefix=LIVE
// RUN: ipu-opt %s --split-input-file --pass-pipeline='builtin.module(ipu-assign-stages{stages=A=0:0:0,A2=1:1:0,B=2:0:1,B2=3:1:1,C=4:0:2,C2=5:1:2},ipu-outline-stages,ipu-insert-copies,ipu-schedule-phases{liveness=off-chip-after-each-phase},ipu-schedule{strategy=phased micro-batches=2})' \
// RUN:   | FileCheck %s --check-prefix=EACH
// RUN: ipu-opt %s --split-input-file --pass-pipeline='builtin.module(ipu-assign-stages{stages=A=0:0:0,A2=1:1:0,B=2:0:1,B2=3:1:1,C=4:0:2,C2=5:1:2},ipu-outline-stages,ipu-insert-copies,ipu-schedule-phases{liveness=off-chip-after-fwd},ipu-schedule{strategy=phased micro-batches=2})' \
// RUN:   | FileCheck %s --check-prefix=FWD
// RUN: ipu-opt %s --split-input-file --pass-pipeline='builtin.module(ipu-assign-stages{stages=A=0:0:0,A2=1:1:0,B=2:0:1,B2=3:1:1,C=4:0:2,C2=5:1:2},ipu-outline-stages,ipu-insert-copies,ipu-schedule-phases{liveness=off-chip-after-fwd-no-overlap},ipu-schedule{strategy=phased micro-batches=2})' \
// RUN:   | FileCheck %s --check-prefix=NOOV
// useSeparateBackwardPhase: no fused stage, and the backward phases start after the last
// forward one.
// RUN: ipu-opt %s --split-input-file --pass-pipeline='builtin.module(ipu-assign-stages{stages=A=0:0:0,A2=1:1:0,B=2:0:1,B2=3:1:1,C=4:0:2,C2=5:1:2},ipu-outline-stages{separate-backward=true},ipu-insert-copies,ipu-schedule-phases{liveness=off-chip-after-fwd separate-backward-phase=true},ipu-schedule{strategy=phased micro-batches=2})' \
// RUN:   | FileCheck %s --check-prefix=SEP

// Inference. Weights and inputs (function arguments) live in streaming memory: each is
// loaded onto the IPU of every phase using it (%w three times). Within a phase, values
// cross IPUs by ipu.copy.
// Liveness.AlwaysLive: activations crossing phases (A2 -> B, B2 -> C) stay on chip and
// move by ipu.copy.
// LIVE-LABEL: func.func @serial_phased(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32>
// LIVE-SAME:    attributes {ipu.in_flight = array<i64: 1, 1>, ipu.micro_batches = 2 : i64, ipu.schedule = "phased",
// LIVE-SAME:    ipu.tasks = array<i64: 0, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 0, 1, 1, 1, 2, 1, 3, 1, 4, 1, 5, 1>}
// LIVE-NEXT:    %[[X0:.*]] = "ipu.remote_load"(%arg0) {ipu = 0 : i64, ipu.phase = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// LIVE-NEXT:    %[[W0:.*]] = "ipu.remote_load"(%arg1) {ipu = 0 : i64, ipu.phase = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// LIVE-NEXT:    %[[A:.*]] = call @serial_phased_stage0(%[[X0]], %[[W0]]) {ipu.phase = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// LIVE-NEXT:    %[[A_1:.*]] = "ipu.copy"(%[[A]]) {dst_ipu = 1 : i64, ipu.stage = #ipu.stage<1 : i64, 1 : i64>, src_ipu = 0 : i64}
// LIVE-NEXT:    %[[A2:.*]] = call @serial_phased_stage1(%[[A_1]]) {ipu.phase = 0 : i64, ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// LIVE-NEXT:    %[[A2_0:.*]] = "ipu.copy"(%[[A2]]) {dst_ipu = 0 : i64, ipu.stage = #ipu.stage<2 : i64, 0 : i64>, src_ipu = 1 : i64}
// LIVE-NEXT:    %[[W1:.*]] = "ipu.remote_load"(%arg1) {ipu = 0 : i64, ipu.phase = 1 : i64, ipu.stage = #ipu.stage<2 : i64, 0 : i64>}
// LIVE-NEXT:    %[[B:.*]] = call @serial_phased_stage2(%[[A2_0]], %[[W1]]) {ipu.phase = 1 : i64, ipu.stage = #ipu.stage<2 : i64, 0 : i64>}
// LIVE-NEXT:    %[[B_1:.*]] = "ipu.copy"(%[[B]]) {dst_ipu = 1 : i64, ipu.stage = #ipu.stage<3 : i64, 1 : i64>, src_ipu = 0 : i64}
// LIVE-NEXT:    %[[B2:.*]] = call @serial_phased_stage3(%[[B_1]]) {ipu.phase = 1 : i64, ipu.stage = #ipu.stage<3 : i64, 1 : i64>}
// LIVE-NEXT:    %[[B2_0:.*]] = "ipu.copy"(%[[B2]]) {dst_ipu = 0 : i64, ipu.stage = #ipu.stage<4 : i64, 0 : i64>, src_ipu = 1 : i64}
// LIVE-NEXT:    %[[W2:.*]] = "ipu.remote_load"(%arg1) {ipu = 0 : i64, ipu.phase = 2 : i64, ipu.stage = #ipu.stage<4 : i64, 0 : i64>}
// LIVE-NEXT:    %[[C:.*]] = call @serial_phased_stage4(%[[B2_0]], %[[W2]]) {ipu.phase = 2 : i64, ipu.stage = #ipu.stage<4 : i64, 0 : i64>}
// LIVE-NEXT:    %[[C_1:.*]] = "ipu.copy"(%[[C]]) {dst_ipu = 1 : i64, ipu.stage = #ipu.stage<5 : i64, 1 : i64>, src_ipu = 0 : i64}
// LIVE-NEXT:    %[[C2:.*]] = call @serial_phased_stage5(%[[C_1]]) {ipu.phase = 2 : i64, ipu.stage = #ipu.stage<5 : i64, 1 : i64>}
// LIVE-NEXT:    return %[[C2]]
// Liveness.OffChipAfterEachPhase: every activation crossing phases is stored after its
// phase and loaded in the next; the copies it replaces are gone. Copies within a phase stay.
// EACH-LABEL: func.func @serial_phased
// EACH-NEXT:    %[[X0:.*]] = "ipu.remote_load"(%arg0) {ipu = 0 : i64, ipu.phase = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// EACH-NEXT:    %[[W0:.*]] = "ipu.remote_load"(%arg1) {ipu = 0 : i64, ipu.phase = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// EACH-NEXT:    %[[A:.*]] = call @serial_phased_stage0(%[[X0]], %[[W0]]) {ipu.phase = 0 : i64,
// EACH-NEXT:    %[[A_1:.*]] = "ipu.copy"(%[[A]]) {dst_ipu = 1 : i64, ipu.stage = #ipu.stage<1 : i64, 1 : i64>, src_ipu = 0 : i64}
// EACH-NEXT:    %[[A2:.*]] = call @serial_phased_stage1(%[[A_1]]) {ipu.phase = 0 : i64,
// EACH-NEXT:    "ipu.remote_store"(%[[A2]]) {ipu = 1 : i64, ipu.phase = 0 : i64, ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>) -> ()
// EACH-NEXT:    %[[A2_0:.*]] = "ipu.remote_load"(%[[A2]]) {ipu = 0 : i64, ipu.phase = 1 : i64, ipu.stage = #ipu.stage<2 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
// EACH-NEXT:    %[[W1:.*]] = "ipu.remote_load"(%arg1) {ipu = 0 : i64, ipu.phase = 1 : i64, ipu.stage = #ipu.stage<2 : i64, 0 : i64>}
// EACH-NEXT:    %[[B:.*]] = call @serial_phased_stage2(%[[A2_0]], %[[W1]]) {ipu.phase = 1 : i64,
// EACH-NEXT:    %[[B_1:.*]] = "ipu.copy"(%[[B]]) {dst_ipu = 1 : i64, ipu.stage = #ipu.stage<3 : i64, 1 : i64>, src_ipu = 0 : i64}
// EACH-NEXT:    %[[B2:.*]] = call @serial_phased_stage3(%[[B_1]]) {ipu.phase = 1 : i64,
// EACH-NEXT:    "ipu.remote_store"(%[[B2]]) {ipu = 1 : i64, ipu.phase = 1 : i64, ipu.stage = #ipu.stage<3 : i64, 1 : i64>}
// EACH-NEXT:    %[[B2_0:.*]] = "ipu.remote_load"(%[[B2]]) {ipu = 0 : i64, ipu.phase = 2 : i64, ipu.stage = #ipu.stage<4 : i64, 0 : i64>}
// EACH-NEXT:    %[[W2:.*]] = "ipu.remote_load"(%arg1) {ipu = 0 : i64, ipu.phase = 2 : i64, ipu.stage = #ipu.stage<4 : i64, 0 : i64>}
// EACH-NEXT:    %[[C:.*]] = call @serial_phased_stage4(%[[B2_0]], %[[W2]]) {ipu.phase = 2 : i64,
// EACH-NEXT:    %[[C_1:.*]] = "ipu.copy"(%[[C]]) {dst_ipu = 1 : i64, ipu.stage = #ipu.stage<5 : i64, 1 : i64>, src_ipu = 0 : i64}
// EACH-NEXT:    %[[C2:.*]] = call @serial_phased_stage5(%[[C_1]]) {ipu.phase = 2 : i64,
// EACH-NEXT:    return %[[C2]]
// Liveness.OffChipAfterFwd: inference has no backward phase, so activations stay on
// chip as with AlwaysLive.
// FWD-LABEL: func.func @serial_phased
// FWD-NOT:     ipu.remote_store
// FWD:         %[[A2:.*]] = call @serial_phased_stage1
// FWD-NEXT:    %[[A2_0:.*]] = "ipu.copy"(%[[A2]]) {dst_ipu = 0 : i64, ipu.stage = #ipu.stage<2 : i64, 0 : i64>, src_ipu = 1 : i64}
// FWD-NOT:     ipu.remote_store
// FWD:         %[[B2:.*]] = call @serial_phased_stage3
// FWD-NEXT:    %[[B2_0:.*]] = "ipu.copy"(%[[B2]]) {dst_ipu = 0 : i64, ipu.stage = #ipu.stage<4 : i64, 0 : i64>, src_ipu = 1 : i64}
// FWD-NOT:     ipu.remote_store
// FWD:         return
// Liveness.OffChipAfterFwdNoOverlap: the same, but the streaming-memory transfers may
// not overlap compute.
// NOOV-LABEL: func.func @serial_phased
// NOOV-NEXT:    "ipu.remote_load"(%arg0) {ipu = 0 : i64, ipu.no_overlap, ipu.phase = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// NOOV-NEXT:    "ipu.remote_load"(%arg1) {ipu = 0 : i64, ipu.no_overlap, ipu.phase = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// NOOV-NOT:     ipu.remote_store
// NOOV:         return
func.func @serial_phased(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.mul"(%x, %w) {ipu.block = "A"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "ipu.relu"(%0) {ipu.block = "A2"} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "ipu.mul"(%1, %w) {ipu.block = "B"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = "ipu.relu"(%2) {ipu.block = "B2"} : (tensor<4xf32>) -> tensor<4xf32>
  %4 = "ipu.mul"(%3, %w) {ipu.block = "C"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %5 = "ipu.relu"(%4) {ipu.block = "C2"} : (tensor<4xf32>) -> tensor<4xf32>
  return %5 : tensor<4xf32>
}

// -----

// The same model in training: each backward op (ipu.backward) is in the block of the
// forward op it differentiates. Forward phases 0, 1, 2; the backward phases mirror them,
// 4, 3, 2, the backward of C2 sharing the fused stage 5 with its forward and the
// backward of C running in phase 2 too. The stage functions carry the backward phase.
// LIVE-LABEL: func.func @serial_training
// LIVE-SAME:    ipu.tasks = array<i64: 0, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8, 0, 9, 0, 10, 0, 0, 1, 1, 1, 2, 1, 3, 1, 4, 1, 5, 1, 6, 1, 7, 1, 8, 1, 9, 1, 10, 1>
// LIVE-NOT:     ipu.remote_store
// LIVE:         %[[S2:.*]] = call @serial_training_stage2({{.*}}) {ipu.kind = "forward", ipu.phase = 1 : i64, ipu.stage = #ipu.stage<2 : i64, 0 : i64>}
// LIVE-NEXT:    %[[S2_1:.*]] = "ipu.copy"(%[[S2]]) {dst_ipu = 1 : i64, ipu.stage = #ipu.stage<3 : i64, 1 : i64>, src_ipu = 0 : i64}
// LIVE:         call @serial_training_stage5({{.*}}) {ipu.kind = "forward_backward", ipu.phase = 2 : i64, ipu.stage = #ipu.stage<5 : i64, 1 : i64>}
// LIVE:         call @serial_training_stage6({{.*}}) {ipu.kind = "backward", ipu.phase = 2 : i64, ipu.stage = #ipu.stage<6 : i64, 0 : i64>}
// LIVE:         call @serial_training_stage7({{.*}}, %[[S2_1]]) {ipu.kind = "backward", ipu.phase = 3 : i64, ipu.stage = #ipu.stage<7 : i64, 1 : i64>}
// LIVE:         call @serial_training_stage8({{.*}}) {ipu.kind = "backward", ipu.phase = 3 : i64, ipu.stage = #ipu.stage<8 : i64, 0 : i64>}
// LIVE:         call @serial_training_stage9({{.*}}) {ipu.kind = "backward", ipu.phase = 4 : i64, ipu.stage = #ipu.stage<9 : i64, 1 : i64>}
// LIVE:         call @serial_training_stage10({{.*}}) {ipu.kind = "backward", ipu.phase = 4 : i64, ipu.stage = #ipu.stage<10 : i64, 0 : i64>}
// LIVE-NOT:     ipu.remote_store
// LIVE:         return
// LIVE:       func.func private @serial_training_stage7({{.*}}) -> tensor<4xf32> attributes {ipu.kind = "backward", ipu.phase = 3 : i64, ipu.stage = #ipu.stage<7 : i64, 1 : i64>}
// LIVE:       func.func private @serial_training_stage10({{.*}}) -> tensor<4xf32> attributes {ipu.kind = "backward", ipu.phase = 4 : i64, ipu.stage = #ipu.stage<10 : i64, 0 : i64>}
// Liveness.OffChipAfterFwd: the forward activations that a later backward phase reads
// are stored after their phase and loaded there; forward-to-forward values (A2 -> B)
// and backward-to-backward ones (stage 6 -> stage 7) stay on chip.
// FWD-LABEL: func.func @serial_training
// FWD-NEXT:    %[[X0:.*]] = "ipu.remote_load"(%arg0) {ipu = 0 : i64, ipu.phase = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// FWD-NEXT:    %[[W0:.*]] = "ipu.remote_load"(%arg1) {ipu = 0 : i64, ipu.phase = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// FWD-NEXT:    %[[A:.*]] = call @serial_training_stage0(%[[X0]], %[[W0]]) {ipu.kind = "forward", ipu.phase = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// FWD-NEXT:    "ipu.remote_store"(%[[A]]) {ipu = 0 : i64, ipu.phase = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// FWD-NEXT:    %[[A_1:.*]] = "ipu.copy"(%[[A]]) {dst_ipu = 1 : i64, ipu.stage = #ipu.stage<1 : i64, 1 : i64>, src_ipu = 0 : i64}
// FWD-NEXT:    %[[A2:.*]] = call @serial_training_stage1(%[[A_1]]) {ipu.kind = "forward", ipu.phase = 0 : i64, ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// FWD-NEXT:    "ipu.remote_store"(%[[A2]]) {ipu = 1 : i64, ipu.phase = 0 : i64, ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// FWD-NEXT:    %[[A2_0:.*]] = "ipu.copy"(%[[A2]]) {dst_ipu = 0 : i64, ipu.stage = #ipu.stage<2 : i64, 0 : i64>, src_ipu = 1 : i64}
// FWD-NEXT:    %[[W1:.*]] = "ipu.remote_load"(%arg1) {ipu = 0 : i64, ipu.phase = 1 : i64, ipu.stage = #ipu.stage<2 : i64, 0 : i64>}
// FWD-NEXT:    %[[B:.*]] = call @serial_training_stage2(%[[A2_0]], %[[W1]]) {ipu.kind = "forward", ipu.phase = 1 : i64, ipu.stage = #ipu.stage<2 : i64, 0 : i64>}
// FWD-NEXT:    "ipu.remote_store"(%[[B]]) {ipu = 0 : i64, ipu.phase = 1 : i64, ipu.stage = #ipu.stage<2 : i64, 0 : i64>}
// FWD-NEXT:    %[[B_1:.*]] = "ipu.copy"(%[[B]]) {dst_ipu = 1 : i64, ipu.stage = #ipu.stage<3 : i64, 1 : i64>, src_ipu = 0 : i64}
// FWD-NEXT:    %[[B2:.*]] = call @serial_training_stage3(%[[B_1]]) {ipu.kind = "forward", ipu.phase = 1 : i64, ipu.stage = #ipu.stage<3 : i64, 1 : i64>}
// FWD-NEXT:    "ipu.remote_store"(%[[B2]]) {ipu = 1 : i64, ipu.phase = 1 : i64, ipu.stage = #ipu.stage<3 : i64, 1 : i64>}
// FWD-NEXT:    %[[B2_0:.*]] = "ipu.copy"(%[[B2]]) {dst_ipu = 0 : i64, ipu.stage = #ipu.stage<4 : i64, 0 : i64>, src_ipu = 1 : i64}
// FWD-NEXT:    %[[W2:.*]] = "ipu.remote_load"(%arg1) {ipu = 0 : i64, ipu.phase = 2 : i64, ipu.stage = #ipu.stage<4 : i64, 0 : i64>}
// FWD-NEXT:    %[[C:.*]] = call @serial_training_stage4(%[[B2_0]], %[[W2]]) {ipu.kind = "forward", ipu.phase = 2 : i64, ipu.stage = #ipu.stage<4 : i64, 0 : i64>}
// FWD-NEXT:    %[[C_1:.*]] = "ipu.copy"(%[[C]]) {dst_ipu = 1 : i64, ipu.stage = #ipu.stage<5 : i64, 1 : i64>, src_ipu = 0 : i64}
// FWD-NEXT:    %[[C2:.*]]:2 = call @serial_training_stage5(%[[C_1]]) {ipu.kind = "forward_backward", ipu.phase = 2 : i64, ipu.stage = #ipu.stage<5 : i64, 1 : i64>}
// FWD-NEXT:    %[[G4:.*]] = "ipu.copy"(%[[C2]]#1) {dst_ipu = 0 : i64, ipu.stage = #ipu.stage<6 : i64, 0 : i64>, src_ipu = 1 : i64}
// FWD-NEXT:    %[[B2L:.*]] = "ipu.remote_load"(%[[B2]]) {ipu = 0 : i64, ipu.phase = 2 : i64, ipu.stage = #ipu.stage<6 : i64, 0 : i64>}
// FWD-NEXT:    %[[G3:.*]] = call @serial_training_stage6(%[[G4]], %[[B2L]]) {ipu.kind = "backward", ipu.phase = 2 : i64, ipu.stage = #ipu.stage<6 : i64, 0 : i64>}
// FWD-NEXT:    %[[G3_1:.*]] = "ipu.copy"(%[[G3]]) {dst_ipu = 1 : i64, ipu.stage = #ipu.stage<7 : i64, 1 : i64>, src_ipu = 0 : i64}
// FWD-NEXT:    %[[BL:.*]] = "ipu.remote_load"(%[[B]]) {ipu = 1 : i64, ipu.phase = 3 : i64, ipu.stage = #ipu.stage<7 : i64, 1 : i64>}
// FWD-NEXT:    %[[G2:.*]] = call @serial_training_stage7(%[[G3_1]], %[[BL]]) {ipu.kind = "backward", ipu.phase = 3 : i64, ipu.stage = #ipu.stage<7 : i64, 1 : i64>}
// FWD-NEXT:    %[[G2_0:.*]] = "ipu.copy"(%[[G2]]) {dst_ipu = 0 : i64, ipu.stage = #ipu.stage<8 : i64, 0 : i64>, src_ipu = 1 : i64}
// FWD-NEXT:    %[[A2L:.*]] = "ipu.remote_load"(%[[A2]]) {ipu = 0 : i64, ipu.phase = 3 : i64, ipu.stage = #ipu.stage<8 : i64, 0 : i64>}
// FWD-NEXT:    %[[G1:.*]] = call @serial_training_stage8(%[[G2_0]], %[[A2L]]) {ipu.kind = "backward", ipu.phase = 3 : i64, ipu.stage = #ipu.stage<8 : i64, 0 : i64>}
// FWD-NEXT:    %[[G1_1:.*]] = "ipu.copy"(%[[G1]]) {dst_ipu = 1 : i64, ipu.stage = #ipu.stage<9 : i64, 1 : i64>, src_ipu = 0 : i64}
// FWD-NEXT:    %[[AL:.*]] = "ipu.remote_load"(%[[A]]) {ipu = 1 : i64, ipu.phase = 4 : i64, ipu.stage = #ipu.stage<9 : i64, 1 : i64>}
// FWD-NEXT:    %[[G0:.*]] = call @serial_training_stage9(%[[G1_1]], %[[AL]]) {ipu.kind = "backward", ipu.phase = 4 : i64, ipu.stage = #ipu.stage<9 : i64, 1 : i64>}
// FWD-NEXT:    %[[G0_0:.*]] = "ipu.copy"(%[[G0]]) {dst_ipu = 0 : i64, ipu.stage = #ipu.stage<10 : i64, 0 : i64>, src_ipu = 1 : i64}
// FWD-NEXT:    %[[X4:.*]] = "ipu.remote_load"(%arg0) {ipu = 0 : i64, ipu.phase = 4 : i64, ipu.stage = #ipu.stage<10 : i64, 0 : i64>}
// FWD-NEXT:    %[[GW:.*]] = call @serial_training_stage10(%[[G0_0]], %[[X4]]) {ipu.kind = "backward", ipu.phase = 4 : i64, ipu.stage = #ipu.stage<10 : i64, 0 : i64>}
// FWD-NEXT:    return %[[C2]]#0, %[[GW]]
// Liveness.OffChipAfterFwdNoOverlap: the same transfers, tagged ipu.no_overlap.
// NOOV-LABEL: func.func @serial_training
// NOOV:         %[[A:.*]] = call @serial_training_stage0
// NOOV-NEXT:    "ipu.remote_store"(%[[A]]) {ipu = 0 : i64, ipu.no_overlap, ipu.phase = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// NOOV:         %[[B2:.*]] = call @serial_training_stage3
// NOOV-NEXT:    "ipu.remote_store"(%[[B2]]) {ipu = 1 : i64, ipu.no_overlap, ipu.phase = 1 : i64, ipu.stage = #ipu.stage<3 : i64, 1 : i64>}
// NOOV-NEXT:    "ipu.copy"(%[[B2]]) {dst_ipu = 0 : i64, ipu.stage = #ipu.stage<4 : i64, 0 : i64>, src_ipu = 1 : i64}
// NOOV:         "ipu.remote_load"(%[[B2]]) {ipu = 0 : i64, ipu.no_overlap, ipu.phase = 2 : i64, ipu.stage = #ipu.stage<6 : i64, 0 : i64>}
// NOOV-NEXT:    call @serial_training_stage6
// NOOV:         "ipu.remote_load"(%[[A]]) {ipu = 1 : i64, ipu.no_overlap, ipu.phase = 4 : i64, ipu.stage = #ipu.stage<9 : i64, 1 : i64>}
// NOOV-NEXT:    call @serial_training_stage9
// Liveness.OffChipAfterEachPhase also stores backward values crossing phases (stage 6
// in phase 2 -> stage 7 in phase 3), and loads B2's value once for the two stages of
// phase 2 on IPU 0 (the forward of C and the backward of C).
// EACH-LABEL: func.func @serial_training
// EACH:         %[[B2:.*]] = call @serial_training_stage3
// EACH-NEXT:    "ipu.remote_store"(%[[B2]]) {ipu = 1 : i64, ipu.phase = 1 : i64, ipu.stage = #ipu.stage<3 : i64, 1 : i64>}
// EACH-NEXT:    %[[B2L:.*]] = "ipu.remote_load"(%[[B2]]) {ipu = 0 : i64, ipu.phase = 2 : i64, ipu.stage = #ipu.stage<4 : i64, 0 : i64>}
// EACH-NEXT:    %[[W2:.*]] = "ipu.remote_load"(%arg1) {ipu = 0 : i64, ipu.phase = 2 : i64, ipu.stage = #ipu.stage<4 : i64, 0 : i64>}
// EACH-NEXT:    call @serial_training_stage4(%[[B2L]], %[[W2]])
// EACH:         %[[G3:.*]] = call @serial_training_stage6(%{{.*}}, %[[B2L]])
// EACH-NEXT:    "ipu.remote_store"(%[[G3]]) {ipu = 0 : i64, ipu.phase = 2 : i64, ipu.stage = #ipu.stage<6 : i64, 0 : i64>}
// EACH-NEXT:    %[[G3L:.*]] = "ipu.remote_load"(%[[G3]]) {ipu = 1 : i64, ipu.phase = 3 : i64, ipu.stage = #ipu.stage<7 : i64, 1 : i64>}
// EACH-NEXT:    %[[BL:.*]] = "ipu.remote_load"(%{{.*}}) {ipu = 1 : i64, ipu.phase = 3 : i64, ipu.stage = #ipu.stage<7 : i64, 1 : i64>}
// EACH-NEXT:    call @serial_training_stage7(%[[G3L]], %[[BL]])
// useSeparateBackwardPhase: backward phases 6, 5, 4 after forward phases 0, 1, 2;
// stage 5 is forward only and C2's output is stored for its backward in phase 4.
// SEP-LABEL: func.func @serial_training
// SEP:         %[[C2:.*]] = call @serial_training_stage5({{.*}}) {ipu.kind = "forward", ipu.phase = 2 : i64, ipu.stage = #ipu.stage<5 : i64, 1 : i64>}
// SEP-NEXT:    "ipu.remote_store"(%[[C2]]) {ipu = 1 : i64, ipu.phase = 2 : i64, ipu.stage = #ipu.stage<5 : i64, 1 : i64>}
// SEP-NEXT:    %[[C2L:.*]] = "ipu.remote_load"(%[[C2]]) {ipu = 1 : i64, ipu.phase = 4 : i64, ipu.stage = #ipu.stage<6 : i64, 1 : i64>}
// SEP-NEXT:    %[[CL:.*]] = "ipu.remote_load"(%{{.*}}) {ipu = 1 : i64, ipu.phase = 4 : i64, ipu.stage = #ipu.stage<6 : i64, 1 : i64>}
// SEP-NEXT:    call @serial_training_stage6(%[[C2L]], %[[CL]]) {ipu.kind = "backward", ipu.phase = 4 : i64, ipu.stage = #ipu.stage<6 : i64, 1 : i64>}
// SEP:         call @serial_training_stage7({{.*}}) {ipu.kind = "backward", ipu.phase = 4 : i64, ipu.stage = #ipu.stage<7 : i64, 0 : i64>}
// SEP:         call @serial_training_stage8({{.*}}) {ipu.kind = "backward", ipu.phase = 5 : i64, ipu.stage = #ipu.stage<8 : i64, 1 : i64>}
// SEP:         call @serial_training_stage9({{.*}}) {ipu.kind = "backward", ipu.phase = 5 : i64, ipu.stage = #ipu.stage<9 : i64, 0 : i64>}
// SEP:         call @serial_training_stage10({{.*}}) {ipu.kind = "backward", ipu.phase = 6 : i64, ipu.stage = #ipu.stage<10 : i64, 1 : i64>}
// SEP:         call @serial_training_stage11({{.*}}) {ipu.kind = "backward", ipu.phase = 6 : i64, ipu.stage = #ipu.stage<11 : i64, 0 : i64>}
// SEP-NEXT:    return
func.func @serial_training(%x: tensor<4xf32>, %w: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "ipu.mul"(%x, %w) {ipu.block = "A"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "ipu.relu"(%0) {ipu.block = "A2"} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "ipu.mul"(%1, %w) {ipu.block = "B"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = "ipu.relu"(%2) {ipu.block = "B2"} : (tensor<4xf32>) -> tensor<4xf32>
  %4 = "ipu.mul"(%3, %w) {ipu.block = "C"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %5 = "ipu.relu"(%4) {ipu.block = "C2"} : (tensor<4xf32>) -> tensor<4xf32>
  %g4 = "ipu.mul"(%5, %4) {ipu.backward = true, ipu.block = "C2"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %g3 = "ipu.mul"(%g4, %3) {ipu.backward = true, ipu.block = "C"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %g2 = "ipu.mul"(%g3, %2) {ipu.backward = true, ipu.block = "B2"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %g1 = "ipu.mul"(%g2, %1) {ipu.backward = true, ipu.block = "B"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %g0 = "ipu.mul"(%g1, %0) {ipu.backward = true, ipu.block = "A2"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %gw = "ipu.mul"(%g0, %x) {ipu.backward = true, ipu.block = "A"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %5, %gw : tensor<4xf32>, tensor<4xf32>
}

// -----

// The fused stage 5 (C2's forward and backward, phase 2) computes an activation and a
// gradient; the backward of A reads the gradient in phase 4. Liveness.OffChipAfterFwd
// moves only activations off chip: the gradient crosses by ipu.copy.
// FWD-LABEL: func.func @fused_gradient
// FWD:         %[[F:.*]]:2 = call @fused_gradient_stage5({{.*}}) {ipu.kind = "forward_backward", ipu.phase = 2 : i64, ipu.stage = #ipu.stage<5 : i64, 1 : i64>}
// FWD-NEXT:    %[[G:.*]] = "ipu.copy"(%[[F]]#1) {dst_ipu = 0 : i64, ipu.stage = #ipu.stage<10 : i64, 0 : i64>, src_ipu = 1 : i64}
// FWD-NEXT:    %[[X4:.*]] = "ipu.remote_load"(%arg0) {ipu = 0 : i64, ipu.phase = 4 : i64, ipu.stage = #ipu.stage<10 : i64, 0 : i64>}
// FWD-NEXT:    call @fused_gradient_stage10(%[[G]], %[[X4]]) {ipu.kind = "backward", ipu.phase = 4 : i64, ipu.stage = #ipu.stage<10 : i64, 0 : i64>}
// Liveness.OffChipAfterEachPhase stores it like any value crossing phases.
// EACH-LABEL: func.func @fused_gradient
// EACH:         %[[F:.*]]:2 = call @fused_gradient_stage5
// EACH-NEXT:    "ipu.remote_store"(%[[F]]#1) {ipu = 1 : i64, ipu.phase = 2 : i64, ipu.stage = #ipu.stage<5 : i64, 1 : i64>}
// EACH-NEXT:    %[[G:.*]] = "ipu.remote_load"(%[[F]]#1) {ipu = 0 : i64, ipu.phase = 4 : i64, ipu.stage = #ipu.stage<10 : i64, 0 : i64>}
// EACH-NEXT:    %[[X4:.*]] = "ipu.remote_load"(%arg0) {ipu = 0 : i64, ipu.phase = 4 : i64, ipu.stage = #ipu.stage<10 : i64, 0 : i64>}
// EACH-NEXT:    call @fused_gradient_stage10(%[[G]], %[[X4]])
func.func @fused_gradient(%x: tensor<4xf32>, %w: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "ipu.mul"(%x, %w) {ipu.block = "A"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "ipu.relu"(%0) {ipu.block = "A2"} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "ipu.mul"(%1, %w) {ipu.block = "B"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = "ipu.relu"(%2) {ipu.block = "B2"} : (tensor<4xf32>) -> tensor<4xf32>
  %4 = "ipu.mul"(%3, %w) {ipu.block = "C"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %5 = "ipu.relu"(%4) {ipu.block = "C2"} : (tensor<4xf32>) -> tensor<4xf32>
  %g = "ipu.mul"(%5, %4) {ipu.backward = true, ipu.block = "C2"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %gw = "ipu.mul"(%g, %x) {ipu.backward = true, ipu.block = "A"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %5, %gw : tensor<4xf32>, tensor<4xf32>
}
