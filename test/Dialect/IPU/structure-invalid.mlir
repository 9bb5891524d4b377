// RUN: ipu-opt %s --split-input-file --verify-diagnostics

// One case per way an op of dialects/structure.py, or the #ipu.stage and
// #ipu.replica_group attributes of dialects/ipu.py, can fail to verify: the Python
// verifiers ("'ipu.x' op ..."), then the IRDL constraints the op classes declare
// (operand/result counts, base types, attribute parameters). An op that lacks a declared
// attribute or operand, or has an operand of the wrong base type, is left by the Python
// verifier to IRDL, which reports it in its own words ("attribute "x" is expected but not
// provided", "expected base type ...").

//===----------------------------------------------------------------------===//
// ipu.copy
//===----------------------------------------------------------------------===//

func.func @copy$same_ipu(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.copy' op copies from IPU 1 to itself; remove the copy}}
  %0 = "ipu.copy"(%x) {src_ipu = 1 : i64, dst_ipu = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @copy$negative_src(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.copy' op attribute 'src_ipu' must be >= 0, got -1}}
  %0 = "ipu.copy"(%x) {src_ipu = -1 : i64, dst_ipu = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @copy$negative_dst(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.copy' op attribute 'dst_ipu' must be >= 0, got -2}}
  %0 = "ipu.copy"(%x) {src_ipu = 0 : i64, dst_ipu = -2 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @copy$dst_not_an_integer(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.copy' op attribute 'dst_ipu' must be an integer, got "x"}}
  %0 = "ipu.copy"(%x) {src_ipu = 0 : i64, dst_ipu = "x"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @copy$missing_dst(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.copy' op attribute "dst_ipu" is expected but not provided}}
  %0 = "ipu.copy"(%x) {src_ipu = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @copy$unranked(%x: tensor<*xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.unranked_tensor'}}
  %0 = "ipu.copy"(%x) {src_ipu = 0 : i64, dst_ipu = 1 : i64} : (tensor<*xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @copy$not_a_tensor(%x: i32) -> i32 {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.integer'}}
  %0 = "ipu.copy"(%x) {src_ipu = 0 : i64, dst_ipu = 1 : i64} : (i32) -> i32
  return %0 : i32
}

// -----

func.func @copy$result_type(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+1 {{'ipu.copy' op result type tensor<4xf16> differs from input type tensor<4xf32>}}
  %0 = "ipu.copy"(%x) {src_ipu = 0 : i64, dst_ipu = 1 : i64} : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @copy$two_operands(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{op expects exactly 1 operands, but got 2}}
  %0 = "ipu.copy"(%x, %x) {src_ipu = 0 : i64, dst_ipu = 1 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @copy$no_operand() -> tensor<4xf32> {
  // expected-error @+1 {{op expects exactly 1 operands, but got 0}}
  %0 = "ipu.copy"() {src_ipu = 0 : i64, dst_ipu = 1 : i64} : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// ipu.host_load, ipu.host_store
//===----------------------------------------------------------------------===//

func.func @host_load$empty_stream() -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.host_load' op attribute 'stream' must not be empty}}
  %0 = "ipu.host_load"() {stream = ""} : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @host_load$stream_not_a_string() -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.host_load' op attribute 'stream' must be a string, got 3 : i64}}
  %0 = "ipu.host_load"() {stream = 3 : i64} : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @host_load$missing_stream() -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.host_load' op attribute "stream" is expected but not provided}}
  %0 = "ipu.host_load"() : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @host_load$unranked() -> tensor<*xf32> {
  // expected-error @below {{expected base type 'builtin.tensor' but got 'builtin.unranked_tensor'}}
  %0 = "ipu.host_load"() {stream = "input0"} : () -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @host_load$not_a_tensor() -> i32 {
  // expected-error @below {{expected base type 'builtin.tensor' but got 'builtin.integer'}}
  %0 = "ipu.host_load"() {stream = "input0"} : () -> i32
  return %0 : i32
}

// -----

func.func @host_load$no_result() {
  // expected-error @below {{op expects exactly 1 results, but got 0}}
  "ipu.host_load"() {stream = "input0"} : () -> ()
  return
}

// -----

func.func @host_load$operand(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{op expects exactly 0 operands, but got 1}}
  %0 = "ipu.host_load"(%x) {stream = "input0"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @host_store$empty_stream(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ipu.host_store' op attribute 'stream' must not be empty}}
  "ipu.host_store"(%x) {stream = ""} : (tensor<4xf32>) -> ()
  return
}

// -----

func.func @host_store$missing_stream(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ipu.host_store' op attribute "stream" is expected but not provided}}
  "ipu.host_store"(%x) : (tensor<4xf32>) -> ()
  return
}

// -----

func.func @host_store$unranked(%x: tensor<*xf32>) {
  // expected-error @below {{expected base type 'builtin.tensor' but got 'builtin.unranked_tensor'}}
  "ipu.host_store"(%x) {stream = "output0"} : (tensor<*xf32>) -> ()
  return
}

// -----

func.func @host_store$not_a_tensor(%x: i32) {
  // expected-error @below {{expected base type 'builtin.tensor' but got 'builtin.integer'}}
  "ipu.host_store"(%x) {stream = "output0"} : (i32) -> ()
  return
}

// -----

func.func @host_store$no_operand() {
  // expected-error @below {{op expects exactly 1 operands, but got 0}}
  "ipu.host_store"() {stream = "output0"} : () -> ()
  return
}

// -----

func.func @host_store$result(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{op expects exactly 0 results, but got 1}}
  %0 = "ipu.host_store"(%x) {stream = "output0"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// ipu.all_reduce, #ipu.replica_group
//===----------------------------------------------------------------------===//

func.func @all_reduce$unknown_reduction(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.all_reduce' op attribute 'reduction' must be one of "sum", "mean", "max", "min", got "prod"}}
  %0 = "ipu.all_reduce"(%x) {reduction = "prod", group = #ipu.replica_group<"all", 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @all_reduce$reduction_not_a_string(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.all_reduce' op attribute 'reduction' must be a string, got 1 : i64}}
  %0 = "ipu.all_reduce"(%x) {reduction = 1 : i64, group = #ipu.replica_group<"all", 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @all_reduce$group_not_a_replica_group(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.all_reduce' op attribute 'group' must be a #ipu.replica_group, got 1 : i64}}
  %0 = "ipu.all_reduce"(%x) {reduction = "sum", group = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @all_reduce$missing_group(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.all_reduce' op attribute "group" is expected but not provided}}
  %0 = "ipu.all_reduce"(%x) {reduction = "sum"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @all_reduce$unknown_group_kind(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.all_reduce' op replica group kind must be one of "all", "consecutive", "orthogonal", "no_grouping", got "ring"}}
  %0 = "ipu.all_reduce"(%x) {reduction = "sum", group = #ipu.replica_group<"ring", 2 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @all_reduce$consecutive_size_0(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.all_reduce' op a "consecutive" replica group needs a size >= 1, got 0}}
  %0 = "ipu.all_reduce"(%x) {reduction = "sum", group = #ipu.replica_group<"consecutive", 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @all_reduce$orthogonal_negative_size(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.all_reduce' op a "orthogonal" replica group needs a size >= 1, got -2}}
  %0 = "ipu.all_reduce"(%x) {reduction = "mean", group = #ipu.replica_group<"orthogonal", -2 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @all_reduce$all_with_size(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.all_reduce' op a "all" replica group takes size 0, got 2}}
  %0 = "ipu.all_reduce"(%x) {reduction = "max", group = #ipu.replica_group<"all", 2 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @all_reduce$no_grouping_with_size(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.all_reduce' op a "no_grouping" replica group takes size 0, got 1}}
  %0 = "ipu.all_reduce"(%x) {reduction = "min", group = #ipu.replica_group<"no_grouping", 1 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @all_reduce$result_type(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+1 {{'ipu.all_reduce' op result type tensor<4xf16> differs from input type tensor<4xf32>}}
  %0 = "ipu.all_reduce"(%x) {reduction = "sum", group = #ipu.replica_group<"all", 0 : i64>} : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @all_reduce$unranked(%x: tensor<*xf32>) -> tensor<*xf32> {
  // expected-error @below {{expected base type 'builtin.tensor' but got 'builtin.unranked_tensor'}}
  %0 = "ipu.all_reduce"(%x) {reduction = "sum", group = #ipu.replica_group<"all", 0 : i64>} : (tensor<*xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @all_reduce$not_a_tensor(%x: i32) -> i32 {
  // expected-error @below {{expected base type 'builtin.tensor' but got 'builtin.integer'}}
  %0 = "ipu.all_reduce"(%x) {reduction = "sum", group = #ipu.replica_group<"all", 0 : i64>} : (i32) -> i32
  return %0 : i32
}

// -----

func.func @replica_group$kind_not_a_string(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expected base attribute 'builtin.string' but got 'builtin.integer'}}
  %0 = "ipu.all_reduce"(%x) {reduction = "sum", group = #ipu.replica_group<1 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @replica_group$size_not_an_integer(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expected base attribute 'builtin.integer' but got 'builtin.float'}}
  %0 = "ipu.all_reduce"(%x) {reduction = "sum", group = #ipu.replica_group<"orthogonal", 2.0 : f32>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @replica_group$missing_size(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expected 2 type arguments, but had 1}}
  %0 = "ipu.all_reduce"(%x) {reduction = "sum", group = #ipu.replica_group<"all">} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// ipu.remote_store, ipu.remote_load
//===----------------------------------------------------------------------===//

func.func @remote_load$type_change(%x: tensor<4xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'ipu.remote_load' op result type tensor<2xf32> differs from input type tensor<4xf32>}}
  %0 = "ipu.remote_load"(%x) {ipu = 1 : i64} : (tensor<4xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @remote_store$negative_ipu(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ipu.remote_store' op attribute 'ipu' must be >= 0, got -1}}
  "ipu.remote_store"(%x) {ipu = -1 : i64} : (tensor<4xf32>) -> ()
  return
}

// -----

//===----------------------------------------------------------------------===//
// #ipu.stage (its parameters are checked by IRDL; ranges by the passes using it)
//===----------------------------------------------------------------------===//

// expected-error @+1 {{expected base attribute 'builtin.integer' but got 'builtin.string'}}
func.func private @stage_attr$string_id() attributes {ipu.stage = #ipu.stage<"a", 0 : i64>}

// -----

// expected-error @+1 {{expected 2 type arguments, but had 1}}
func.func private @stage_attr$one_id() attributes {ipu.stage = #ipu.stage<0 : i64>}
