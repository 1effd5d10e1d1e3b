// A second translation unit that calls the GEMM, linked into backend_hwy_gemm: many TUs of one program
// call the library's kernels, and they must all dispatch the same (a target switch made in one is seen in
// the other).
#include "tessel/kernels/gemm.hpp"

namespace hwy_gemm_second_tu {

const char* target() { return tessel::kernels::hwy_gemm_target(); }

void gemm(const tessel::kernels::matrix_view& a, const tessel::kernels::matrix_view& b, std::size_t m, std::size_t n,
          std::size_t k, float* c, float* scratch) {
  tessel::kernels::hwy_gemm_rows(a, b, 0, m, n, k, c, n, scratch);
}

}  // namespace hwy_gemm_second_tu
