// tessel::distributed over MPI: the process transport of kernels/collective.hpp.
#include "tessel/distributed.hpp"

#include <fcntl.h>
#include <mpi.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace tessel::distributed {
namespace {

// Between two processes of one host, in shared memory: the sender waits until `taken` holds the number of
// the collective before this one, writes the header (and a block of at most mailbox_bytes) and stores the
// collective's number + 1 in `ready`; the receiver waits for that stamp, reads, and stores it in `taken`.
// 1 MiB: the blocks of a psum of up to 2 MiB over 2 processes (the Fashion-MNIST MLP's largest gradient is
// 1.6 MB) skip MPI's copies and handshakes (bench_processes_allreduce: 1.40-1.46x MPI_Allreduce at 1 MiB
// against 1.06-1.08x with 64 KiB mailboxes); P processes map P x P of them (16 MiB for 4).
constexpr std::size_t mailbox_bytes = std::size_t{1} << 20;
struct mailbox {
  alignas(64) std::uint64_t ready;
  alignas(64) std::uint64_t taken;
  alignas(64) std::uint64_t header[3];  // collective, program, bytes
  alignas(64) std::byte data[mailbox_bytes];
};

struct state {
  double timeout_seconds = 30;
  std::uint64_t collectives = 0;  // collectives so far: every process counts the same
  int index = 0, count = 1;
  MPI_Comm comm = MPI_COMM_NULL;  // tessel's own (a duplicate of MPI_COMM_WORLD): the program's messages never meet ours
  // A collective's headers and requests, kept from call to call: a small one allocates nothing.
  std::vector<int> peers;  // the other processes
  std::vector<char> left;  // the peers still waited for
  std::vector<std::uint64_t> theirs, mine;
  std::vector<MPI_Request> headers, data, sends;
  mailbox* mailboxes = nullptr;  // when every process runs on this host: count x count, mailboxes[from * count + to]
  mailbox& box(int from, int to) const { return mailboxes[static_cast<std::size_t>(from) * static_cast<std::size_t>(count) + static_cast<std::size_t>(to)]; }
};
state& run_state() {
  static state s;
  return s;
}

[[noreturn]] void fail(const std::string& message) {
  const state& s = run_state();
  std::fprintf(stderr, "tessel::distributed: process %d of %d: %s\n", s.index, s.count, message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

std::string hex(std::uint64_t v) {
  char text[19];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

// Polls `requests` (MPI progresses in the calls) until all are done or the deadline passes; returns whether
// they finished.
bool wait_until_deadline(MPI_Request* requests, int count) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(run_state().timeout_seconds);
  for (unsigned polls = 0;; ++polls) {
    int done = 0;
    MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE);
    if (done) return true;
    if ((polls & 1023) == 1023) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      sched_yield();
    }
  }
}

// The deadline as a person writes it: "3", "0.5", "30".
std::string timeout_text() {
  char text[32];
  std::snprintf(text, sizeof text, "%g", run_state().timeout_seconds);
  return text;
}

std::string waited(std::uint64_t collective, const char* what) {
  return "collective " + std::to_string(collective) + " (" + what + ") waited " + timeout_text() +
         " s for the other processes: ";
}

// Polls until `done(k)` holds for every peer k (MPI progresses inside MPI_Test) or the deadline passes;
// returns the processes still waited for, "" when none.
template <class Done>
std::string wait_for_peers(Done done) {
  state& s = run_state();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(s.timeout_seconds);
  std::vector<char>& left = s.left;
  left.assign(s.peers.size(), 1);
  for (unsigned polls = 0;; ++polls) {
    bool any = false;
    for (std::size_t k = 0; k < left.size(); ++k)
      if (left[k]) left[k] = !done(k), any = any || left[k];
    if (!any) return "";
    if ((polls & 1023) == 1023) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::string names;
        for (std::size_t k = 0; k < left.size(); ++k)
          if (left[k]) names += (names.empty() ? "process " : ", ") + std::to_string(s.peers[k]);
        return names;
      }
      sched_yield();
    }
  }
}

