// RUN: not ipu-opt %s --ipu-precision=partials-type=double -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=TYPE
// RUN: not ipu-opt %s --ipu-precision=partials-type=half,half -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=LIST

// A partials type the pass does not know, and a list where one type is expected,
// reported at the module.
// TYPE: precision-invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: error: partials-type must be half or float, got 'double'
// LIST: precision-invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: error: partials-type must be half or float, got 'half,half'

func.func @f(%x: tensor<4xf16>) -> tensor<4xf16> {
  return %x : tensor<4xf16>
}
