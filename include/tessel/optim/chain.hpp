#pragma once
// chain (optax.chain): transformations applied in order, each to the previous one's updates.
//
//   tessel::optim::chain<tessel::optim::clip_by_global_norm<1.0>, tessel::optim::adamw<1e-3>> opt;
//   auto state = opt.init(params);                          // std::tuple of each part's state
//   auto [updates, next] = opt.update(grads, state, params);
//
// Each part is an optimizer or transformation type of this directory (empty, with init and update);
// its learning rate, if any, is its own, so a chain scales by it once, where that part stands.

#include <cstddef>
#include <tuple>
#include <utility>

#include "tessel/optim/base.hpp"
#include "tessel/jit.hpp"

namespace tessel::optim {

template <class... Parts>
struct chain {
  static_assert(sizeof...(Parts) > 0, "tessel::optim::chain: give at least one transformation");

  // (Parts{}.init(params)...).
  template <class P>
  constexpr auto init(const P& params) const {
    return std::make_tuple(Parts{}.init(params)...);
  }

  // The updates after every part, and the tuple of the parts' next states. params are passed to
  // every part (adamw needs them).
  template <class G, class S, class... P>
    requires(sizeof...(P) <= 1)
  constexpr auto update(const G& grads, const S& state, const P&... params) const {
    if constexpr (!detail::all_traced<G, S, P...>) {
      return jit(detail::update_fn<chain>{})(grads, state, params...);
    } else {
      static_assert(std::tuple_size_v<S> == sizeof...(Parts),
                    "tessel::optim::chain::update: the state must hold one state per part; fix: pass the state that "
                    "init(params) or the previous update returned");
      return from<0>(grads, state, params...);
    }
  }

 private:
  template <std::size_t I, class G, class S, class... P>
  static constexpr auto from(const G& updates, const S& state, const P&... params) {
    if constexpr (I == sizeof...(Parts)) {
      return std::make_tuple(updates, std::tuple<>{});
    } else {
      using part = std::tuple_element_t<I, std::tuple<Parts...>>;
      auto [next_updates, next_state] = part{}.update(updates, std::get<I>(state), params...);
      auto [final_updates, rest] = from<I + 1>(next_updates, state, params...);
      return std::make_tuple(final_updates, std::tuple_cat(std::make_tuple(next_state), rest));
    }
  }
};

}  // namespace tessel::optim