bool finished(MPI_Request& request) {
  int done = 0;
  MPI_Test(&request, &done, MPI_STATUS_IGNORE);
  return done != 0;
}

std::uint64_t load(std::uint64_t& word) { return std::atomic_ref<std::uint64_t>(word).load(std::memory_order_acquire); }
void store(std::uint64_t& word, std::uint64_t value) { std::atomic_ref<std::uint64_t>(word).store(value, std::memory_order_release); }

// One collective between processes: to every other process q this one sends a header (the collective's
// number, the program's fingerprint, the bytes that follow) and its block for q, `out(q)`; from every p it
// takes p's header and p's block, straight into `in(p)` (its own block stays where it is). Header and data
// go out together, so the check costs no round trip of its own. The headers are waited for and checked
// first: a process running another program (another build, other settings, another mesh) or at another
// collective is refused before any data is used, and one that never arrives is named. The data has the
// same deadline, so a process stopped (SIGSTOP) or killed after the check does not leave the others
// spinning for ever.
//
// On one host the headers, and the blocks of at most `mailbox_bytes`, go through the mailboxes in shared
// memory: a store and a load where MPI's shared-memory path costs about a microsecond a message. Larger
// blocks, and everything between hosts, go by MPI, point to point on tessel's communicator, tag 0 (a
// pipeline's transfers use 1 + their number): between two processes, messages of one tag arrive in the
// order sent, so a header never meets a data receive.
template <class Out, class In>
void swap_blocks(std::uint64_t program, const char* what, Out out, In in) {
  state& s = run_state();
  const std::uint64_t collective = s.collectives++, stamp = collective + 1;
  const auto here = [&] { return "collective " + std::to_string(collective) + " (" + what + "): "; };
  for (int p : s.peers)
    if (out(p).second > static_cast<std::size_t>(INT_MAX) || in(p).second > static_cast<std::size_t>(INT_MAX))
      fail(here() + "moves a block of more than one MPI message holds (2^31 - 1 bytes)");
  const std::vector<int>& peers = s.peers;
  const std::size_t n = peers.size();
  std::uint64_t *theirs = s.theirs.data(), *mine = s.mine.data();
  MPI_Request *headers = s.headers.data(), *data = s.data.data(), *sends = s.sends.data();
  const auto by_mpi = [&](std::size_t bytes) { return s.mailboxes == nullptr || bytes > mailbox_bytes; };
  for (std::size_t k = 0; k < n; ++k) {
    if (s.mailboxes == nullptr) MPI_Irecv(&theirs[3 * k], 3, MPI_UINT64_T, peers[k], 0, s.comm, &headers[k]);
    if (by_mpi(in(peers[k]).second))
      MPI_Irecv(in(peers[k]).first, static_cast<int>(in(peers[k]).second), MPI_BYTE, peers[k], 0, s.comm, &data[k]);
  }
  for (std::size_t k = 0; k < n; ++k) {
    mine[3 * k] = collective, mine[3 * k + 1] = program, mine[3 * k + 2] = out(peers[k]).second;
    if (s.mailboxes == nullptr) MPI_Isend(&mine[3 * k], 3, MPI_UINT64_T, peers[k], 0, s.comm, &sends[2 * k]);
    if (by_mpi(out(peers[k]).second))
      MPI_Isend(out(peers[k]).first, static_cast<int>(out(peers[k]).second), MPI_BYTE, peers[k], 0, s.comm, &sends[2 * k + 1]);
  }
  const char* lost = " has died or stopped while the data moved; ending the run";
  if (s.mailboxes != nullptr) {  // each box is free once its receiver has taken the previous collective's block
    const std::string late = wait_for_peers([&](std::size_t k) {
      mailbox& box = s.box(s.index, peers[k]);
      if (load(box.taken) != collective) return false;
      std::copy(&mine[3 * k], &mine[3 * k + 3], box.header);
      if (!by_mpi(out(peers[k]).second)) std::memcpy(box.data, out(peers[k]).first, out(peers[k]).second);
      store(box.ready, stamp);
      return true;
    });
    if (!late.empty()) fail(waited(collective, what) + late + lost);
  }

  const std::string missing = s.mailboxes == nullptr ? wait_for_peers([&](std::size_t k) { return finished(headers[k]); })
                                                     : wait_for_peers([&](std::size_t k) {
                                                         mailbox& box = s.box(peers[k], s.index);
                                                         if (load(box.ready) != stamp) return false;
                                                         std::copy(box.header, box.header + 3, &theirs[3 * k]);
                                                         return true;
                                                       });
  if (!missing.empty()) fail(waited(collective, what) + missing + " has not reached it (died, stopped, or stuck before it); ending the run");
  for (std::size_t k = 0; k < n; ++k) {
    const std::string p = std::to_string(peers[k]);
    if (theirs[3 * k] != collective)
      fail(here() + "process " + p + " is at its collective " + std::to_string(theirs[3 * k]) +
           "; every process must run the same programs in the same order");
    if (theirs[3 * k + 1] != program)
      fail(here() + "this process runs program " + hex(program) + ", process " + p + " runs program " + hex(theirs[3 * k + 1]) +
           "; the fingerprint covers the program, its mesh and layouts, the compiler, the instruction sets and the kernel "
           "settings (TESSEL_MATH_PATH, TESSEL_BF16_PRODUCTS): start every process from the same binary, with the same settings, on "
           "machines of one kind");
    if (theirs[3 * k + 2] != in(peers[k]).second)
      fail(here() + "this process takes " + std::to_string(in(peers[k]).second) + " bytes from process " + p + ", which sends " +
           std::to_string(theirs[3 * k + 2]) + "; every process must run the same program over the same mesh");
  }
  if (s.mailboxes != nullptr)
    for (std::size_t k = 0; k < n; ++k) {
      mailbox& box = s.box(peers[k], s.index);
      if (!by_mpi(in(peers[k]).second)) std::memcpy(in(peers[k]).first, box.data, in(peers[k]).second);
      store(box.taken, stamp);
    }
  const std::string unreceived = wait_for_peers([&](std::size_t k) { return !by_mpi(in(peers[k]).second) || finished(data[k]); });
  if (!unreceived.empty()) fail(waited(collective, what) + unreceived + lost);
  const std::string unsent = wait_for_peers([&](std::size_t k) {
    return (s.mailboxes != nullptr || finished(sends[2 * k])) && (!by_mpi(out(peers[k]).second) || finished(sends[2 * k + 1]));
  });
  if (!unsent.empty()) fail(waited(collective, what) + unsent + lost);
}

