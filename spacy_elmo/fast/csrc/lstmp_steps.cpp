// All timesteps of a pair of LSTMP layers (both directions in lockstep) in one call: the loop of
// spacy_elmo/fast/in_place.py::run_in_place for float32 paired weights and packed input projections,
// without a Python round trip per operation; and the ops of the bf16 and int8 row products. The glue
// between torch and the arithmetic (cell_math.cpp, bf16_rows.cpp, int8_rows.cpp), which it calls:
// compiled once per build and linked into every variant (spacy_elmo/fast/kernel_build.py), its ops
// registered in the namespace the variant names (variant.cpp), as torch.ops.spacy_elmo_VARIANT.lstmp_steps.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/baddbmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

extern "C" void spacy_elmo_cell_rows(
    const float* gates, float* cell, float* hidden, int64_t rows, int64_t dim, float cell_clip, int clip_cell);
extern "C" void spacy_elmo_cell_rows_sum(const float* first, const uint16_t* product, float* cell, void* hidden,
                                         int hidden_bf16, float* scratch, int64_t rows, int64_t dim, float cell_clip,
                                         int clip_cell);
extern "C" void spacy_elmo_clip_rows(float* x, int64_t rows, int64_t width, int64_t row_stride, float limit);
extern "C" void spacy_elmo_train_cell_rows(float* gates, const void* first, int first_bf16, const uint16_t* product,
                                           float* cell,
                                           float* cell_raw, float* tanh_cell, void* hidden, int hidden_bf16,
                                           float* scratch, int64_t rows, int64_t dim, float cell_clip, int clip_cell);
extern "C" void spacy_elmo_train_cell_backward_rows(const float* acts, const float* cell_raw, const float* tanh_cell,
                                                    const float* previous, int clip_previous, const void* d_hidden,
                                                    int d_hidden_bf16, float* dc, void* d_gates, int d_gates_bf16,
                                                    float* scratch, int64_t rows, int64_t dim, float cell_clip,
                                                    int clip_cell);
extern "C" void spacy_elmo_int8_cells(const int8_t* packed, const int32_t* offsets, const float* w_scales,
                                      const float* bias, const uint8_t* q, int64_t q_stride, const float* x_scales,
                                      int64_t rows, int64_t n_quads, int64_t dim, int64_t first, int64_t last,
                                      const float* add, int64_t add_stride, float* cell, int64_t cell_stride,
                                      float* hidden, int64_t hidden_stride, float cell_clip, int clip_cell);
extern "C" void spacy_elmo_dropout_rows(const void* x, void* y, int bf16, int64_t first, int64_t count, uint64_t seed,
                                        uint32_t threshold, float scale);
extern "C" const char* spacy_elmo_variant();
extern "C" const char* spacy_elmo_ops_namespace();
extern "C" const char* spacy_elmo_instruction_sets();
extern "C" int spacy_elmo_bf16_native();
extern "C" void spacy_elmo_bf16_pairs(const float* x, int64_t width, uint32_t* pairs);
extern "C" void spacy_elmo_bf16_rows(const uint16_t* packed, const uint32_t* pairs, int64_t rows, int64_t n_pairs,
                                     int64_t out_features, int64_t first, int64_t last, float* y, int64_t y_stride,
                                     const float* add, int64_t add_stride);
extern "C" int spacy_elmo_int8_native();
extern "C" float spacy_elmo_int8_quantize(const float* x, int64_t width, int64_t padded, uint8_t* q);
extern "C" void spacy_elmo_int8_rows(const int8_t* packed, const int32_t* offsets, const float* w_scales,
                                     const float* bias, const uint8_t* q, int64_t q_stride, const float* x_scales,
                                     int64_t rows, int64_t n_quads, int64_t out_features, int64_t first, int64_t last,
                                     float* y, int64_t y_stride, const float* add, int64_t add_stride);

namespace {

// x @ W^T (+ add) on weights prepacked for oneDNN (spacy_elmo/fast/prepacked.py::product): torch's
// mkldnn::_linear_pointwise ops, one row computed as two equal rows so that it is summed as the rows
// of a batch are. x: (n, in) and add: (n, out), rows contiguous. Returns (max(n, 2), out); row r is row r's.
at::Tensor onednn_product(const at::Tensor& x, const at::Tensor& packed, const at::Tensor* add) {
  static const auto linear =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("mkldnn::_linear_pointwise", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, c10::string_view,
                            c10::List<std::optional<at::Scalar>>, std::optional<c10::string_view>)>();
  static const auto linear_add =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("mkldnn::_linear_pointwise", "binary")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                            c10::string_view)>();
  const bool one = x.size(0) == 1;
  const at::Tensor rows = one ? x.expand({2, x.size(1)}).contiguous() : x.contiguous();
  if (add == nullptr) {
    return linear.call(rows, packed, std::nullopt, "none", c10::List<std::optional<at::Scalar>>(), std::nullopt);
  }
  const at::Tensor other = one ? add->expand({2, add->size(1)}).contiguous() : add->contiguous();
  return linear_add.call(rows, other, packed, std::nullopt, "add");
}

