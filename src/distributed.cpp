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
#include <vector>

namespace tessel::distributed {
namespace {

struct state {
  double timeout_seconds = 30;
  std::uint64_t collectives = 0;  // collectives so far: every process counts the same
  int index = 0, count = 1;
  MPI_Comm comm = MPI_COMM_NULL;  // tessel's own (a duplicate of MPI_COMM_WORLD): the program's messages never meet ours
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

// The data of a collective whose check every process passed: a collective request cannot say which process
// is missing, so the message names the others.
void wait_for_data(MPI_Request& request, const char* what, std::uint64_t collective) {
  if (wait_until_deadline(&request, 1)) return;
  const state& s = run_state();
  std::string others;
  for (int p = 0; p < s.count; ++p)
    if (p != s.index) others += (others.empty() ? "" : ", ") + std::to_string(p);
  fail(waited(collective, what) + (s.count == 2 ? "process " + others + " has" : "one of processes " + others + " has") +
       " died or stopped while the data moved; ending the run");
}

// Every process sends every other its collective number, program fingerprint and total size (point to
// point, so that one that never arrives can be named): a process that runs another program, or the same
// one built or set up otherwise, or over another mesh, is found here before any data moves; one that died,
// stopped or stalled before this collective, by the deadline. Returns the collective's number.
std::uint64_t check_same_collective(std::uint64_t program, std::size_t bytes, const char* what) {
  state& s = run_state();
  const std::uint64_t collective = s.collectives++;
  const std::uint64_t mine[3] = {collective, program, bytes};
  std::vector<std::uint64_t> all(3 * static_cast<std::size_t>(s.count));
  std::vector<MPI_Request> requests;  // the receives, process by process, then the sends
  std::vector<int> from;
  for (int p = 0; p < s.count; ++p)
    if (p != s.index) {
      requests.emplace_back();
      from.push_back(p);
      MPI_Irecv(&all[3 * static_cast<std::size_t>(p)], 3, MPI_UINT64_T, p, 0, s.comm, &requests.back());
    }
  for (int p = 0; p < s.count; ++p)
    if (p != s.index) {
      requests.emplace_back();
      MPI_Isend(mine, 3, MPI_UINT64_T, p, 0, s.comm, &requests.back());
    }
  if (!wait_until_deadline(requests.data(), static_cast<int>(requests.size()))) {
    std::string missing;
    for (std::size_t r = 0; r < from.size(); ++r) {
      int arrived = 0;
      MPI_Test(&requests[r], &arrived, MPI_STATUS_IGNORE);
      if (!arrived) missing += (missing.empty() ? "process " : ", ") + std::to_string(from[r]);
    }
    fail(waited(collective, what) + (missing.empty() ? std::string("one has died or stopped") : missing + " has not reached it") +
         " (died, stopped, or stuck before it); ending the run");
  }
  std::copy(mine, mine + 3, &all[3 * static_cast<std::size_t>(s.index)]);
  const std::string here = "collective " + std::to_string(collective) + " (" + what + "): ";
  for (int p = 0; p < s.count; ++p) {
    const std::uint64_t* theirs = &all[3 * static_cast<std::size_t>(p)];
    if (theirs[0] != collective)
      fail(here + "process " + std::to_string(p) + " is at its collective " + std::to_string(theirs[0]) +
           "; every process must run the same programs in the same order");
    if (theirs[1] != program)
      fail(here + "this process runs program " + hex(program) + ", process " + std::to_string(p) + " runs program " + hex(theirs[1]) +
           "; the fingerprint covers the program, its mesh and layouts, the compiler, the instruction sets and the kernel "
           "settings (TESSEL_MATH_PATH, TESSEL_BF16_PRODUCTS): start every process from the same binary, with the same settings, on "
           "machines of one kind");
    if (theirs[2] != bytes)
      fail(here + "this process sends " + std::to_string(bytes) + " bytes, process " + std::to_string(p) + " sends " +
           std::to_string(theirs[2]) + "; every process must run the same program over the same mesh");
  }
  if (bytes > static_cast<std::size_t>(INT_MAX))
    fail(here + "moves " + std::to_string(bytes) + " bytes, more than one MPI message holds (2^31 - 1)");
  return collective;
}

std::vector<int> as_ints(const std::size_t* values) {
  std::vector<int> out(static_cast<std::size_t>(run_state().count));
  for (std::size_t q = 0; q < out.size(); ++q) out[q] = static_cast<int>(values[q]);
  return out;
}
std::size_t total(const std::size_t* values) {
  std::size_t n = 0;
  for (int q = 0; q < run_state().count; ++q) n += values[q];
  return n;
}

// The data's own calls are non-blocking too, waited on with the same deadline: a process stopped (SIGSTOP)
// or killed after the check must not leave the others inside a blocking MPI call, spinning for ever.
void all_gather(std::uint64_t program, const void* send, std::size_t bytes, void* received) {
  const std::uint64_t collective = check_same_collective(program, bytes, "all_gather");
  MPI_Request request;
  MPI_Iallgather(send, static_cast<int>(bytes), MPI_BYTE, received, static_cast<int>(bytes), MPI_BYTE, run_state().comm, &request);
  wait_for_data(request, "all_gather", collective);
}

void exchange(std::uint64_t program, const void* send, const std::size_t* sizes, const std::size_t* offsets, void* received,
              const std::size_t* received_sizes, const std::size_t* received_offsets) {
  const std::uint64_t collective = check_same_collective(program, total(sizes), "exchange");
  const std::vector<int> n = as_ints(sizes), at = as_ints(offsets), rn = as_ints(received_sizes), rat = as_ints(received_offsets);
  MPI_Request request;
  MPI_Ialltoallv(send, n.data(), at.data(), MPI_BYTE, received, rn.data(), rat.data(), MPI_BYTE, run_state().comm, &request);
  wait_for_data(request, "exchange", collective);
}

void gather_blocks(std::uint64_t program, void* buffer, const std::size_t* sizes, const std::size_t* offsets) {
  const std::uint64_t collective = check_same_collective(program, total(sizes), "gather_blocks");
  const std::vector<int> n = as_ints(sizes), at = as_ints(offsets);
  MPI_Request request;
  MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_BYTE, buffer, n.data(), at.data(), MPI_BYTE, run_state().comm, &request);
  wait_for_data(request, "gather_blocks", collective);
}

// Point to point, for a pipeline's stages: each message is a header (program, tag, bytes) and the data, on
// MPI tag 1 + tag (0 is the collectives' checks), so that a receive takes its own message whatever the
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
  std::atexit(finalize_at_exit);
  kernels::install_process_transport(
      {static_cast<std::size_t>(s.index), static_cast<std::size_t>(s.count), &all_gather, &exchange, &gather_blocks, &send, &receive, &flush});
}

}  // namespace

void init(int& argc, char**& argv, options o) { start(&argc, &argv, o); }
void init(options o) { start(nullptr, nullptr, o); }

void abort(std::string_view message) { fail(std::string(message)); }

}  // namespace tessel::distributed