using block = std::pair<void*, std::size_t>;
using sent_block = std::pair<const void*, std::size_t>;
std::byte* bytes_at(void* base, std::size_t offset) { return static_cast<std::byte*>(base) + offset; }
const std::byte* bytes_at(const void* base, std::size_t offset) { return static_cast<const std::byte*>(base) + offset; }

void all_gather(std::uint64_t program, const void* send, std::size_t bytes, void* received) {
  swap_blocks(
      program, "all_gather", [&](int) { return sent_block{send, bytes}; },
      [&](int p) { return block{bytes_at(received, static_cast<std::size_t>(p) * bytes), bytes}; });
}

void exchange(std::uint64_t program, const void* send, const std::size_t* sizes, const std::size_t* offsets, void* received,
              const std::size_t* received_sizes, const std::size_t* received_offsets) {
  swap_blocks(
      program, "exchange", [&](int q) { return sent_block{bytes_at(send, offsets[q]), sizes[q]}; },
      [&](int p) { return block{bytes_at(received, received_offsets[p]), received_sizes[p]}; });
}

void gather_blocks(std::uint64_t program, void* buffer, const std::size_t* sizes, const std::size_t* offsets) {
  const int index = run_state().index;
  swap_blocks(
      program, "gather_blocks", [&](int) { return sent_block{bytes_at(buffer, offsets[index]), sizes[index]}; },
      [&](int p) { return block{bytes_at(buffer, offsets[p]), sizes[p]}; });
}