// projected: (D, sum(batch_sizes), 4 * dim), the running rows timestep after timestep;
// h0: (D, B, proj); cell: (D, B, dim), updated in place; w_state: (D, proj, 4 * dim);
// w_proj: (D, dim, proj); out: (T, D, B, proj), zero-filled, receives every step's output.
// packed_state, packed_proj: empty (the products on w_state and w_proj through torch), or D weights
// each prepacked for oneDNN (spacy_elmo/fast/prepacked.py::pack: (4 * dim, proj) and (proj, dim)),
// which the products then take (the same weights as w_state and w_proj).
void lstmp_steps(
    const at::Tensor& projected, const at::Tensor& h0, const at::Tensor& cell, at::IntArrayRef batch_sizes,
    const at::Tensor& w_state, const at::Tensor& w_proj, std::optional<double> cell_clip,
    std::optional<double> proj_clip, const at::Tensor& out, at::TensorList packed_state, at::TensorList packed_proj) {
  for (const at::Tensor* t : {&projected, &h0, &cell, &w_state, &w_proj, &out}) {
    TORCH_CHECK(t->device().is_cpu() && t->scalar_type() == at::kFloat, "lstmp_steps: float32 CPU tensors only");
  }
  TORCH_CHECK(projected.dim() == 3 && h0.dim() == 3 && cell.dim() == 3 && w_state.dim() == 3 && w_proj.dim() == 3,
              "lstmp_steps: (D, rows, width) tensors");
  TORCH_CHECK(projected.is_contiguous() && cell.is_contiguous() && out.is_contiguous(), "lstmp_steps: contiguous buffers");
  const int64_t n_dir = projected.size(0), batch = h0.size(1), gates_width = w_state.size(2);
  const int64_t dim = gates_width / 4, proj = w_proj.size(2);
  TORCH_CHECK(cell.size(0) == n_dir && cell.size(1) == batch && cell.size(2) == dim, "lstmp_steps: cell shape");
  TORCH_CHECK(h0.size(0) == n_dir && h0.size(2) == proj && w_state.size(0) == n_dir && w_proj.size(0) == n_dir &&
                  w_state.size(1) == proj && w_proj.size(1) == dim && gates_width == 4 * dim,
              "lstmp_steps: weight or state shape");
  TORCH_CHECK(out.dim() == 4 && out.size(0) >= static_cast<int64_t>(batch_sizes.size()) && out.size(1) == n_dir &&
                  out.size(2) == batch && out.size(3) == proj,
              "lstmp_steps: out shape");
  int64_t total = 0;
  for (size_t t = 0; t < batch_sizes.size(); ++t) {
    const int64_t n = batch_sizes[t];
    TORCH_CHECK(n >= 0 && n <= batch && (t == 0 || n <= batch_sizes[t - 1]), "lstmp_steps: batch sizes must not grow");
    total += n;
  }
  TORCH_CHECK(projected.size(1) == total && projected.size(2) == gates_width, "lstmp_steps: projected shape");
  const bool onednn = !packed_state.empty();
  TORCH_CHECK(packed_state.size() == packed_proj.size() && (!onednn || static_cast<int64_t>(packed_state.size()) == n_dir),
              "lstmp_steps: one prepacked weight per direction for both products, or none");
  for (size_t d = 0; onednn && d < packed_state.size(); ++d) {
    TORCH_CHECK(packed_state[d].is_mkldnn() && packed_proj[d].is_mkldnn() && packed_state[d].size(0) == gates_width &&
                    packed_state[d].size(1) == proj && packed_proj[d].size(0) == proj && packed_proj[d].size(1) == dim,
                "lstmp_steps: prepacked weights of the wrong shape");
  }
  const float clip_c = cell_clip ? static_cast<float>(*cell_clip) : 0.0f;
  at::Tensor gates_buffer = at::empty({n_dir * batch * gates_width}, projected.options());
  at::Tensor hidden_buffer = at::empty({n_dir * batch * dim}, projected.options());
  at::Tensor h = h0;
  int64_t offset = 0;
  for (size_t t = 0; t < batch_sizes.size(); ++t) {
    const int64_t n = batch_sizes[t];
    if (n == 0) break;
    at::Tensor gates = gates_buffer.narrow(0, 0, n_dir * n * gates_width).view({n_dir, n, gates_width});
    at::Tensor hidden = hidden_buffer.narrow(0, 0, n_dir * n * dim).view({n_dir, n, dim});
    // each direction's gates: rows of the gates buffer, or of oneDNN's product
    std::vector<at::Tensor> direction_gates(n_dir);
    std::vector<const float*> g(n_dir);
    if (onednn) {
      for (int64_t d = 0; d < n_dir; ++d) {
        const at::Tensor add = projected.select(0, d).narrow(0, offset, n);
        direction_gates[d] = onednn_product(h.select(0, d).narrow(0, 0, n), packed_state[d], &add);
        g[d] = direction_gates[d].data_ptr<float>();
      }
    } else {
      at::baddbmm_out(gates, projected.narrow(1, offset, n), n == batch ? h : h.narrow(1, 0, n), w_state);
      for (int64_t d = 0; d < n_dir; ++d) g[d] = gates.data_ptr<float>() + d * n * gates_width;
    }
    offset += n;
    float* c = cell.data_ptr<float>();
    float* hid = hidden.data_ptr<float>();
    // rows of both directions, split between threads when there are many
    at::parallel_for(0, n_dir * n, std::max<int64_t>(1, 32768 / (dim + 1)), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t d = row / n, r = row % n;
        spacy_elmo_cell_rows(g[d] + r * gates_width, c + (d * batch + r) * dim, hid + row * dim, 1, dim, clip_c,
                             cell_clip.has_value());
      }
    });
    at::Tensor step_out = out.select(0, static_cast<int64_t>(t));
    at::Tensor dest = n == batch ? step_out : step_out.narrow(1, 0, n);
    if (onednn) {
      for (int64_t d = 0; d < n_dir; ++d) {
        dest.select(0, d).copy_(onednn_product(hidden.select(0, d), packed_proj[d], nullptr).narrow(0, 0, n));
      }
    } else if (n == batch) {
      at::bmm_out(dest, hidden, w_proj);
    } else {
      dest.copy_(at::bmm(hidden, w_proj));
    }
    if (proj_clip) {
      float* o = step_out.data_ptr<float>();
      for (int64_t d = 0; d < n_dir; ++d) {
        spacy_elmo_clip_rows(o + d * batch * proj, n, proj, proj, static_cast<float>(*proj_clip));
      }
    }
    h = step_out;
  }
}

