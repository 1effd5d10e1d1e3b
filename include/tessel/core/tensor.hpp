#pragma once
// tensor<T, Shape>: an owning, 64-byte-aligned, heap-allocated array with a static shape.
//
// Value semantics: copies are deep, moves steal the buffer (a moved-from tensor is empty: data() is null
// and it may only be assigned to or destroyed). Large static shapes are fine: nothing lives on the stack.
//
//   tessel::tensor<float, tessel::shape<2, 3>> t{1, 2, 3, 4, 5, 6};   // row-major
//   t(1, 2) == 6;  t.reshape<tessel::shape<3, 2>>();  t.astype<tessel::bfloat16>();
//   std::cout << t;   // f32[2,3]{{1, 2, 3}, {4, 5, 6}}

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "tessel/core/dtype.hpp"
#include "tessel/core/shape.hpp"

namespace tessel {

inline constexpr std::size_t tensor_alignment = 64;

// Tag for a tensor whose elements are left unwritten: `tensor<float, S> t(tessel::uninitialized);`.
struct uninitialized_t {
  explicit uninitialized_t() = default;
};
inline constexpr uninitialized_t uninitialized{};

namespace detail {
// A tensor's storage, 64-byte aligned. Blocks of 16 KiB and more come from a cache kept by the tessel
// library (kernels/implementation.hpp): a freed block waits for the next request of its size, so a
// function called again with new results of the same shapes (jit, shard_map, eager ops) maps no new
// pages. Throws std::bad_alloc.
void* allocate_block(std::size_t bytes);
void free_block(void* p) noexcept;

struct aligned_free {
  void operator()(void* p) const noexcept { free_block(p); }
};

template <class T>
std::unique_ptr<T[], aligned_free> allocate_elements(std::size_t count) {
  if (count == 0) count = 1;  // a rank-0 or empty tensor still owns a valid, aligned pointer
  void* raw = allocate_block(count * sizeof(T));
  T* first = static_cast<T*>(raw);
  std::uninitialized_value_construct_n(first, count);
  return std::unique_ptr<T[], aligned_free>(first);
}

// Storage whose elements are left for the caller to write (jit's results: the plan writes every one).
template <class T>
std::unique_ptr<T[], aligned_free> allocate_uninitialized(std::size_t count) {
  if (count == 0) count = 1;
  void* raw = allocate_block(count * sizeof(T));
  T* first = static_cast<T*>(raw);
  std::uninitialized_default_construct_n(first, count);
  return std::unique_ptr<T[], aligned_free>(first);
}

template <class T, class S>
consteval bool check_tensor_type() {
  require_dtype<T, "tessel::tensor">();
  return DType<T> && Shape<S>;
}
}  // namespace detail

template <class T, class S>
class tensor {
  static_assert(Shape<S>, "tessel::tensor<T, S>: S must be a tessel::shape<Dims...>");
  static_assert(detail::check_tensor_type<T, S>() || true);  // reports an unsupported dtype with its own message

 public:
  using value_type = T;
  using shape_type = S;
  static constexpr std::size_t rank = S::rank;
  static constexpr std::size_t size = S::size;

  // Zero-filled.
  tensor() : data_(detail::allocate_elements<T>(size)) {}

  // Elements not written (reading one before writing it is undefined): for results about to be overwritten.
  explicit tensor(uninitialized_t) : data_(detail::allocate_uninitialized<T>(size)) {}

  // Row-major values; their count must equal the size.
  tensor(std::initializer_list<T> values) : tensor(std::span<const T>(values.begin(), values.size())) {}

  explicit tensor(std::span<const T> values) : tensor() {
    if (values.size() != size)
      throw std::invalid_argument(describe_self() + ": expected " + std::to_string(size) + " values, got " +
                                  std::to_string(values.size()));
    std::copy(values.begin(), values.end(), data_.get());
  }

