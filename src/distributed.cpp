// tessel::distributed over MPI: the process transport of kernels/collective.hpp.
#include "tessel/distributed.hpp"

#include <mpi.h>
#include <sched.h>

#include <algorithm>
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

struct state {
  double timeout_seconds = 30;
  std::uint64_t collectives = 0;  // collectives so far: every process counts the same
  int index = 0, count = 1;
  MPI_Comm comm = MPI_COMM_NULL;  // tessel's own (a duplicate of MPI_COMM_WORLD): the program's messages never meet ours
  // A collective's headers and requests, kept from call to call: a small one allocates nothing.
  std::vector<int> peers;
  std::vector<std::uint64_t> theirs, mine;
  std::vector<MPI_Request> headers, data, sends;
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

std::string waited(std::uint64_t collective, const char* what) {
  return "collective " + std::to_string(collective) + " (" + what + ") waited " + std::to_string(run_state().timeout_seconds) +
         " s for the other processes: ";
}

// The processes whose requests (one per process of `peers`, or `per_peer` each) have not finished.
std::string pending(MPI_Request* requests, const std::vector<int>& peers, int per_peer) {
  std::string names;
  for (std::size_t k = 0; k < peers.size(); ++k) {
    bool done_all = true;
    for (int r = 0; r < per_peer; ++r) {
      int done = 0;
      MPI_Test(&requests[k * per_peer + r], &done, MPI_STATUS_IGNORE);
      done_all = done_all && done;
    }
    if (!done_all) names += (names.empty() ? "process " : ", ") + std::to_string(peers[k]);
  }
  return names.empty() ? "one of the other processes" : names;
}

// One collective between processes, point to point on tessel's communicator: to every other process q this
// one sends a header (the collective's number, the program's fingerprint, the bytes that follow) and then
// its block for q, `out(q)`; from every p it takes p's header and then p's block, straight into `in(p)`
// (its own block stays where it is).
// Headers and data go out together, so the check costs no round trip of its own. The headers are waited
// for and checked first: a process running another program (another build, other settings, another mesh)
// or at another collective is refused before any data is used, and one that never arrives is named. The
// data has the same deadline, so a process stopped (SIGSTOP) or killed after the check does not leave the
// others inside MPI, spinning for ever. All on MPI tag 0 (a pipeline's transfers use 1 + their number):
// between two processes, messages of one tag arrive in the order sent, so a header never meets a data
// receive.
template <class Out, class In>
void swap_blocks(std::uint64_t program, const char* what, Out out, In in) {
  state& s = run_state();
  const std::uint64_t collective = s.collectives++;
  const auto here = [&] { return "collective " + std::to_string(collective) + " (" + what + "): "; };
  for (int p : s.peers)
    if (out(p).second > static_cast<std::size_t>(INT_MAX) || in(p).second > static_cast<std::size_t>(INT_MAX))
      fail(here() + "moves a block of more than one MPI message holds (2^31 - 1 bytes)");
  const std::vector<int>& peers = s.peers;
  const std::size_t n = peers.size();
  std::uint64_t *theirs = s.theirs.data(), *mine = s.mine.data();
  MPI_Request *headers = s.headers.data(), *data = s.data.data(), *sends = s.sends.data();
  for (std::size_t k = 0; k < n; ++k) {
    MPI_Irecv(&theirs[3 * k], 3, MPI_UINT64_T, peers[k], 0, s.comm, &headers[k]);
    MPI_Irecv(in(peers[k]).first, static_cast<int>(in(peers[k]).second), MPI_BYTE, peers[k], 0, s.comm, &data[k]);
  }
  for (std::size_t k = 0; k < n; ++k) {
    mine[3 * k] = collective, mine[3 * k + 1] = program, mine[3 * k + 2] = out(peers[k]).second;
    MPI_Isend(&mine[3 * k], 3, MPI_UINT64_T, peers[k], 0, s.comm, &sends[2 * k]);
    MPI_Isend(out(peers[k]).first, static_cast<int>(out(peers[k]).second), MPI_BYTE, peers[k], 0, s.comm, &sends[2 * k + 1]);
  }

  if (!wait_until_deadline(headers, static_cast<int>(n)))
    fail(waited(collective, what) + pending(headers, peers, 1) + " has not reached it (died, stopped, or stuck before it); ending the run");
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
  const char* lost = " has died or stopped while the data moved; ending the run";
  if (!wait_until_deadline(data, static_cast<int>(n))) fail(waited(collective, what) + pending(data, peers, 1) + lost);
  if (!wait_until_deadline(sends, static_cast<int>(2 * n))) fail(waited(collective, what) + pending(sends, peers, 2) + lost);
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
    fail(what + " waited " + std::to_string(run_state().timeout_seconds) + " s: process " + std::to_string(peer) +
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
    fail("pipeline transfers waited " + std::to_string(run_state().timeout_seconds) + " s to be delivered: a receiving process has died, "
         "stopped or stalled; ending the run");
  sends.clear();
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
  std::atexit(finalize_at_exit);
  kernels::install_process_transport(
      {static_cast<std::size_t>(s.index), static_cast<std::size_t>(s.count), &all_gather, &exchange, &gather_blocks, &send, &receive, &flush});
}

}  // namespace

void init(int& argc, char**& argv, options o) { start(&argc, &argv, o); }
void init(options o) { start(nullptr, nullptr, o); }

void abort(std::string_view message) { fail(std::string(message)); }

}  // namespace tessel::distributed
