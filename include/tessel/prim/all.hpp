#pragma once
// Every primitive (JAX's lax): one file each under prim/, each of which ends by including this list
// (prim/build.hpp says why); tessel/lax.hpp includes it. Written by cmake/primitive_list.cmake from the
// files of prim/: do not edit; the test headers.primitive_list fails when it is stale.
#include "tessel/prim/abs.hpp"
#include "tessel/prim/add.hpp"
#include "tessel/prim/all_gather.hpp"
#include "tessel/prim/all_to_all.hpp"
#include "tessel/prim/argmax.hpp"
#include "tessel/prim/axis_index.hpp"
#include "tessel/prim/broadcast_in_dim.hpp"
#include "tessel/prim/cbrt.hpp"
#include "tessel/prim/concatenate.hpp"
#include "tessel/prim/control.hpp"
#include "tessel/prim/conv_general.hpp"
#include "tessel/prim/convert_element_type.hpp"
#include "tessel/prim/cos.hpp"
#include "tessel/prim/div.hpp"
#include "tessel/prim/dot_general.hpp"
#include "tessel/prim/eq.hpp"
#include "tessel/prim/erf.hpp"
#include "tessel/prim/erf_inv.hpp"
#include "tessel/prim/exp.hpp"
#include "tessel/prim/expm1.hpp"
#include "tessel/prim/floor.hpp"
#include "tessel/prim/ge.hpp"
#include "tessel/prim/gt.hpp"
#include "tessel/prim/iota.hpp"
#include "tessel/prim/le.hpp"
#include "tessel/prim/literal.hpp"
#include "tessel/prim/log.hpp"
#include "tessel/prim/log1p.hpp"
#include "tessel/prim/logistic.hpp"
#include "tessel/prim/lt.hpp"
#include "tessel/prim/materialize.hpp"
#include "tessel/prim/max.hpp"
#include "tessel/prim/min.hpp"
#include "tessel/prim/mul.hpp"
#include "tessel/prim/ne.hpp"
#include "tessel/prim/neg.hpp"
#include "tessel/prim/optimization_barrier.hpp"
#include "tessel/prim/pad.hpp"
#include "tessel/prim/parameter.hpp"
#include "tessel/prim/pmax.hpp"
#include "tessel/prim/pmin.hpp"
#include "tessel/prim/pow.hpp"
#include "tessel/prim/ppermute.hpp"
#include "tessel/prim/psum.hpp"
#include "tessel/prim/psum_scatter.hpp"
#include "tessel/prim/pvary.hpp"
#include "tessel/prim/random_fold_in.hpp"
#include "tessel/prim/random_uniform.hpp"
#include "tessel/prim/reduce_max.hpp"
#include "tessel/prim/reduce_min.hpp"
#include "tessel/prim/reduce_sum.hpp"
#include "tessel/prim/reduce_window.hpp"
#include "tessel/prim/remat.hpp"
#include "tessel/prim/reshape.hpp"
#include "tessel/prim/rsqrt.hpp"
#include "tessel/prim/scatter_add.hpp"
#include "tessel/prim/select.hpp"
#include "tessel/prim/sign.hpp"
#include "tessel/prim/sin.hpp"
#include "tessel/prim/slice.hpp"
#include "tessel/prim/sqrt.hpp"
#include "tessel/prim/stop_gradient.hpp"
#include "tessel/prim/sub.hpp"
#include "tessel/prim/take.hpp"
#include "tessel/prim/tanh.hpp"
#include "tessel/prim/transpose.hpp"

#include <array>

namespace tessel {
// Every primitive descriptor, for the checkers that must cover them all (tests/vmap/coverage_test.cpp).
inline constexpr std::array<const ir::primitive*, 73> all_primitives{
    &prim::abs_p,
    &prim::add_p,
    &prim::all_gather_p,
    &prim::all_to_all_p,
    &prim::argmax_p,
    &prim::axis_index_p,
    &prim::broadcast_in_dim_p,
    &prim::cbrt_p,
    &prim::concatenate_p,
    &prim::region_parameter_p,
    &prim::control_p,
    &prim::conv_general_p,
    &prim::conv_input_grad_p,
    &prim::conv_filter_grad_p,
    &prim::convert_element_type_p,
    &prim::cos_p,
    &prim::div_p,
    &prim::dot_general_p,
    &prim::eq_p,
    &prim::erf_p,
    &prim::erf_inv_p,
    &prim::exp_p,
    &prim::expm1_p,
    &prim::floor_p,
    &prim::ge_p,
    &prim::gt_p,
    &prim::iota_p,
    &prim::le_p,
    &prim::literal_p,
    &prim::log_p,
    &prim::log1p_p,
    &prim::logistic_p,
    &prim::lt_p,
    &prim::materialize_p,
    &prim::max_p,
    &prim::min_p,
    &prim::mul_p,
    &prim::ne_p,
    &prim::neg_p,
    &prim::optimization_barrier_p,
    &prim::pad_p,
    &prim::parameter_p,
    &prim::pmax_p,
    &prim::pmin_p,
    &prim::pow_p,
    &prim::ppermute_p,
    &prim::psum_p,
    &prim::psum_scatter_p,
    &prim::pvary_p,
    &prim::random_fold_in_p,
    &prim::random_uniform_p,
    &prim::reduce_max_p,
    &prim::reduce_min_p,
    &prim::reduce_sum_p,
    &prim::reduce_window_max_p,
    &prim::select_and_scatter_add_p,
    &prim::select_and_gather_add_p,
    &prim::reduce_window_sum_p,
    &prim::reduce_window_sum_transpose_p,
    &prim::remat_p,
    &prim::reshape_p,
    &prim::rsqrt_p,
    &prim::scatter_add_p,
    &prim::select_p,
    &prim::sign_p,
    &prim::sin_p,
    &prim::slice_p,
    &prim::sqrt_p,
    &prim::stop_gradient_p,
    &prim::sub_p,
    &prim::take_p,
    &prim::tanh_p,
    &prim::transpose_p};
}  // namespace tessel

