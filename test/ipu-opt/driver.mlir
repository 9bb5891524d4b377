// The driver's own features: stdin, -o, split output, pass flags in order (ipu and
// upstream, function passes nested like mlir-opt's flags), IR printing, --list-passes.

// RUN: ipu-opt < %s --split-input-file | FileCheck %s
// RUN: ipu-opt %s --split-input-file -o %t.out && FileCheck %s --input-file %t.out
// A torch-mlir function pass given as a flag is nested under func.func, as mlir-opt does.
// RUN: ipu-opt %s --split-input-file --torch-reduce-op-variants | FileCheck %s
// CHECK-LABEL: func.func @first
// CHECK: // -----
// CHECK-LABEL: func.func @second

// Flags run in command-line order: cse merges the two exps, then canonicalize (a
// function pass given as a flag) and the ipu pass run; the textual pipeline does the same.
// RUN: ipu-opt %s --split-input-file --cse --canonicalize --ipu-import-annotations \
// RUN:   | FileCheck %s --check-prefix=FLAGS
// RUN: ipu-opt %s --split-input-file \
// RUN:   --pass-pipeline='builtin.module(cse, func.func(canonicalize), ipu-import-annotations)' \
// RUN:   | FileCheck %s --check-prefix=FLAGS
// FLAGS-LABEL: func.func @first
// FLAGS-NEXT: %[[E:.*]] = "ipu.exp"(%arg0) {ipu.block = "A"}
// FLAGS-NEXT: %[[S:.*]] = "ipu.add"(%[[E]], %[[E]])
// FLAGS-NEXT: return %[[S]]

// RUN: ipu-opt %s --split-input-file --ipu-import-annotations --cse --mlir-print-ir-after-all \
// RUN:   2>&1 >/dev/null | FileCheck %s --check-prefix=PRINT
// PRINT: // -----// IR Dump After ImportAnnotations: ipu-import-annotations //----- //
// PRINT: // -----// IR Dump After CSEPass: cse //----- //
// PRINT: // -----// IR Dump After ImportAnnotations: ipu-import-annotations //----- //
// PRINT: // -----// IR Dump After CSEPass: cse //----- //

// RUN: ipu-opt --list-passes | FileCheck %s --check-prefix=LIST
// LIST: --ipu-import-annotations {{ *}}Copy poptorch annotations (ipu.block, ...) from location metadata to op attributes
// LIST-NEXT: strip-metadata=<bool> {{ *}}Remove the copied annotations from the locations afterwards (default: false)

func.func @first(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32> loc(fused<{ipu.block = "A"}>["m.py":1:1])
  %1 = "ipu.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32> loc(fused<{ipu.block = "A"}>["m.py":1:1])
  %2 = "ipu.add"(%0, %1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}

// -----

func.func @second() {
  return
}