// Point to point, for a pipeline's stages: each message is a header (program, tag, bytes) and the data, on
// MPI tag 1 + tag (0 is the collectives'), so that a receive takes its own message whatever the
// order they were sent in. Sends are not waited for when made: two stages sending to each other at once
// (an activation one way, a cotangent the other) would each wait for the other's receive.
struct pending_send {
  MPI_Request request;
  std::vector<std::uint64_t> buffer;  // header and data, alive until delivered
};
std::vector<pending_send>& pending_sends() {
  static std::vector<pending_send> sends;
  return sends;
}

int message_tag(std::uint64_t tag) {
  void* bound = nullptr;
  int found = 0;
  MPI_Comm_get_attr(run_state().comm, MPI_TAG_UB, &bound, &found);
  const std::uint64_t upper = found ? static_cast<std::uint64_t>(*static_cast<int*>(bound)) : 32767;
  if (tag + 1 > upper)
    fail("a pipeline transfer numbered " + std::to_string(tag) + " is past this MPI's largest message tag (" + std::to_string(upper) +
         "); fewer microbatches or stages");
  return static_cast<int>(tag + 1);
}

void send(std::uint64_t program, std::size_t peer, std::uint64_t tag, const void* data, std::size_t bytes) {
  if (bytes > static_cast<std::size_t>(INT_MAX) - 24) fail("a pipeline transfer of " + std::to_string(bytes) + " bytes is more than one MPI message holds");
  auto& sends = pending_sends();
  std::erase_if(sends, [](pending_send& p) {
    int done = 0;
    MPI_Test(&p.request, &done, MPI_STATUS_IGNORE);
    return done != 0;
  });
  pending_send& p = sends.emplace_back();
  p.buffer.resize(3 + (bytes + 7) / 8);
  p.buffer[0] = program, p.buffer[1] = tag, p.buffer[2] = bytes;
  std::memcpy(p.buffer.data() + 3, data, bytes);
  MPI_Isend(p.buffer.data(), static_cast<int>(24 + bytes), MPI_BYTE, static_cast<int>(peer), message_tag(tag), run_state().comm, &p.request);
}

void receive(std::uint64_t program, std::size_t peer, std::uint64_t tag, void* data, std::size_t bytes, const char* what_it_is) {
  std::vector<std::uint64_t> buffer(3 + (bytes + 7) / 8);
  MPI_Request request;
  MPI_Irecv(buffer.data(), static_cast<int>(24 + bytes), MPI_BYTE, static_cast<int>(peer), message_tag(tag), run_state().comm, &request);
  const std::string what = std::string(what_it_is) + " (transfer " + std::to_string(tag) + ") from process " + std::to_string(peer);
  if (!wait_until_deadline(&request, 1))
    fail(what + " waited " + timeout_text() + " s: process " + std::to_string(peer) +
         " has died, stopped or stalled; ending the run");
  if (buffer[0] != program)
    fail(what + ": this process runs program " + hex(program) + ", process " + std::to_string(peer) + " runs program " + hex(buffer[0]) +
         "; start every process from the same binary, with the same settings");
  if (buffer[2] != bytes)
    fail(what + ": " + std::to_string(buffer[2]) + " bytes came where " + std::to_string(bytes) + " were expected");
  std::memcpy(data, buffer.data() + 3, bytes);
}

