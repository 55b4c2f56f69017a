// Dropout for training (spacy_elmo/fast/dropout.py): element i of a call is kept where a hash of
// (i, seed) falls below ``threshold`` (keep probability times 2^32), and kept values are scaled by
// ``scale`` (1 / keep). The mask is a function of the index and the seed alone: the same for any
// split between threads, for float32 and bfloat16, and again in the backward pass, which calls the
// same rows with the same seed on the gradient instead of storing the mask.
//
// The hash is two rounds of a 32-bit integer finalizer (shifts, xors and multiplies that the
// compiler vectorizes) over the index's two halves and the seed's: consecutive indices give
// unrelated bits, so neighbouring elements are dropped independently.
#include <cstdint>
#include <cstring>

namespace {

inline uint32_t finalize(uint32_t x) {
  x ^= x >> 16;
  x *= 0x21f0aaadu;
  x ^= x >> 15;
  x *= 0x735a2d97u;
  x ^= x >> 15;
  return x;
}

inline uint32_t bits_of(uint64_t index, uint64_t seed) {
  const uint32_t low = static_cast<uint32_t>(index) + static_cast<uint32_t>(seed);
  const uint32_t high = static_cast<uint32_t>(index >> 32) ^ static_cast<uint32_t>(seed >> 32);
  return finalize(finalize(low) ^ (high * 0x9e3779b9u));
}

inline float from_bf16(uint16_t x) {
  const uint32_t bits = static_cast<uint32_t>(x) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// float32 to bfloat16, rounded to nearest even (NaN kept a quiet NaN), as torch rounds
inline uint16_t to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace

// Elements [first, first + count) of a contiguous float32 (bf16 = 0) or bfloat16 (bf16 = 1) array:
// y[i] = x[i] * scale where bits_of(i, seed) < threshold, else 0. x and y may be the same array.
extern "C" void spacy_elmo_dropout_rows(const void* x, void* y, int bf16, int64_t first, int64_t count,
                                        uint64_t seed, uint32_t threshold, float scale) {
  if (bf16) {
    const uint16_t* in = static_cast<const uint16_t*>(x) + first;
    uint16_t* out = static_cast<uint16_t*>(y) + first;
    for (int64_t k = 0; k < count; ++k) {
      const bool keep = bits_of(static_cast<uint64_t>(first + k), seed) < threshold;
      out[k] = keep ? to_bf16(from_bf16(in[k]) * scale) : static_cast<uint16_t>(0);
    }
  } else {
    const float* in = static_cast<const float*>(x) + first;
    float* out = static_cast<float*>(y) + first;
    for (int64_t k = 0; k < count; ++k) {
      const bool keep = bits_of(static_cast<uint64_t>(first + k), seed) < threshold;
      out[k] = keep ? in[k] * scale : 0.0f;
    }
  }
}
