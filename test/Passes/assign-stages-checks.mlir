// The checks ipu-assign-stages makes on the whole model, reported at the module: the
// number of IPUs and the rules of the phased strategies. One model, one RUN line per
// set of options.
// RUN: not ipu-opt %s --ipu-assign-stages -o /dev/null 2>&1 | FileCheck %s --check-prefix=ROUND
// RUN: ipu-opt %s --ipu-assign-stages=auto-round-num-ipus=true | FileCheck %s --check-prefix=AUTO
// RUN: not ipu-opt %s --pass-pipeline='builtin.module(ipu-assign-stages{stages=A=0:0:0,A2=1:1:0,B=2:0:1 phase-ipus=0=0/1,1=0/1})' \
// RUN:   -o /dev/null 2>&1 | FileCheck %s --check-prefix=PHASE-IPUS
// RUN: ipu-opt %s --pass-pipeline='builtin.module(ipu-assign-stages{stages=A=0:0:0,A2=1:1:0,B=2:0:1 phase-ipus=0=0/1,1=0})' \
// RUN:   | FileCheck %s --check-prefix=PHASED
// RUN: not ipu-opt %s --pass-pipeline='builtin.module(ipu-assign-stages{stages=A=0:0:0,A2=1:1:0,B=2:3:1 parallel-phased=true})' \
// RUN:   -o /dev/null 2>&1 | FileCheck %s --check-prefix=PARITY
// RUN: ipu-opt %s --pass-pipeline='builtin.module(ipu-assign-stages{stages=A=0:0:0,A2=1:2:0,B=2:3:1 parallel-phased=true})' \
// RUN:   | FileCheck %s --check-prefix=PARALLEL

// Blocks on IPUs 0, 1 and 2: IPUs are reserved in powers of two.
// ROUND: assign-stages-checks.mlir:41:8: error: the model uses 3 IPUs, which is not a power of 2; IPUs are reserved in powers of 2: place the blocks on 4 IPUs or set Options.autoRoundNumIPUs(True)
// AUTO-LABEL: func.func @three_blocks
// AUTO-NEXT:    "ipu.relu"{{.*}}ipu.stage = #ipu.stage<0 : i64, 0 : i64>
// AUTO-NEXT:    "ipu.exp"{{.*}}ipu.stage = #ipu.stage<1 : i64, 1 : i64>
// AUTO-NEXT:    "ipu.neg"{{.*}}ipu.stage = #ipu.stage<2 : i64, 2 : i64>

// Phases 0 (A, A2 on IPUs 0 and 1) and 1 (B on IPU 0): Phase 1's ipus() must list one
// IPU, as it has one stage.
// PHASE-IPUS: assign-stages-checks.mlir:41:8: error: phase 1 has 1 stage but its ipus() lists 2 IPUs; give one IPU per stage of the Phase
// A Stage's third field is its phase: ops get ipu.phase beside ipu.stage.
// PHASED-LABEL: func.func @three_blocks
// PHASED-NEXT:    "ipu.relu"(%arg0) {ipu.block = "A", ipu.ipu_id = 0 : i64, ipu.phase = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// PHASED-NEXT:    "ipu.exp"(%{{.*}}) {ipu.block = "A2", ipu.ipu_id = 1 : i64, ipu.phase = 0 : i64, ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// PHASED-NEXT:    "ipu.neg"(%{{.*}}) {ipu.block = "B", ipu.ipu_id = 2 : i64, ipu.phase = 1 : i64, ipu.stage = #ipu.stage<2 : i64, 0 : i64>}

// ParallelPhasedExecution: even phases on even IPUs, odd ones on odd IPUs. A2 (phase 0)
// on IPU 1 breaks the rule; on IPU 2 it is accepted.
// PARITY: assign-stages-checks.mlir:40:8: error: ParallelPhasedExecution runs even phases on even IPUs, but block 'A2' of phase 0 is on IPU 1; move it to an even IPU
// PARALLEL-LABEL: func.func @three_blocks
// PARALLEL-NEXT:    "ipu.relu"{{.*}}ipu.phase = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>
// PARALLEL-NEXT:    "ipu.exp"{{.*}}ipu.phase = 0 : i64, ipu.stage = #ipu.stage<1 : i64, 2 : i64>
// PARALLEL-NEXT:    "ipu.neg"{{.*}}ipu.phase = 1 : i64, ipu.stage = #ipu.stage<2 : i64, 3 : i64>
func.func @three_blocks(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.relu"(%x) {ipu.block = "A", ipu.ipu_id = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "ipu.exp"(%0) {ipu.block = "A2", ipu.ipu_id = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "ipu.neg"(%1) {ipu.block = "B", ipu.ipu_id = 2 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}
