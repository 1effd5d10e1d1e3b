#pragma once
// The executor's memory: one arena per thread, which holds a plan's intermediate buffers and every
// thread's scratch, and nothing is allocated inside kernels.

#include <cstddef>
#include <cstdlib>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace tessel::run {

// The calling thread's arena: kept from one call to the next and grown to the largest plan run on the
// thread, so a step called again maps no new pages (the caching allocators of PyTorch and XLA keep
// their memory the same way). It is freed when the thread ends. One of 2 MiB or more is 2 MiB aligned
// and asks for transparent huge pages.
inline unsigned char* thread_arena(std::size_t bytes) {
  struct arena {
    unsigned char* data = nullptr;
    std::size_t bytes = 0;
    ~arena() { std::free(data); }
  };
  thread_local arena a;
  if (a.bytes < bytes) {
    std::free(a.data);
    a = {};
    constexpr std::size_t huge = std::size_t{2} << 20;
    const std::size_t align = bytes >= huge ? huge : 64;
    const std::size_t size = (bytes + align - 1) / align * align;
    void* p = std::aligned_alloc(align, size);
    if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__)
    if (align == huge) madvise(p, size, MADV_HUGEPAGE);
#endif
    a.data = static_cast<unsigned char*>(p);
    a.bytes = size;
  }
  return a.data;
}

}  // namespace tessel::run