// out[d] = bf16(bf16(x[d]) @ W[d]) (+ add[d]) for D weight matrices packed by
// spacy_elmo/fast/bf16_rows.py::pack as (D, blocks, pairs of inputs, 128) bfloat16 (csrc/bf16_rows.cpp).
// x: (D, n, in), out and add: (D, n, out), float32 CPU tensors whose rows are contiguous.
void bf16_rows(const at::Tensor& x, const at::Tensor& packed, const std::optional<at::Tensor>& add,
               const at::Tensor& out) {
  TORCH_CHECK(packed.device().is_cpu() && packed.scalar_type() == at::kBFloat16 && packed.is_contiguous() &&
                  packed.dim() == 4 && packed.size(3) == 128,
              "bf16_rows: packed (D, blocks, pairs, 128) bfloat16 weights");
  const int64_t n_dir = packed.size(0), blocks = packed.size(1), n_pairs = packed.size(2);
  const at::Tensor* operands[] = {&x, &out, add ? &*add : nullptr};
  for (const at::Tensor* t : operands) {
    if (t == nullptr) continue;
    TORCH_CHECK(t->device().is_cpu() && t->scalar_type() == at::kFloat && t->dim() == 3 && t->size(0) == n_dir &&
                    t->size(1) == x.size(1) && t->stride(2) == 1,
                "bf16_rows: (D, n, width) float32 CPU operands with contiguous rows");
  }
  const int64_t rows = x.size(1), out_features = out.size(2);
  TORCH_CHECK((x.size(2) + 1) / 2 == n_pairs && (out_features + 63) / 64 == blocks && (!add || add->size(2) == out_features),
              "bf16_rows: widths do not match the packed weights");
  if (rows == 0) return;
  at::Tensor pairs = at::empty({n_dir, rows, n_pairs}, x.options().dtype(at::kInt));
  auto* p = reinterpret_cast<uint32_t*>(pairs.data_ptr<int32_t>());
  for (int64_t d = 0; d < n_dir; ++d) {
    for (int64_t r = 0; r < rows; ++r) {
      spacy_elmo_bf16_pairs(x.data_ptr<float>() + d * x.stride(0) + r * x.stride(1), x.size(2),
                            p + (d * rows + r) * n_pairs);
    }
  }
  const auto* w = reinterpret_cast<const uint16_t*>(packed.data_ptr<at::BFloat16>());
  float* y = out.data_ptr<float>();
  const float* plus = add ? add->data_ptr<float>() : nullptr;
  // the blocks of all directions split between threads (two cores: one direction each)
  at::parallel_for(0, n_dir * blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end;) {
      const int64_t d = i / blocks, first = i % blocks, last = std::min(blocks, first + (end - i));
      spacy_elmo_bf16_rows(w + d * blocks * n_pairs * 128, p + d * rows * n_pairs, rows, n_pairs, out_features, first,
                           last, y + d * out.stride(0), out.stride(1), plus ? plus + d * add->stride(0) : nullptr,
                           plus ? add->stride(1) : 0);
      i += last - first;
    }
  });
}

bool bf16_native() { return spacy_elmo_bf16_native() != 0; }

