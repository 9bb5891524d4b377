// Bad input of every kind: one located or one-line error, exit status 1, no traceback
// (the -NOT lines check that nothing else is printed).

// RUN: not ipu-opt %s 2>&1 | FileCheck %s --check-prefix=GARBAGE
// GARBAGE: errors.mlir:[[# @LINE + 11]]:1: error: custom op 'this' is unknown{{.*}}
// GARBAGE-NOT: {{.+}}
// RUN: not ipu-opt < %s 2>&1 | FileCheck %s --check-prefix=STDIN
// STDIN: <stdin>:[[# @LINE + 8]]:1: error: custom op 'this' is unknown{{.*}}
// STDIN-NOT: {{.+}}
// RUN: not ipu-opt %s --split-input-file 2>&1 | FileCheck %s --check-prefix=SPLIT
// SPLIT: errors.mlir:[[# @LINE + 5]]:1: error: custom op 'this' is unknown
// SPLIT-NEXT: errors.mlir:[[# @LINE + 9]]:3: error: unregistered operation 'ipu.no_such_op' found in dialect ('ipu') that does not allow unknown operations
// SPLIT-NEXT: errors.mlir:[[# @LINE + 8]]:3: note: see current operation: "ipu.no_such_op"() : () -> ()
// SPLIT-NEXT: errors.mlir:[[# @LINE + 14]]:20: error: use of undeclared SSA value name

this is not MLIR

// -----

func.func @unknown_op() {
  "ipu.no_such_op"() : () -> ()
  return
}

// -----

func.func @undefined_value() {
  "ipu.host_store"(%nope) {stream = "s"} : (tensor<2xf32>) -> ()
  return
}

// RUN: not ipu-opt %t.does-not-exist 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: ipu-opt: error: could not open input file '{{.*}}.does-not-exist': No such file or directory{{.*}}
// MISSING-NOT: {{.+}}

// RUN: not ipu-opt %s --no-such-pass 2>&1 | FileCheck %s --check-prefix=PASS
// RUN: not ipu-opt %s --pass-pipeline='builtin.module(no-such-pass)' 2>&1 | FileCheck %s --check-prefix=PASS
// PASS: ipu-opt: error: 'no-such-pass' does not refer to a registered pass or pass pipeline{{.*}}
// PASS-NOT: {{.+}}

// RUN: not ipu-opt %s --pass-pipeline='builtin.module(cse' 2>&1 | FileCheck %s --check-prefix=UNBALANCED
// UNBALANCED: ipu-opt: error: unbalanced '(' at column 15 of 'builtin.module(cse'{{.*}}
// UNBALANCED-NOT: {{.+}}

// RUN: not ipu-opt %s --ipu-import-annotations=strip-metadata=maybe 2>&1 | FileCheck %s --check-prefix=BADVALUE
// BADVALUE: ipu-opt: error: option 'strip-metadata' of pass 'ipu-import-annotations' expects a boolean (true/false), got 'maybe'{{.*}}
// BADVALUE-NOT: {{.+}}

// RUN: not ipu-opt %s --pass-pipeline='ipu-import-annotations{colour=red}' 2>&1 | FileCheck %s --check-prefix=BADOPTION
// BADOPTION: ipu-opt: error: pass 'ipu-import-annotations' has no option 'colour' (options: strip-metadata){{.*}}
// BADOPTION-NOT: {{.+}}

// RUN: not ipu-opt %s --canonicalize=max-iterations=many 2>&1 | FileCheck %s --check-prefix=UPSTREAMOPTION
// UPSTREAMOPTION: ipu-opt: error: for the --max-iterations option: 'many' value invalid for long argument!; failed to add `canonicalize` with options `max-iterations=many`{{.*}}
// UPSTREAMOPTION-NOT: {{.+}}

// RUN: not ipu-opt %s --pass-pipeline='builtin.module(func.func(ipu-import-annotations))' 2>&1 | FileCheck %s --check-prefix=NESTED
// NESTED: ipu-opt: error: ipu pass 'ipu-import-annotations' runs on the whole module: write it at the top level of the pipeline, not inside 'func.func(...)'{{.*}}
// NESTED-NOT: {{.+}}

// RUN: not ipu-opt %s --pass-pipeline=cse --canonicalize 2>&1 | FileCheck %s --check-prefix=BOTH
// BOTH: ipu-opt: error: --pass-pipeline cannot be combined with individual pass flags (got --canonicalize){{.*}}
// BOTH-NOT: {{.+}}

// RUN: not ipu-opt %s -o 2>&1 | FileCheck %s --check-prefix=USAGE
// USAGE: ipu-opt: error: argument -o: expected one argument{{.*}}
// USAGE-NOT: {{.+}}

// RUN: not ipu-opt %s -o %t.no-such-dir/out.mlir 2>&1 | FileCheck %s --check-prefix=OUTPUT
// OUTPUT: ipu-opt: error: could not open output file '{{.*}}out.mlir': No such file or directory{{.*}}
// OUTPUT-NOT: {{.+}}

// A --pass-pipeline is anchored as written: a function pass at module level is an
// error there (as in mlir-opt), while the same pass given as a flag is nested.
// RUN: not ipu-opt %s --pass-pipeline='builtin.module(torch-reduce-op-variants)' 2>&1 | FileCheck %s --check-prefix=ANCHOR
// ANCHOR: ipu-opt: error: Can't add pass 'ReduceOpVariants' restricted to 'func.func' on a PassManager intended to run on 'builtin.module', did you intend to nest?{{.*}}
// ANCHOR-NOT: {{.+}}