void flush() {
  auto& sends = pending_sends();
  std::vector<MPI_Request> requests;
  for (pending_send& p : sends) requests.push_back(p.request);
  if (!wait_until_deadline(requests.data(), static_cast<int>(requests.size())))
    fail("pipeline transfers waited " + timeout_text() + " s to be delivered: a receiving process has died, "
         "stopped or stalled; ending the run");
  sends.clear();
}

// Maps the mailboxes when every process runs on this host (and TESSEL_SHARED_MEMORY is not 0 in any):
// process 0 creates a shared-memory object, every process maps it, and process 0 removes its name once all
// have tried, so nothing is left in /dev/shm whatever happens later. If any process cannot, or another
// host takes part, every collective goes by MPI alone.
void open_mailboxes(state& s) {
  MPI_Comm host;
  MPI_Comm_split_type(s.comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host);
  int on_host = 0;
  MPI_Comm_size(host, &on_host);
  MPI_Comm_free(&host);
  const char* setting = std::getenv("TESSEL_SHARED_MEMORY");
  const bool wanted = on_host == s.count && s.count > 1 && !(setting != nullptr && std::string(setting) == "0");
  const std::size_t bytes = sizeof(mailbox) * static_cast<std::size_t>(s.count) * static_cast<std::size_t>(s.count);
  char name[64] = {};
  if (s.index == 0)
    std::snprintf(name, sizeof name, "/tessel-%d-%llx", static_cast<int>(getpid()),
                  static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch().count()));
  MPI_Bcast(name, sizeof name, MPI_CHAR, 0, s.comm);
  int fd = -1;
  if (s.index == 0 && wanted) {
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0 && posix_fallocate(fd, 0, static_cast<off_t>(bytes)) != 0) close(fd), fd = -1;  // reserved now: no SIGBUS later
  }
  MPI_Barrier(s.comm);
  if (s.index != 0 && wanted) fd = shm_open(name, O_RDWR, 0);
  void* at = fd >= 0 ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (fd >= 0) close(fd);
  int mapped = at != MAP_FAILED ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &mapped, 1, MPI_INT, MPI_MIN, s.comm);
  if (s.index == 0 && wanted) shm_unlink(name);
  if (mapped) s.mailboxes = static_cast<mailbox*>(at);
  else if (at != MAP_FAILED) munmap(at, bytes);
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void start(int* argc, char*** argv, options o) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) {
    std::fprintf(stderr, "tessel::distributed::init: called twice; call it once, at the start of main\n");
    std::exit(2);
  }
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  state& s = run_state();
  MPI_Comm_rank(MPI_COMM_WORLD, &s.index);
  MPI_Comm_size(MPI_COMM_WORLD, &s.count);
  MPI_Comm_dup(MPI_COMM_WORLD, &s.comm);
  if (provided < MPI_THREAD_FUNNELED) fail("this MPI library does not let a threaded program call it (MPI_THREAD_FUNNELED)");
  if (!(o.timeout_seconds > 0)) fail("options::timeout_seconds must be positive");
  s.timeout_seconds = o.timeout_seconds;
  for (int p = 0; p < s.count; ++p)
    if (p != s.index) s.peers.push_back(p);
  const std::size_t others = s.peers.size();
  s.theirs.resize(3 * others), s.mine.resize(3 * others);
  s.headers.resize(others), s.data.resize(others), s.sends.resize(2 * others);
  open_mailboxes(s);
  std::atexit(finalize_at_exit);
  kernels::install_process_transport(
      {static_cast<std::size_t>(s.index), static_cast<std::size_t>(s.count), &all_gather, &exchange, &gather_blocks, &send, &receive, &flush});
}

}  // namespace

void init(int& argc, char**& argv, options o) { start(&argc, &argv, o); }
void init(options o) { start(nullptr, nullptr, o); }

void abort(std::string_view message) { fail(std::string(message)); }

}  // namespace tessel::distributed