#ifdef TESSEL_IMPLEMENTATION
// The elementwise and reduction rules' tile functions, compiled here once (prim/family/elementwise.hpp
// says why).
namespace tessel::prim {
template void evaluate_unary<abs_rule>(const ir::node&, const void* const*, void*, std::size_t);
template void evaluate_binary<add_rule>(const ir::node&, const void* const*, unsigned, void*, std::size_t);
template void evaluate_unary<cbrt_rule>(const ir::node&, const void* const*, void*, std::size_t);
template void evaluate_unary<cos_rule>(const ir::node&, const void* const*, void*, std::size_t);
template void evaluate_binary<div_rule>(const ir::node&, const void* const*, unsigned, void*, std::size_t);
template void evaluate_binary<eq_rule>(const ir::node&, const void* const*, unsigned, void*, std::size_t);
template void evaluate_unary<erf_rule>(const ir::node&, const void* const*, void*, std::size_t);
template void evaluate_unary<erf_inv_rule>(const ir::node&, const void* const*, void*, std::size_t);
template void evaluate_unary<exp_rule>(const ir::node&, const void* const*, void*, std::size_t);
template void evaluate_unary<expm1_rule>(const ir::node&, const void* const*, void*, std::size_t);
template void evaluate_unary<floor_rule>(const ir::node&, const void* const*, void*, std::size_t);
template void evaluate_binary<ge_rule>(const ir::node&, const void* const*, unsigned, void*, std::size_t);
template void evaluate_binary<gt_rule>(const ir::node&, const void* const*, unsigned, void*, std::size_t);
template void evaluate_binary<le_rule>(const ir::node&, const void* const*, unsigned, void*, std::size_t);
template void evaluate_unary<log_rule>(const ir::node&, const void* const*, void*, std::size_t);
template void evaluate_unary<log1p_rule>(const ir::node&, const void* const*, void*, std::size_t);
template void evaluate_unary<logistic_rule>(const ir::node&, const void* const*, void*, std::size_t);
template void evaluate_binary<lt_rule>(const ir::node&, const void* const*, unsigned, void*, std::size_t);
template void evaluate_binary<max_rule>(const ir::node&, const void* const*, unsigned, void*, std::size_t);
template void evaluate_binary<min_rule>(const ir::node&, const void* const*, unsigned, void*, std::size_t);
template void evaluate_binary<mul_rule>(const ir::node&, const void* const*, unsigned, void*, std::size_t);
template void evaluate_binary<ne_rule>(const ir::node&, const void* const*, unsigned, void*, std::size_t);
template void evaluate_unary<neg_rule>(const ir::node&, const void* const*, void*, std::size_t);
template void evaluate_binary<pow_rule>(const ir::node&, const void* const*, unsigned, void*, std::size_t);
template void reduce_row<reduce_max_rule>(const ir::node&, const void*, std::size_t, void*);
template void combine<reduce_max_rule>(const ir::node&, const void*, std::size_t, void*);
template void init<reduce_max_rule>(const ir::node&, void*, std::size_t);
template void reduce_row<reduce_min_rule>(const ir::node&, const void*, std::size_t, void*);
template void combine<reduce_min_rule>(const ir::node&, const void*, std::size_t, void*);
template void init<reduce_min_rule>(const ir::node&, void*, std::size_t);
template void reduce_row<reduce_sum_rule>(const ir::node&, const void*, std::size_t, void*);
template void combine<reduce_sum_rule>(const ir::node&, const void*, std::size_t, void*);
template void init<reduce_sum_rule>(const ir::node&, void*, std::size_t);
template void evaluate_unary<rsqrt_rule>(const ir::node&, const void* const*, void*, std::size_t);
template void evaluate_unary<sign_rule>(const ir::node&, const void* const*, void*, std::size_t);
template void evaluate_unary<sin_rule>(const ir::node&, const void* const*, void*, std::size_t);
template void evaluate_unary<sqrt_rule>(const ir::node&, const void* const*, void*, std::size_t);
template void evaluate_binary<sub_rule>(const ir::node&, const void* const*, unsigned, void*, std::size_t);
template void evaluate_unary<tanh_rule>(const ir::node&, const void* const*, void*, std::size_t);
}  // namespace tessel::prim
#endif
