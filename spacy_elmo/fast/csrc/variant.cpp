// What a kernel library was built for (spacy_elmo/fast/kernel_variants.py): the variant's name
// (-DSPACY_ELMO_VARIANT=avx2), the namespace its ops register in (torch.ops.spacy_elmo_avx2: one per
// variant, so that variants load side by side), and the instruction sets the compiler was allowed to
// use for the arithmetic (the macros it defines for the variant's flags), which the tests check.
#include <string>

#define SPACY_ELMO_TEXT(x) #x
#define SPACY_ELMO_NAME(x) SPACY_ELMO_TEXT(x)

extern "C" const char* spacy_elmo_variant() { return SPACY_ELMO_NAME(SPACY_ELMO_VARIANT); }

extern "C" const char* spacy_elmo_ops_namespace() { return "spacy_elmo_" SPACY_ELMO_NAME(SPACY_ELMO_VARIANT); }

extern "C" const char* spacy_elmo_instruction_sets() {
  static const std::string sets = std::string("")
#ifdef __SSE4_2__
                                  + " sse4_2"
#endif
#ifdef __AVX__
                                  + " avx"
#endif
#ifdef __AVX2__
                                  + " avx2"
#endif
#ifdef __FMA__
                                  + " fma"
#endif
#ifdef __AVX512F__
                                  + " avx512f"
#endif
#ifdef __AVX512BW__
                                  + " avx512bw"
#endif
#ifdef __AVX512BF16__
                                  + " avx512_bf16"
#endif
#ifdef __AVX512VNNI__
                                  + " avx512_vnni"
#endif
#ifdef __ARM_NEON
                                  + " neon"
#endif
      ;
  return sets.empty() ? "" : sets.c_str() + 1;
}