// Each row of x (D, n, width) quantized on its own (int8_rows.cpp), zero-padded to ``padded`` levels:
// the levels (D * n * padded) and the scales (D * n), the rows split between threads (a row's scale and
// levels do not depend on the split).
std::pair<at::Tensor, at::Tensor> quantized_rows(const at::Tensor& x, int64_t padded) {
  const int64_t n_dir = x.size(0), rows = x.size(1), width = x.size(2);
  at::Tensor q = at::empty({n_dir * rows * padded}, x.options().dtype(at::kByte));
  at::Tensor x_scales = at::empty({n_dir * rows}, x.options());
  uint8_t* qp = q.data_ptr<uint8_t>();
  float* sx = x_scales.data_ptr<float>();
  const float* xp = x.data_ptr<float>();
  at::parallel_for(0, n_dir * rows, std::max<int64_t>(1, 16384 / (width + 1)), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t d = i / rows, r = i % rows;
      sx[i] = spacy_elmo_int8_quantize(xp + d * x.stride(0) + r * x.stride(1), width, padded, qp + i * padded);
    }
  });
  return {q, x_scales};
}

// What both int8 ops read besides their rows: the packed weights' per-output offsets, scales and
// bias, checked for ``out_features`` outputs a direction, and x quantized row by row.
struct Int8Operands {
  at::Tensor q, x_scales;  // kept alive while the pointers are read
  int64_t padded = 0;
  const int8_t* w = nullptr;
  const int32_t* off = nullptr;
  const float* ws = nullptr;
  const float* b = nullptr;
};

Int8Operands int8_operands(const at::Tensor& x, const at::Tensor& packed, const at::Tensor& offsets,
                           const at::Tensor& scales, const std::optional<at::Tensor>& bias, int64_t out_features,
                           const char* name) {
  const int64_t n_dir = packed.size(0);
  TORCH_CHECK(offsets.scalar_type() == at::kInt && scales.scalar_type() == at::kFloat && offsets.is_contiguous() &&
                  scales.is_contiguous() && offsets.numel() == n_dir * out_features &&
                  scales.numel() == n_dir * out_features,
              name, ": (D, out) int32 offsets and float32 scales");
  TORCH_CHECK(!bias || (bias->scalar_type() == at::kFloat && bias->is_contiguous() && bias->numel() == n_dir * out_features),
              name, ": (D, out) float32 bias");
  Int8Operands operands;
  operands.padded = 4 * packed.size(2);
  if (x.size(1) > 0) std::tie(operands.q, operands.x_scales) = quantized_rows(x, operands.padded);
  operands.w = packed.data_ptr<int8_t>();
  operands.off = offsets.data_ptr<int32_t>();
  operands.ws = scales.data_ptr<float>();
  operands.b = bias ? bias->data_ptr<float>() : nullptr;
  return operands;
}

// out[d] = int8 product of x[d] (each row quantized on its own) with D weight matrices packed by
// spacy_elmo/fast/int8_rows.py::pack as (D, blocks, groups of 4 inputs, 256) int8, their per-output
// offsets (D, out) int32 and scales (D, out) float32 (csrc/int8_rows.cpp); (+ bias[d]) (+ add[d]).
// x: (D, n, in), out and add: (D, n, out), float32 CPU tensors whose rows are contiguous; bias (D, out).
void int8_rows(const at::Tensor& x, const at::Tensor& packed, const at::Tensor& offsets, const at::Tensor& scales,
               const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& add, const at::Tensor& out) {
  TORCH_CHECK(packed.device().is_cpu() && packed.scalar_type() == at::kChar && packed.is_contiguous() &&
                  packed.dim() == 4 && packed.size(3) == 256,
              "int8_rows: packed (D, blocks, groups, 256) int8 weights");
  const int64_t n_dir = packed.size(0), blocks = packed.size(1), n_quads = packed.size(2);
  const at::Tensor* operands[] = {&x, &out, add ? &*add : nullptr};
  for (const at::Tensor* t : operands) {
    if (t == nullptr) continue;
    TORCH_CHECK(t->device().is_cpu() && t->scalar_type() == at::kFloat && t->dim() == 3 && t->size(0) == n_dir &&
                    t->size(1) == x.size(1) && t->stride(2) == 1,
                "int8_rows: (D, n, width) float32 CPU operands with contiguous rows");
  }
  const int64_t rows = x.size(1), width = x.size(2), out_features = out.size(2);
  TORCH_CHECK((width + 3) / 4 == n_quads && (out_features + 63) / 64 == blocks && (!add || add->size(2) == out_features),
              "int8_rows: widths do not match the packed weights");
  const Int8Operands in = int8_operands(x, packed, offsets, scales, bias, out_features, "int8_rows");
  if (rows == 0) return;
  const int64_t padded = in.padded;
  const uint8_t* qp = in.q.data_ptr<uint8_t>();
  const float* sx = in.x_scales.data_ptr<float>();
  const int8_t* w = in.w;
  const int32_t* off = in.off;
  const float* ws = in.ws;
  const float* b = in.b;
  float* y = out.data_ptr<float>();
  const float* plus = add ? add->data_ptr<float>() : nullptr;
  // the blocks of all directions split between threads (two cores: one direction each)
  at::parallel_for(0, n_dir * blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end;) {
      const int64_t d = i / blocks, first = i % blocks, last = std::min(blocks, first + (end - i));
      spacy_elmo_int8_rows(w + d * blocks * n_quads * 256, off + d * out_features, ws + d * out_features,
                           b ? b + d * out_features : nullptr, qp + d * rows * padded, padded, sx + d * rows, rows,
                           n_quads, out_features, first, last, y + d * out.stride(0), out.stride(1),
                           plus ? plus + d * add->stride(0) : nullptr, plus ? add->stride(1) : 0);
      i += last - first;
    }
  });
}

