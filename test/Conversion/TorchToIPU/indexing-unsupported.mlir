// RUN: ipu-opt %s --ipu-convert-torch-to-ipu --split-input-file --verify-diagnostics

// The indexing lowerings decline what has no static-shape equivalent, and say why.

// x[mask] has as many rows as the mask has true elements: a data-dependent shape.
func.func @index$boolean_mask(%x: !torch.vtensor<[4,5],f32>, %m: !torch.vtensor<[4,5],i1>) -> !torch.vtensor<[?],f32> {
  %0 = torch.prim.ListConstruct %m : (!torch.vtensor<[4,5],i1>) -> !torch.list<vtensor>
  // expected-error @+1 {{unsupported op 'torch.aten.index.Tensor_hacked_twin': indexing with a data-dependent result shape (a boolean mask)}}
  %1 = torch.aten.index.Tensor_hacked_twin %x, %0 : !torch.vtensor<[4,5],f32>, !torch.list<vtensor> -> !torch.vtensor<[?],f32>
  return %1 : !torch.vtensor<[?],f32>
}

// -----

func.func @index_put$boolean_mask(%x: !torch.vtensor<[4],f32>, %m: !torch.vtensor<[4],i1>, %v: !torch.vtensor<[],f32>) -> !torch.vtensor<[4],f32> {
  %false = torch.constant.bool false
  %0 = torch.prim.ListConstruct %m : (!torch.vtensor<[4],i1>) -> !torch.list<vtensor>
  // expected-error @+1 {{unsupported op 'torch.aten.index_put.hacked_twin': index tensors of element type i1 (a boolean mask gives a data-dependent shape; index with integer tensors)}}
  %1 = torch.aten.index_put.hacked_twin %x, %0, %v, %false : !torch.vtensor<[4],f32>, !torch.list<vtensor>, !torch.vtensor<[],f32>, !torch.bool -> !torch.vtensor<[4],f32>
  return %1 : !torch.vtensor<[4],f32>
}

// -----

// x[mask] = v arrives with the mask turned into index tensors of unknown length.
func.func @index_put$dynamic_indices(%x: !torch.vtensor<[4],f32>, %i: !torch.vtensor<[?],si64>, %v: !torch.vtensor<[],f32>) -> !torch.vtensor<[4],f32> {
  %false = torch.constant.bool false
  %0 = torch.prim.ListConstruct %i : (!torch.vtensor<[?],si64>) -> !torch.list<vtensor>
  // expected-error @+1 {{unsupported op 'torch.aten.index_put.hacked_twin': index tensors of data-dependent shape}}
  %1 = torch.aten.index_put.hacked_twin %x, %0, %v, %false : !torch.vtensor<[4],f32>, !torch.list<vtensor>, !torch.vtensor<[],f32>, !torch.bool -> !torch.vtensor<[4],f32>
  return %1 : !torch.vtensor<[4],f32>
}

// -----

// Only the bags' output is computed; the results for the backward pass are not.
func.func @embedding_bag$offset2bag_used(%w: !torch.vtensor<[10,3],f32>, %i: !torch.vtensor<[6],si32>, %o: !torch.vtensor<[2],si32>) -> (!torch.vtensor<[2,3],f32>, !torch.vtensor<[6],si32>) {
  %false = torch.constant.bool false
  %int0 = torch.constant.int 0
  %int-1 = torch.constant.int -1
  %none = torch.constant.none
  // expected-error @+1 {{unsupported op 'torch.aten.embedding_bag.padding_idx': embedding_bag's offset2bag, bag_size and max_indices results}}
  %r0, %r1, %r2, %r3 = torch.aten.embedding_bag.padding_idx %w, %i, %o, %false, %int0, %false, %none, %false, %int-1 : !torch.vtensor<[10,3],f32>, !torch.vtensor<[6],si32>, !torch.vtensor<[2],si32>, !torch.bool, !torch.int, !torch.bool, !torch.none, !torch.bool, !torch.int -> !torch.vtensor<[2,3],f32>, !torch.vtensor<[6],si32>, !torch.vtensor<[2],si32>, !torch.vtensor<[2],si32>
  return %r0, %r1 : !torch.vtensor<[2,3],f32>, !torch.vtensor<[6],si32>
}

// -----

func.func @scatter_reduce$unknown(%x: !torch.vtensor<[4],f32>, %i: !torch.vtensor<[2],si32>, %s: !torch.vtensor<[2],f32>) -> !torch.vtensor<[4],f32> {
  %int0 = torch.constant.int 0
  %str = torch.constant.str "median"
  %true = torch.constant.bool true
  // expected-error @+1 {{unsupported op 'torch.aten.scatter_reduce.two': scatter reduction 'median'}}
  %0 = torch.aten.scatter_reduce.two %x, %int0, %i, %s, %str, %true : !torch.vtensor<[4],f32>, !torch.int, !torch.vtensor<[2],si32>, !torch.vtensor<[2],f32>, !torch.str, !torch.bool -> !torch.vtensor<[4],f32>
  return %0 : !torch.vtensor<[4],f32>
}

// -----

// A view whose elements overlap (stride 0) cannot be written: PyTorch refuses too.
func.func @as_strided_scatter$overlap(%x: !torch.vtensor<[4],f32>, %s: !torch.vtensor<[3],f32>) -> !torch.vtensor<[4],f32> {
  %int0 = torch.constant.int 0
  %int3 = torch.constant.int 3
  %size = torch.prim.ListConstruct %int3 : (!torch.int) -> !torch.list<int>
  %stride = torch.prim.ListConstruct %int0 : (!torch.int) -> !torch.list<int>
  // expected-error @+1 {{unsupported op 'torch.aten.as_strided_scatter': a view (size [3], stride [0]) whose elements overlap: PyTorch cannot write to it either}}
  %0 = torch.aten.as_strided_scatter %x, %s, %size, %stride, %int0 : !torch.vtensor<[4],f32>, !torch.vtensor<[3],f32>, !torch.list<int>, !torch.list<int>, !torch.int -> !torch.vtensor<[4],f32>
  return %0 : !torch.vtensor<[4],f32>
}

// -----

// A view reaching past the input's last element.
func.func @as_strided_scatter$outside(%x: !torch.vtensor<[4],f32>, %s: !torch.vtensor<[3],f32>) -> !torch.vtensor<[4],f32> {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %size = torch.prim.ListConstruct %int3 : (!torch.int) -> !torch.list<int>
  %stride = torch.prim.ListConstruct %int2 : (!torch.int) -> !torch.list<int>
  // expected-error @+1 {{unsupported op 'torch.aten.as_strided_scatter': the view (size [3], stride [2], offset 1) reaches outside the 4 elements of the input}}
  %0 = torch.aten.as_strided_scatter %x, %s, %size, %stride, %int1 : !torch.vtensor<[4],f32>, !torch.vtensor<[3],f32>, !torch.list<int>, !torch.list<int>, !torch.int -> !torch.vtensor<[4],f32>
  return %0 : !torch.vtensor<[4],f32>
}
