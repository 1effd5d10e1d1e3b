// A second translation unit that includes hwy_gemm.hpp, linked into backend_hwy_gemm: the header is
// included by many TUs of one program, so its per-target functions, dispatch tables and API must not be
// defined twice (the link fails if they are) and must dispatch the same from here. Its Highway target
// policy must match hwy_gemm_test.cpp's, as every TU of a program must agree on HWY_TARGETS.
#define HWY_COMPILE_ALL_ATTAINABLE
#include "tessel/backend/hwy_gemm.hpp"

namespace hwy_gemm_second_tu {

const char* target() { return tessel::backend::hwy_gemm_target(); }

void gemm(const tessel::backend::matrix_view& a, const tessel::backend::matrix_view& b, std::size_t m, std::size_t n,
          std::size_t k, float* c, float* scratch) {
  tessel::backend::hwy_gemm_rows(a, b, 0, m, n, k, c, n, scratch);
}

}  // namespace hwy_gemm_second_tu