bool int8_native() { return spacy_elmo_int8_native() != 0; }

// A timestep of the int8 in-place loop in one call (int8_rows.cpp's spacy_elmo_int8_cells): the recurrent
// product of x (D, n, P) with weights packed by unit (int8_rows.py::pack_cells: (D, blocks, groups, 256),
// 16 units a block) plus bias (D, 4 * dim) and add (D, n, 4 * dim, the step's input products), then the
// cells: cell (D, B, dim), its first n rows of each direction updated, hidden (D, n, dim) written.
// The gates and cells equal int8_rows' product followed by lstm_cells, bit for bit.
void int8_cells(const at::Tensor& x, const at::Tensor& packed, const at::Tensor& offsets, const at::Tensor& scales,
                const std::optional<at::Tensor>& bias, const at::Tensor& add, const at::Tensor& cell,
                const at::Tensor& hidden, std::optional<double> cell_clip) {
  TORCH_CHECK(packed.device().is_cpu() && packed.scalar_type() == at::kChar && packed.is_contiguous() &&
                  packed.dim() == 4 && packed.size(3) == 256,
              "int8_cells: packed (D, blocks, groups, 256) int8 weights");
  const int64_t n_dir = packed.size(0), blocks = packed.size(1), n_quads = packed.size(2);
  for (const at::Tensor* t : {&x, &add, &hidden}) {
    TORCH_CHECK(t->device().is_cpu() && t->scalar_type() == at::kFloat && t->dim() == 3 && t->size(0) == n_dir &&
                    t->size(1) == x.size(1) && t->stride(2) == 1,
                "int8_cells: (D, n, width) float32 CPU x, add and hidden with contiguous rows");
  }
  const int64_t rows = x.size(1), width = x.size(2), dim = hidden.size(2);
  TORCH_CHECK(cell.device().is_cpu() && cell.scalar_type() == at::kFloat && cell.is_contiguous() && cell.dim() == 3 &&
                  cell.size(0) == n_dir && cell.size(1) >= rows && cell.size(2) == dim,
              "int8_cells: contiguous float32 cell (D, B >= n, dim)");
  TORCH_CHECK(16 * blocks == dim && (width + 3) / 4 == n_quads && add.size(2) == 4 * dim,
              "int8_cells: weights of 16 units a block for dim units, of x's width, and add (D, n, 4 * dim)");
  const Int8Operands in = int8_operands(x, packed, offsets, scales, bias, 4 * dim, "int8_cells");
  if (rows == 0) return;
  const float* plus = add.data_ptr<float>();
  float* c = cell.data_ptr<float>();
  float* h = hidden.data_ptr<float>();
  const float clip = cell_clip ? static_cast<float>(*cell_clip) : 0.0f;
  const int64_t width_out = 4 * dim, batch = cell.size(1);
  // the blocks (16 units each) of all directions split between threads
  at::parallel_for(0, n_dir * blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end;) {
      const int64_t d = i / blocks, first = i % blocks, last = std::min(blocks, first + (end - i));
      spacy_elmo_int8_cells(in.w + d * blocks * n_quads * 256, in.off + d * width_out, in.ws + d * width_out,
                            in.b ? in.b + d * width_out : nullptr, in.q.data_ptr<uint8_t>() + d * rows * in.padded,
                            in.padded, in.x_scales.data_ptr<float>() + d * rows, rows,
                            n_quads, dim, first, last, plus + d * add.stride(0), add.stride(1), c + d * batch * dim,
                            dim, h + d * hidden.stride(0), hidden.stride(1), clip, cell_clip.has_value());
      i += last - first;
    }
  });
}