  // From any sized input range of elements convertible to T (e.g. a std::vector<double>).
  // (Written without <ranges>, which would cost every includer's compile: core/tensor.hpp is in all of them.)
  template <class R>
    requires(!std::is_same_v<std::remove_cvref_t<R>, tensor> && requires(R& r) {
      { *std::begin(r) } -> std::convertible_to<T>;
      std::end(r);
    })
  static tensor from_range(R&& values) {
    tensor t;
    std::size_t n = 0;
    for (auto&& v : values) {
      if (n == size) throw std::invalid_argument(describe_self() + ": range has more than " + std::to_string(size) + " values");
      t.data_[n++] = static_cast<T>(v);
    }
    if (n != size)
      throw std::invalid_argument(describe_self() + ": expected " + std::to_string(size) + " values, got " + std::to_string(n));
    return t;
  }

  static tensor full(T value) {
    tensor t;
    t.fill(value);
    return t;
  }
  static tensor zeros() { return tensor(); }
  static tensor ones() { return full(T(1)); }

  tensor(const tensor& other) : tensor() { std::copy_n(other.data(), size, data_.get()); }
  tensor(tensor&&) noexcept = default;
  tensor& operator=(const tensor& other) {
    if (this != &other) {
      if (!data_) data_ = detail::allocate_elements<T>(size);
      std::copy_n(other.data(), size, data_.get());
    }
    return *this;
  }
  tensor& operator=(tensor&&) noexcept = default;

  // Tensors of another dtype or shape never convert implicitly.
  template <class U, class S2>
    requires(!std::is_same_v<tensor<U, S2>, tensor>)
  tensor(const tensor<U, S2>&) {
    reject_conversion<U, S2>();
  }

  T* data() noexcept { return data_.get(); }
  const T* data() const noexcept { return data_.get(); }
  std::span<T, size> span() noexcept { return std::span<T, size>(data_.get(), size); }
  std::span<const T, size> span() const noexcept { return std::span<const T, size>(data_.get(), size); }
  T* begin() noexcept { return data(); }
  T* end() noexcept { return data() + size; }
  const T* begin() const noexcept { return data(); }
  const T* end() const noexcept { return data() + size; }

  // Element by its row-major position.
  T& operator[](std::size_t flat) noexcept { return data_[flat]; }
  const T& operator[](std::size_t flat) const noexcept { return data_[flat]; }

  // Element by one index per axis (unchecked; at() checks).
  template <std::integral... I>
  T& operator()(I... index) noexcept {
    return data_[offset<"tessel::tensor::operator()">(index...)];
  }
  template <std::integral... I>
  const T& operator()(I... index) const noexcept {
    return data_[offset<"tessel::tensor::operator()">(index...)];
  }
  template <std::integral... I>
  T& at(I... index) {
    check_bounds(index...);
    return data_[offset<"tessel::tensor::at">(index...)];
  }
  template <std::integral... I>
  const T& at(I... index) const {
    check_bounds(index...);
    return data_[offset<"tessel::tensor::at">(index...)];
  }

  void fill(T value) { std::fill_n(data_.get(), size, value); }

  // The same elements under another shape of equal size (the buffer moves; no copy).
  template <class To>
  tensor<T, To> reshape() && {
    static_assert(Shape<To>, "tessel::tensor::reshape<To>: To must be a tessel::shape<Dims...>");
    if constexpr (reshapable_v<tensor_type<T, S>, To>) {
      tensor<T, To> out(typename tensor<T, To>::adopt_tag{}, std::move(data_));
      return out;
    } else {
      return {};
    }
  }
  template <class To>
  tensor<T, To> reshape() const& {
    return tensor(*this).template reshape<To>();
  }

  // Elementwise conversion (JAX's astype): float -> bf16 rounds to nearest even; float -> int truncates.
  // Returns tensor<U, S>; for a U that is not a dtype, the error and a copy of this tensor (not a
  // tensor<U, S>, whose own check would report the same mistake a second time).
  template <class U>
  auto astype() const {
    if constexpr (!DType<U>) {
      require_dtype<U, "tessel::tensor::astype">();
      return tensor(*this);
    } else {
      tensor<U, S> out;
      for (std::size_t i = 0; i < size; ++i) out[i] = convert<U>(data_[i]);
      return out;
    }
  }

