// Input and options past ipu-opt's limits: one located or one-line error naming the
// limit, exit status 1, never a crash or a hang (the -NOT lines check nothing else is
// printed).

// Nesting: MLIR's parser overflowed the stack (exit 139) at about 4,000 levels; ipu-opt
// refuses more than 1000 (poptorch/tools/nesting.py) at the bracket that goes too deep.
// RUN: %python -c "print('module {' * 8000 + '}' * 8000)" > %t.modules.mlir
// RUN: not ipu-opt %t.modules.mlir 2>&1 | FileCheck %s --check-prefix=MODULES
// MODULES: modules.mlir:1:8008: error: input nested more than 1000 levels deep{{.*}}
// MODULES-NOT: {{.+}}
// RUN: %python -c "print('func.func @f() attributes {a = ' + '[' * 8000 + ']' * 8000 + '} { return }')" > %t.attrs.mlir
// RUN: not ipu-opt %t.attrs.mlir 2>&1 | FileCheck %s --check-prefix=ATTRS
// ATTRS: attrs.mlir:1:1031: error: input nested more than 1000 levels deep{{.*}}
// ATTRS-NOT: {{.+}}
// RUN: %python -c "print('\"a.b\"() ({' * 3000 + '}) : () -> ()' * 3000)" > %t.regions.mlir
// RUN: not ipu-opt %t.regions.mlir --allow-unregistered-dialect 2>&1 | FileCheck %s --check-prefix=REGIONS
// REGIONS: regions.mlir:1:5006: error: input nested more than 1000 levels deep{{.*}}
// REGIONS-NOT: {{.+}}
// The limit itself is accepted; with --split-input-file the line is the file's.
// RUN: %python -c "print('module {' * 1000 + '}' * 1000)" > %t.limit.mlir
// RUN: ipu-opt %t.limit.mlir -o /dev/null
// RUN: %python -c "print('module {}\n// -----\n\nmodule {' + '[' * 1000 + ']' * 1000 + '}')" > %t.split.mlir
// RUN: not ipu-opt %t.split.mlir --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=SPLIT
// SPLIT: split.mlir:4:1008: error: input nested more than 1000 levels deep{{.*}}
// SPLIT-NOT: {{.+}}
// Brackets in strings and comments do not count.
// RUN: %python -c "print('// ' + '[' * 5000 + '\nmodule attributes {test.a = \"' + '{' * 5000 + '\"} {}')" > %t.quoted.mlir
// RUN: ipu-opt %t.quoted.mlir -o /dev/null

// Pass options: bounded, each given once, list items well formed, and the error names
// the pass, the option and what it accepts.
// RUN: not ipu-opt %s --ipu-schedule=micro-batches=99999999999999999999 2>&1 | FileCheck %s --check-prefix=HUGE
// HUGE: ipu-opt: error: option 'micro-batches' of pass 'ipu-schedule' expects an integer from -9223372036854775808 to 9223372036854775807, got '99999999999999999999'{{$}}
// HUGE-NOT: {{.+}}
// More than 65536 micro-batches is refused where the pass would schedule them, at the
// function with stages (test/Passes/schedule-invalid.mlir); @f has none.
// RUN: ipu-opt %s --pass-pipeline='builtin.module(ipu-schedule{micro-batches=65537})' 2>&1 | FileCheck %s --check-prefix=BIG
// BIG: func.func @f
// RUN: not ipu-opt %s "--ipu-schedule=micro-batches=4 micro-batches=5" 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not ipu-opt %s --pass-pipeline='builtin.module(ipu-schedule{micro-batches=4 micro-batches=5})' 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: ipu-opt: error: option 'micro-batches' of pass 'ipu-schedule' is given twice ('micro-batches=4' and 'micro-batches=5'); give it once{{$}}
// TWICE-NOT: {{.+}}
// RUN: not ipu-opt %s --ipu-assign-stages=stages=A=0:x 2>&1 | FileCheck %s --check-prefix=STAGES
// STAGES: ipu-opt: error: option 'stages' of pass 'ipu-assign-stages' expects a comma-separated list of block=stage[:ipu[:phase]] items (e.g. A=0:0,B=1:1), ids from 0 to 65535, got 'A=0:x'{{$}}
// STAGES-NOT: {{.+}}
// RUN: not ipu-opt %s --ipu-assign-stages=stages=A=0:0,B=1:99999 2>&1 | FileCheck %s --check-prefix=IPU
// IPU: ipu-opt: error: option 'stages' of pass 'ipu-assign-stages' expects {{.*}}, ids from 0 to 65535, got 'B=1:99999' in 'A=0:0,B=1:99999'{{$}}
// IPU-NOT: {{.+}}
// RUN: not ipu-opt %s --ipu-assign-stages=phase-ipus=,,, 2>&1 | FileCheck %s --check-prefix=EMPTY
// EMPTY: ipu-opt: error: option 'phase-ipus' of pass 'ipu-assign-stages' expects a comma-separated list of phase=ipu/ipu/... items (e.g. 0=0/1,1=2/3), ids from 0 to 65535, got an empty item in ',,,'{{$}}
// EMPTY-NOT: {{.+}}
// RUN: not ipu-opt %s --ipu-schedule==4 2>&1 | FileCheck %s --check-prefix=NONAME
// NONAME: ipu-opt: error: pass 'ipu-schedule' expects options as name=value, got '=4'{{$}}
// NONAME-NOT: {{.+}}
// An empty list is the default (no explicit stages), as the Python API writes it.
// RUN: ipu-opt %s "--ipu-assign-stages=stages= phase-ipus=" | FileCheck %s --check-prefix=DEFAULT
// DEFAULT: func.func @f

func.func @f() {
  return
}