// One timestep's cells for the in-place loop of the reduced precisions (spacy_elmo/fast/in_place.py):
// gates (D, n, 4 * dim) of the running rows; cell (D, B, dim), its first n rows of each direction
// updated; hidden (D, n, dim) written. The arithmetic of lstmp_steps' own loop (cell_math.cpp).
void lstm_cells(const at::Tensor& gates, const at::Tensor& cell, const at::Tensor& hidden, std::optional<double> cell_clip) {
  TORCH_CHECK(gates.dim() == 3 && cell.dim() == 3 && hidden.dim() == 3, "lstm_cells: (D, rows, width) tensors");
  const int64_t n_dir = gates.size(0), n = gates.size(1), dim = cell.size(2), batch = cell.size(1);
  TORCH_CHECK(gates.scalar_type() == at::kFloat && cell.scalar_type() == at::kFloat && hidden.scalar_type() == at::kFloat &&
                  gates.is_contiguous() && cell.is_contiguous() && hidden.is_contiguous(),
              "lstm_cells: contiguous float32 gates, cells and hidden states");
  TORCH_CHECK(gates.size(2) == 4 * dim && cell.size(0) == n_dir && hidden.size(0) == n_dir && hidden.size(1) == n &&
                  hidden.size(2) == dim && n <= batch,
              "lstm_cells: gates (D, n, 4 * dim), cell (D, B >= n, dim), hidden (D, n, dim)");
  const float* g = gates.data_ptr<float>();
  float* c = cell.data_ptr<float>();
  float* h = hidden.data_ptr<float>();
  const float clip = cell_clip ? static_cast<float>(*cell_clip) : 0.0f;
  at::parallel_for(0, n_dir * n, std::max<int64_t>(1, 32768 / (dim + 1)), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t d = row / n, r = row % n;
      spacy_elmo_cell_rows(g + row * 4 * dim, c + (d * batch + r) * dim, h + row * dim, 1, dim, clip,
                           cell_clip.has_value());
    }
  });
}

void check_rows(const at::Tensor& x, int64_t n, int64_t width, const char* name, bool bf16_allowed);

// One direction's cells of a timestep whose recurrent product ran in bfloat16 (in_place.py's LowCells):
// first (n, 4 * dim) float32 (the step's input products), product (n, 4 * dim) bfloat16, cell (n, dim)
// updated, hidden (n, dim) float32 or bfloat16 written; rows contiguous. The arithmetic of lstm_cells
// on the gates first + product, summed in float (cell_math.cpp).
void lstm_cells_sum(const at::Tensor& first, const at::Tensor& product, const at::Tensor& cell, const at::Tensor& hidden,
                    std::optional<double> cell_clip) {
  const int64_t n = cell.size(0), dim = cell.dim() == 2 ? cell.size(1) : 0;
  check_rows(first, n, 4 * dim, "lstm_cells_sum: first", false);
  check_rows(product, n, 4 * dim, "lstm_cells_sum: product", true);
  check_rows(cell, n, dim, "lstm_cells_sum: cell", false);
  check_rows(hidden, n, dim, "lstm_cells_sum: hidden", true);
  TORCH_CHECK(product.scalar_type() == at::kBFloat16, "lstm_cells_sum: product must be bfloat16");
  const bool bf16 = hidden.scalar_type() == at::kBFloat16;
  const float* f = first.data_ptr<float>();
  const auto* p = reinterpret_cast<const uint16_t*>(product.data_ptr());
  float* c = cell.data_ptr<float>();
  char* h = static_cast<char*>(hidden.data_ptr());
  const int64_t h_row = dim * (bf16 ? 2 : 4);
  const float clip = cell_clip ? static_cast<float>(*cell_clip) : 0.0f;
  at::parallel_for(0, n, std::max<int64_t>(1, 32768 / (dim + 1)), [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(dim);
    spacy_elmo_cell_rows_sum(f + begin * 4 * dim, p + begin * 4 * dim, c + begin * dim, h + begin * h_row, bf16,
                             scratch.data(), end - begin, dim, clip, cell_clip.has_value());
  });
}

// rows of a timestep as the training step's cell kernels take them: (n, width), contiguous, float32
// (or bfloat16 where allowed)
void check_rows(const at::Tensor& x, int64_t n, int64_t width, const char* name, bool bf16_allowed) {
  const bool dtype_ok = x.scalar_type() == at::kFloat || (bf16_allowed && x.scalar_type() == at::kBFloat16);
  TORCH_CHECK(dtype_ok && x.dim() == 2 && x.size(0) == n && x.size(1) == width && x.is_contiguous(),
              name, " must be contiguous (", n, ", ", width, ") float32 rows",
              bf16_allowed ? " (or bfloat16)" : "");
}

int64_t cell_grain(int64_t dim) { return std::max<int64_t>(1, 32768 / (4 * dim + 1)); }

