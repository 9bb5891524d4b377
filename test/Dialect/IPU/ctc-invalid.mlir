// RUN: ipu-opt %s --split-input-file --verify-diagnostics

// One case per way ipu.ctc_beam_search_decoder (dialects/ctc.py) can fail to verify.

func.func @ctc$top_paths(%x: tensor<5x2x4xf32>, %n: tensor<2xi32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'ipu.ctc_beam_search_decoder' op top_paths 3 is more than beam_width 2}}
  %p, %l, %d = "ipu.ctc_beam_search_decoder"(%x, %n) {blank = 0 : i64, beam_width = 2 : i64, top_paths = 3 : i64} : (tensor<5x2x4xf32>, tensor<2xi32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3x5xf32>)
  return %p : tensor<2x3xf32>
}

// -----

func.func @ctc$blank(%x: tensor<5x2x4xf32>, %n: tensor<2xi32>) -> tensor<2x1xf32> {
  // expected-error @+1 {{'ipu.ctc_beam_search_decoder' op blank 4 is not one of the 4 classes}}
  %p, %l, %d = "ipu.ctc_beam_search_decoder"(%x, %n) {blank = 4 : i64, beam_width = 2 : i64, top_paths = 1 : i64} : (tensor<5x2x4xf32>, tensor<2xi32>) -> (tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x1x5xf32>)
  return %p : tensor<2x1xf32>
}

// -----

func.func @ctc$lengths(%x: tensor<5x2x4xf32>, %n: tensor<3xi32>) -> tensor<2x1xf32> {
  // expected-error @+1 {{'ipu.ctc_beam_search_decoder' op lengths must be 2 integers, got tensor<3xi32>}}
  %p, %l, %d = "ipu.ctc_beam_search_decoder"(%x, %n) {blank = 0 : i64, beam_width = 2 : i64, top_paths = 1 : i64} : (tensor<5x2x4xf32>, tensor<3xi32>) -> (tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x1x5xf32>)
  return %p : tensor<2x1xf32>
}

// -----

func.func @ctc$paths(%x: tensor<5x2x4xf32>, %n: tensor<2xi32>) -> tensor<2x1xf32> {
  // expected-error @+1 {{'ipu.ctc_beam_search_decoder' op paths tensor<2x1x4xf32> should have shape 2x1x5 and element type f32}}
  %p, %l, %d = "ipu.ctc_beam_search_decoder"(%x, %n) {blank = 0 : i64, beam_width = 2 : i64, top_paths = 1 : i64} : (tensor<5x2x4xf32>, tensor<2xi32>) -> (tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x1x4xf32>)
  return %p : tensor<2x1xf32>
}