 private:
  template <class, class>
  friend class tensor;
  struct adopt_tag {};
  tensor(adopt_tag, std::unique_ptr<T[], detail::aligned_free> data) : data_(std::move(data)) {}

  template <class U>
  static U convert(T v) {
    if constexpr (std::is_same_v<U, bfloat16>) {
      return bfloat16(static_cast<float>(v));
    } else if constexpr (std::is_same_v<T, bfloat16>) {
      return static_cast<U>(static_cast<float>(v));
    } else {
      return static_cast<U>(v);
    }
  }

  static std::string describe_self() { return std::string("tessel::tensor<") + std::string(describe<tensor_type<T, S>>().view()) + ">"; }

  template <fixed_string Op, class... I>
  static consteval bool check_index_count() {
    if constexpr (sizeof...(I) != rank) {
      raise<fit<[] {
        message_builder m;
        m << Op << ": ";
        append_type<tensor_type<T, S>>(m) << " has rank " << static_cast<std::uint64_t>(rank) << " but "
                                          << static_cast<std::uint64_t>(sizeof...(I)) << (sizeof...(I) == 1 ? " index was" : " indices were")
                                          << " given; fix: pass one index per axis";
        return m;
      }>()>();
    }
    return sizeof...(I) == rank;
  }

  template <fixed_string Op, class... I>
  static std::size_t offset(I... index) noexcept {
    if constexpr (check_index_count<Op, I...>()) {
      std::size_t flat = 0, axis = 0;
      ((flat += static_cast<std::size_t>(index) * S::strides[axis++]), ...);
      return flat;
    } else {
      return 0;
    }
  }

  template <class... I>
  static void check_bounds(I... index) {
    std::size_t axis = 0;
    auto check = [&](auto i) {
      if (axis < rank && (i < 0 || static_cast<std::size_t>(i) >= S::dims[axis]))
        throw std::out_of_range(describe_self() + "::at: index " + std::to_string(i) + " is out of range for axis " +
                                std::to_string(axis) + " of size " + std::to_string(S::dims[axis]));
      ++axis;
    };
    (check(index), ...);
  }

  template <class U, class S2>
  static consteval void reject_conversion() {
    raise<fit<[] {
      message_builder m;
      m << "tessel::tensor: no implicit conversion from ";
      append_type<tensor_type<U, S2>>(m) << " to ";
      append_type<tensor_type<T, S>>(m);
      if constexpr (!std::is_same_v<U, T>)
        m << " (dtypes differ); fix: call .astype<" << dtype_name<T>() << ">() or convert_element_type";
      else
        m << " (shapes differ); fix: call .reshape<...>() with a shape of the same size, or broadcast";
      return m;
    }>()>();
  }

  std::unique_ptr<T[], detail::aligned_free> data_;
};

template <class X>
inline constexpr bool is_tensor_v = false;
template <class T, class S>
inline constexpr bool is_tensor_v<tensor<T, S>> = true;
template <class X>
concept Tensor = is_tensor_v<std::remove_cvref_t<X>>;

// NumPy's allclose: |a - b| <= atol + rtol * |b| elementwise; NaNs are equal only with equal_nan.
struct tolerance {
  double rtol = 1e-5;
  double atol = 1e-8;
  bool equal_nan = false;
};

template <class T, class S>
bool allclose(const tensor<T, S>& a, const tensor<T, S>& b, tolerance tol = {}) {
  for (std::size_t i = 0; i < S::size; ++i) {
    const double x = static_cast<double>(static_cast<float>(a[i]));
    const double y = static_cast<double>(static_cast<float>(b[i]));
    if (std::isnan(x) || std::isnan(y)) {
      if (!(tol.equal_nan && std::isnan(x) && std::isnan(y))) return false;
      continue;
    }
    if (x == y) continue;  // also equal infinities
    if (!(std::abs(x - y) <= tol.atol + tol.rtol * std::abs(y))) return false;
  }
  return true;
}

template <class T, class S>
bool operator==(const tensor<T, S>& a, const tensor<T, S>& b) {
  return std::equal(a.begin(), a.end(), b.begin());
}

}  // namespace tessel