// The training step's elementwise forward for one timestep's running rows (cell_math.cpp): the gates
// are gates as they are, first + product (a product run in bfloat16) where product is given, or
// gates + first (a float32 product in gates, first float32) where first comes alone.
void train_cells(const at::Tensor& gates, const std::optional<at::Tensor>& first, const std::optional<at::Tensor>& product,
                 const at::Tensor& cell, const at::Tensor& cell_raw, const at::Tensor& tanh_cell, const at::Tensor& hidden,
                 std::optional<double> cell_clip) {
  const int64_t n = cell.size(0), dim = cell.dim() == 2 ? cell.size(1) : 0;
  check_rows(gates, n, 4 * dim, "train_cells: gates", false);
  check_rows(cell, n, dim, "train_cells: cell", false);
  check_rows(cell_raw, n, dim, "train_cells: cell_raw", false);
  check_rows(tanh_cell, n, dim, "train_cells: tanh_cell", false);
  check_rows(hidden, n, dim, "train_cells: hidden", true);
  TORCH_CHECK(first.has_value() || !product.has_value(), "train_cells: a product comes with first");
  const char* first_rows = nullptr;
  const uint16_t* product_rows = nullptr;
  bool first_bf16 = false;
  if (first && !product) {  // gates hold a float32 product: first (float32) is added to it
    check_rows(*first, n, 4 * dim, "train_cells: first", false);
    TORCH_CHECK(first->data_ptr() != gates.data_ptr(), "train_cells: first must not be gates");
    first_rows = static_cast<const char*>(first->data_ptr());
  }
  if (product) {
    check_rows(*first, n, 4 * dim, "train_cells: first", true);
    first_bf16 = first->scalar_type() == at::kBFloat16;
    check_rows(*product, n, 4 * dim, "train_cells: product", true);
    TORCH_CHECK(product->scalar_type() == at::kBFloat16, "train_cells: product must be bfloat16");
    TORCH_CHECK(first->data_ptr() != gates.data_ptr(), "train_cells: first must not be gates");
    first_rows = static_cast<const char*>(first->data_ptr());
    product_rows = reinterpret_cast<const uint16_t*>(product->data_ptr());
  }
  const bool bf16 = hidden.scalar_type() == at::kBFloat16;
  float* g = gates.data_ptr<float>();
  float* c = cell.data_ptr<float>();
  float* raw = cell_raw.data_ptr<float>();
  float* tc = tanh_cell.data_ptr<float>();
  char* h = static_cast<char*>(hidden.data_ptr());
  const int64_t h_row = dim * (bf16 ? 2 : 4);
  const float clip = cell_clip ? static_cast<float>(*cell_clip) : 0.0f;
  at::parallel_for(0, n, cell_grain(dim), [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(dim);
    spacy_elmo_train_cell_rows(g + begin * 4 * dim,
                               first_rows ? first_rows + begin * 4 * dim * (first_bf16 ? 2 : 4) : nullptr, first_bf16,
                               product_rows ? product_rows + begin * 4 * dim : nullptr, c + begin * dim,
                               raw + begin * dim, tc + begin * dim, h + begin * h_row, bf16, scratch.data(),
                               end - begin, dim, clip, cell_clip.has_value());
  });
}

// Its backward (cell_math.cpp): writes d_gates, turns dc into the gradient of the starting cell.
void train_cells_backward(const at::Tensor& acts, const at::Tensor& cell_raw, const at::Tensor& tanh_cell,
                          const at::Tensor& previous, bool clip_previous, const at::Tensor& d_hidden, const at::Tensor& dc,
                          const at::Tensor& d_gates, std::optional<double> cell_clip) {
  const int64_t n = dc.size(0), dim = dc.dim() == 2 ? dc.size(1) : 0;
  check_rows(acts, n, 4 * dim, "train_cells_backward: acts", false);
  check_rows(cell_raw, n, dim, "train_cells_backward: cell_raw", false);
  check_rows(tanh_cell, n, dim, "train_cells_backward: tanh_cell", false);
  check_rows(previous, n, dim, "train_cells_backward: previous", false);
  check_rows(d_hidden, n, dim, "train_cells_backward: d_hidden", true);
  check_rows(dc, n, dim, "train_cells_backward: dc", false);
  check_rows(d_gates, n, 4 * dim, "train_cells_backward: d_gates", true);
  const bool dh_bf16 = d_hidden.scalar_type() == at::kBFloat16, dg_bf16 = d_gates.scalar_type() == at::kBFloat16;
  const float* a = acts.data_ptr<float>();
  const float* raw = cell_raw.data_ptr<float>();
  const float* tc = tanh_cell.data_ptr<float>();
  const float* prev = previous.data_ptr<float>();
  const char* dh = static_cast<const char*>(d_hidden.data_ptr());
  float* dc_ = dc.data_ptr<float>();
  char* dg = static_cast<char*>(d_gates.data_ptr());
  const int64_t dh_row = dim * (dh_bf16 ? 2 : 4), dg_row = 4 * dim * (dg_bf16 ? 2 : 4);
  const float clip = cell_clip ? static_cast<float>(*cell_clip) : 0.0f;
  at::parallel_for(0, n, cell_grain(dim), [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(5 * dim);
    spacy_elmo_train_cell_backward_rows(a + begin * 4 * dim, raw + begin * dim, tc + begin * dim, prev + begin * dim,
                                        clip_previous, dh + begin * dh_row, dh_bf16, dc_ + begin * dim,
                                        dg + begin * dg_row, dg_bf16, scratch.data(), end - begin, dim, clip,
                                        cell_clip.has_value());
  });
}

