// RUN: ipu-opt %s --split-input-file --verify-diagnostics

// One case per way an op of dialects/indexing.py fails its Python verifier. Missing
// attributes and operands of the wrong base type are IRDL's (see structure-invalid.mlir).

func.func @gather$index_not_integer(%x: tensor<4x5xf32>, %i: tensor<4x5xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'ipu.gather' op index must hold signless integers, got f32}}
  %0 = "ipu.gather"(%x, %i) {dim = 0 : i64} : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @gather$bool_index(%x: tensor<4x5xf32>, %i: tensor<4x5xi1>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'ipu.gather' op index must hold signless integers, got i1}}
  %0 = "ipu.gather"(%x, %i) {dim = 0 : i64} : (tensor<4x5xf32>, tensor<4x5xi1>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @gather$dim_out_of_range(%x: tensor<4x5xf32>, %i: tensor<4x2xi32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'ipu.gather' op attribute 'dim' = 2 is out of range for rank 2}}
  %0 = "ipu.gather"(%x, %i) {dim = 2 : i64} : (tensor<4x5xf32>, tensor<4x2xi32>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

func.func @gather$negative_dim(%x: tensor<4x5xf32>, %i: tensor<4x2xi32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'ipu.gather' op attribute 'dim' must be >= 0, got -1}}
  %0 = "ipu.gather"(%x, %i) {dim = -1 : i64} : (tensor<4x5xf32>, tensor<4x2xi32>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

func.func @gather$index_too_big(%x: tensor<4x5xf32>, %i: tensor<5x2xi32>) -> tensor<5x2xf32> {
  // expected-error @+1 {{'ipu.gather' op index 5x2 does not fit input 4x5 outside dim 1}}
  %0 = "ipu.gather"(%x, %i) {dim = 1 : i64} : (tensor<4x5xf32>, tensor<5x2xi32>) -> tensor<5x2xf32>
  return %0 : tensor<5x2xf32>
}

// -----

func.func @gather$wrong_result(%x: tensor<4x5xf32>, %i: tensor<4x2xi32>) -> tensor<4x2xf16> {
  // expected-error @+1 {{'ipu.gather' op result type tensor<4x2xf16> should be tensor<4x2xf32>}}
  %0 = "ipu.gather"(%x, %i) {dim = 1 : i64} : (tensor<4x5xf32>, tensor<4x2xi32>) -> tensor<4x2xf16>
  return %0 : tensor<4x2xf16>
}

// -----

func.func @index_select$wrong_result(%x: tensor<4x5xf32>, %i: tensor<3xi32>) -> tensor<3x5xf32> {
  // expected-error @+1 {{'ipu.index_select' op result type tensor<3x5xf32> should be tensor<4x3xf32>}}
  %0 = "ipu.index_select"(%x, %i) {dim = 1 : i64} : (tensor<4x5xf32>, tensor<3xi32>) -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}

// -----

func.func @index$too_many_indices(%x: tensor<4x5xf32>, %i: tensor<3x3xi32>) -> tensor<3xf32> {
  // expected-error @+1 {{'ipu.index' op indices 3x3 must stack between 1 and 2 indices along their last dim}}
  %0 = "ipu.index"(%x, %i) : (tensor<4x5xf32>, tensor<3x3xi32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @index$wrong_result(%x: tensor<4x5xf32>, %i: tensor<3x1xi32>) -> tensor<3xf32> {
  // expected-error @+1 {{'ipu.index' op result type tensor<3xf32> should be tensor<3x5xf32>}}
  %0 = "ipu.index"(%x, %i) : (tensor<4x5xf32>, tensor<3x1xi32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @index_put$values_element_type(%x: tensor<4x5xf32>, %i: tensor<3x1xi32>, %v: tensor<5xf16>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'ipu.index_put' op values element type f16 differs from the input's f32}}
  %0 = "ipu.index_put"(%x, %i, %v) {accumulate = false} : (tensor<4x5xf32>, tensor<3x1xi32>, tensor<5xf16>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @index_put$values_shape(%x: tensor<4x5xf32>, %i: tensor<3x1xi32>, %v: tensor<2x5xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'ipu.index_put' op values 2x5 do not broadcast to the indexed shape 3x5}}
  %0 = "ipu.index_put"(%x, %i, %v) {accumulate = false} : (tensor<4x5xf32>, tensor<3x1xi32>, tensor<2x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @index_put$accumulate_not_bool(%x: tensor<4x5xf32>, %i: tensor<3x1xi32>, %v: tensor<5xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'ipu.index_put' op attribute 'accumulate' must be true or false, got 1 : i64}}
  %0 = "ipu.index_put"(%x, %i, %v) {accumulate = 1 : i64} : (tensor<4x5xf32>, tensor<3x1xi32>, tensor<5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @index_put$wrong_result(%x: tensor<4x5xf32>, %i: tensor<3x1xi32>, %v: tensor<5xf32>) -> tensor<3x5xf32> {
  // expected-error @+1 {{'ipu.index_put' op result type tensor<3x5xf32> should be tensor<4x5xf32>}}
  %0 = "ipu.index_put"(%x, %i, %v) {accumulate = true} : (tensor<4x5xf32>, tensor<3x1xi32>, tensor<5xf32>) -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}

// -----

func.func @scatter$reduction(%x: tensor<4x5xf32>, %i: tensor<4x2xi32>, %s: tensor<4x2xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'ipu.scatter' op attribute 'reduction' must be one of "none", "sum", "prod", "amax", "amin", "mean", got "max"}}
  %0 = "ipu.scatter"(%x, %i, %s) {dim = 1 : i64, include_self = true, reduction = "max"} : (tensor<4x5xf32>, tensor<4x2xi32>, tensor<4x2xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @scatter$src_element_type(%x: tensor<4x5xf32>, %i: tensor<4x2xi32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'ipu.scatter' op src element type i32 differs from the input's f32}}
  %0 = "ipu.scatter"(%x, %i, %i) {dim = 1 : i64, include_self = true, reduction = "sum"} : (tensor<4x5xf32>, tensor<4x2xi32>, tensor<4x2xi32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @scatter$src_shape(%x: tensor<4x5xf32>, %i: tensor<4x2xi32>, %s: tensor<4x3xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'ipu.scatter' op src 4x3 and index 4x2 must have one shape}}
  %0 = "ipu.scatter"(%x, %i, %s) {dim = 1 : i64, include_self = true, reduction = "none"} : (tensor<4x5xf32>, tensor<4x2xi32>, tensor<4x3xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @scatter$index_too_big(%x: tensor<4x5xf32>, %i: tensor<6x2xi32>, %s: tensor<6x2xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'ipu.scatter' op index 6x2 does not fit input 4x5 outside dim 1}}
  %0 = "ipu.scatter"(%x, %i, %s) {dim = 1 : i64, include_self = true, reduction = "none"} : (tensor<4x5xf32>, tensor<6x2xi32>, tensor<6x2xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @scatter$include_self_not_bool(%x: tensor<4x5xf32>, %i: tensor<4x2xi32>, %s: tensor<4x2xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'ipu.scatter' op attribute 'include_self' must be true or false, got "yes"}}
  %0 = "ipu.scatter"(%x, %i, %s) {dim = 1 : i64, include_self = "yes", reduction = "sum"} : (tensor<4x5xf32>, tensor<4x2xi32>, tensor<4x2xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @sort$values_type(%x: tensor<4x5xf32>) {
  // expected-error @+1 {{'ipu.sort' op result type tensor<4x5xf16> should be tensor<4x5xf32>}}
  %0:2 = "ipu.sort"(%x) {descending = false, dim = 1 : i64} : (tensor<4x5xf32>) -> (tensor<4x5xf16>, tensor<4x5xi64>)
  return
}

// -----

func.func @sort$indices_not_integer(%x: tensor<4x5xf32>) {
  // expected-error @+1 {{'ipu.sort' op indices result must hold signless integers, got f32}}
  %0:2 = "ipu.sort"(%x) {descending = false, dim = 1 : i64} : (tensor<4x5xf32>) -> (tensor<4x5xf32>, tensor<4x5xf32>)
  return
}

// -----

func.func @sort$indices_shape(%x: tensor<4x5xf32>) {
  // expected-error @+1 {{'ipu.sort' op indices result 4x4 should have the input's shape 4x5}}
  %0:2 = "ipu.sort"(%x) {descending = true, dim = 1 : i64} : (tensor<4x5xf32>) -> (tensor<4x5xf32>, tensor<4x4xi64>)
  return
}

// -----

func.func @flip$repeated_dim(%x: tensor<4x5xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'ipu.flip' op dims [1, 1] must be distinct dims of 0..1}}
  %0 = "ipu.flip"(%x) {dims = array<i64: 1, 1>} : (tensor<4x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @flip$dim_out_of_range(%x: tensor<4x5xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'ipu.flip' op dims [2] must be distinct dims of 0..1}}
  %0 = "ipu.flip"(%x) {dims = array<i64: 2>} : (tensor<4x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @diagonal$same_dims(%x: tensor<4x5xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.diagonal' op dim1 and dim2 must differ, both are 1}}
  %0 = "ipu.diagonal"(%x) {offset = 0 : i64, dim1 = 1 : i64, dim2 = 1 : i64} : (tensor<4x5xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @diagonal$wrong_length(%x: tensor<4x5xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.diagonal' op result type tensor<4xf32> should be tensor<3xf32>}}
  %0 = "ipu.diagonal"(%x) {offset = 2 : i64, dim1 = 0 : i64, dim2 = 1 : i64} : (tensor<4x5xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @slice_update$entries(%x: tensor<4x5xf32>, %u: tensor<4x5xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'ipu.slice_update' op starts, ends and steps need 2 entries each}}
  %0 = "ipu.slice_update"(%x, %u) {starts = array<i64: 0>, ends = array<i64: 4>, steps = array<i64: 1>} : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @slice_update$out_of_range(%x: tensor<4x5xf32>, %u: tensor<4x5xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'ipu.slice_update' op dim 1: slice 0:6:1 is not within 0:5 with a positive step}}
  %0 = "ipu.slice_update"(%x, %u) {starts = array<i64: 0, 0>, ends = array<i64: 4, 6>, steps = array<i64: 1, 1>} : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @slice_update$update_shape(%x: tensor<4x5xf32>, %u: tensor<4x5xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'ipu.slice_update' op update tensor<4x5xf32> should be tensor<4x2xf32>}}
  %0 = "ipu.slice_update"(%x, %u) {starts = array<i64: 0, 1>, ends = array<i64: 4, 5>, steps = array<i64: 1, 2>} : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @embedding_bag$mode(%w: tensor<10x3xf32>, %i: tensor<6xi32>, %o: tensor<2xi32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'ipu.embedding_bag' op attribute 'mode' must be one of "sum", "mean", "max", got "min"}}
  %0 = "ipu.embedding_bag"(%w, %i, %o) {mode = "min", include_last_offset = false, padding_idx = -1 : i64} : (tensor<10x3xf32>, tensor<6xi32>, tensor<2xi32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @embedding_bag$padding_idx(%w: tensor<10x3xf32>, %i: tensor<6xi32>, %o: tensor<2xi32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'ipu.embedding_bag' op attribute 'padding_idx' must be >= -1, got -2}}
  %0 = "ipu.embedding_bag"(%w, %i, %o) {mode = "sum", include_last_offset = false, padding_idx = -2 : i64} : (tensor<10x3xf32>, tensor<6xi32>, tensor<2xi32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @embedding_bag$ranks(%w: tensor<10x3xf32>, %i: tensor<2x3xi32>, %o: tensor<2xi32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'ipu.embedding_bag' op weight, indices and offsets must have ranks 2, 1, 1, got 2, 2, 1}}
  %0 = "ipu.embedding_bag"(%w, %i, %o) {mode = "sum", include_last_offset = false, padding_idx = -1 : i64} : (tensor<10x3xf32>, tensor<2x3xi32>, tensor<2xi32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @embedding_bag$last_offset(%w: tensor<10x3xf32>, %i: tensor<6xi32>, %o: tensor<2xi32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'ipu.embedding_bag' op result type tensor<2x3xf32> should be tensor<1x3xf32>}}
  %0 = "ipu.embedding_bag"(%w, %i, %o) {mode = "sum", include_last_offset = true, padding_idx = -1 : i64} : (tensor<10x3xf32>, tensor<6xi32>, tensor<2xi32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @diagonal$offset_not_integer(%x: tensor<4x5xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.diagonal' op attribute 'offset' must be an integer, got "up"}}
  %0 = "ipu.diagonal"(%x) {offset = "up", dim1 = 0 : i64, dim2 = 1 : i64} : (tensor<4x5xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @embedding_bag$mode_not_string(%w: tensor<10x3xf32>, %i: tensor<6xi32>, %o: tensor<2xi32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'ipu.embedding_bag' op attribute 'mode' must be a string, got 0 : i64}}
  %0 = "ipu.embedding_bag"(%w, %i, %o) {mode = 0 : i64, include_last_offset = false, padding_idx = -1 : i64} : (tensor<10x3xf32>, tensor<6xi32>, tensor<2xi32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