// Training's dropout (cell_math.cpp): out = x * scale where the hash of (element, seed) falls below
// threshold, else 0, for contiguous float32 or bfloat16 x (out may be x). The mask depends on the
// element's index and the seed only, so the threads' split changes nothing.
void dropout(const at::Tensor& x, const at::Tensor& out, int64_t seed, int64_t threshold, double scale) {
  TORCH_CHECK(x.device().is_cpu() && out.device().is_cpu(), "dropout: CPU tensors");
  TORCH_CHECK(x.scalar_type() == out.scalar_type() &&
                  (x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16),
              "dropout: float32 or bfloat16 x and out of the same dtype");
  TORCH_CHECK(x.is_contiguous() && out.is_contiguous() && x.numel() == out.numel(),
              "dropout: contiguous x and out of the same size");
  TORCH_CHECK(threshold >= 0 && threshold <= 0xffffffffLL, "dropout: threshold within 0..2^32-1");
  const bool bf16 = x.scalar_type() == at::kBFloat16;
  const void* in = x.data_ptr();
  void* dest = out.data_ptr();
  const uint64_t key = static_cast<uint64_t>(seed);
  const uint32_t below = static_cast<uint32_t>(threshold);
  const float factor = static_cast<float>(scale);
  at::parallel_for(0, x.numel(), 32768, [&](int64_t begin, int64_t end) {
    spacy_elmo_dropout_rows(in, dest, bf16, begin, end - begin, key, below, factor);
  });
}

std::string variant() { return spacy_elmo_variant(); }

std::string instruction_sets() { return spacy_elmo_instruction_sets(); }

void define_ops(torch::Library& m) {
  m.def(
      "lstmp_steps(Tensor projected, Tensor h0, Tensor(a!) cell, int[] batch_sizes, Tensor w_state, Tensor w_proj, "
      "float? cell_clip, float? proj_clip, Tensor(b!) out, Tensor[] packed_state, Tensor[] packed_proj) -> ()");
  m.impl("lstmp_steps", c10::DispatchKey::CPU, TORCH_FN(lstmp_steps));
  // prepacked weights are oneDNN tensors, which send the call to this key
  m.impl("lstmp_steps", c10::DispatchKey::MkldnnCPU, TORCH_FN(lstmp_steps));
  m.def("bf16_rows(Tensor x, Tensor packed, Tensor? add, Tensor(a!) out) -> ()");
  m.impl("bf16_rows", c10::DispatchKey::CPU, TORCH_FN(bf16_rows));
  m.def("bf16_native() -> bool", TORCH_FN(bf16_native));
  m.def("int8_rows(Tensor x, Tensor packed, Tensor offsets, Tensor scales, Tensor? bias, Tensor? add, Tensor(a!) out) -> ()");
  m.impl("int8_rows", c10::DispatchKey::CPU, TORCH_FN(int8_rows));
  m.def("int8_native() -> bool", TORCH_FN(int8_native));
  m.def("int8_cells(Tensor x, Tensor packed, Tensor offsets, Tensor scales, Tensor? bias, Tensor add, Tensor(a!) cell, "
        "Tensor(b!) hidden, float? cell_clip) -> ()");
  m.impl("int8_cells", c10::DispatchKey::CPU, TORCH_FN(int8_cells));
  m.def("train_cells(Tensor(a!) gates, Tensor? first, Tensor? product, Tensor(b!) cell, Tensor(c!) cell_raw, "
        "Tensor(d!) tanh_cell, Tensor(e!) hidden, float? cell_clip) -> ()");
  m.impl("train_cells", c10::DispatchKey::CPU, TORCH_FN(train_cells));
  m.def("train_cells_backward(Tensor acts, Tensor cell_raw, Tensor tanh_cell, Tensor previous, bool clip_previous, "
        "Tensor d_hidden, Tensor(a!) dc, Tensor(b!) d_gates, float? cell_clip) -> ()");
  m.impl("train_cells_backward", c10::DispatchKey::CPU, TORCH_FN(train_cells_backward));
  m.def("lstm_cells_sum(Tensor first, Tensor product, Tensor(a!) cell, Tensor(b!) hidden, float? cell_clip) -> ()");
  m.impl("lstm_cells_sum", c10::DispatchKey::CPU, TORCH_FN(lstm_cells_sum));
  m.def("lstm_cells(Tensor gates, Tensor(a!) cell, Tensor(b!) hidden, float? cell_clip) -> ()");
  m.impl("lstm_cells", c10::DispatchKey::CPU, TORCH_FN(lstm_cells));
  m.def("dropout(Tensor x, Tensor(a!) out, int seed, int threshold, float scale) -> ()");
  m.impl("dropout", c10::DispatchKey::CPU, TORCH_FN(dropout));
  m.def("variant() -> str", TORCH_FN(variant));
  m.def("instruction_sets() -> str", TORCH_FN(instruction_sets));
}

// TORCH_LIBRARY's registration, with the namespace known only when the library is linked
torch::Library registered() {
  torch::Library m(torch::Library::DEF, spacy_elmo_ops_namespace(), std::nullopt, __FILE__, __LINE__);
  define_ops(m);
  return m;
}

const torch::Library registration = registered();

}  // namespace
