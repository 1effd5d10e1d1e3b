// Definitions of tessel/io/sharded_checkpoint.hpp's functions: compiled once, in the tessel library
// (src/tessel.cpp), after checkpoint-inl.hpp, whose hasher and checksum they share.
#pragma once

#include "tessel/io/sharded_checkpoint.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "tessel/io/atomic_file.hpp"
#include "tessel/io/checkpoint-inl.hpp"
#include "tessel/io/json.hpp"
#include "tessel/io/safetensors.hpp"
#include "tessel/kernels/collective.hpp"

namespace tessel::io {

std::uint64_t box::volume() const {
  std::uint64_t v = 1;
  for (const std::uint64_t e : extent) v *= e;
  return v;
}

std::size_t tensor_layout::devices() const {
  std::size_t n = 1;
  for (const std::size_t s : mesh) n *= s;
  return n;
}

std::size_t tensor_layout::processes() const {
  std::size_t n = 1;
  for (std::size_t a = 0; a < process_axes; ++a) n *= mesh[a];
  return n;
}

namespace detail {

std::vector<std::size_t> mesh_coordinates(const std::vector<std::size_t>& mesh, std::size_t device) {
  std::vector<std::size_t> c(mesh.size());
  for (std::size_t a = mesh.size(); a-- > 0;) {
    c[a] = device % mesh[a];
    device /= mesh[a];
  }
  return c;
}

}  // namespace detail

box tensor_layout::block_of(std::size_t device) const {
  const std::vector<std::size_t> c = detail::mesh_coordinates(mesh, device);
  box b{std::vector<std::uint64_t>(dims.size()), std::vector<std::uint64_t>(dims.size())};
  for (std::size_t d = 0; d < dims.size(); ++d) {
    std::uint64_t n = 1, k = 0;
    for (const std::size_t a : cuts[d]) {
      n *= mesh[a];
      k = k * mesh[a] + c[a];
    }
    b.extent[d] = dims[d] / n;
    b.start[d] = k * b.extent[d];
  }
  return b;
}

std::vector<tensor_layout::piece> tensor_layout::pieces() const {
  const std::size_t local = devices() / processes();
  std::vector<piece> out;
  std::vector<box> done;
  for (std::size_t d = 0; d < devices(); ++d) {
    const box b = block_of(d);
    if (std::find(done.begin(), done.end(), b) != done.end()) continue;
    done.push_back(b);
    std::vector<std::size_t> holders;  // the processes holding b, in order
    for (std::size_t e = d; e < devices(); ++e)
      if (const std::size_t p = e / local; block_of(e) == b && std::find(holders.begin(), holders.end(), p) == holders.end())
        holders.push_back(p);
    const std::uint64_t rows = b.extent.empty() ? 0 : b.extent[0];
    const std::uint64_t cuts = rows == 0 ? 1 : std::min<std::uint64_t>(holders.size(), rows);
    for (std::size_t k = 0; k < cuts; ++k) {
      box part = b;
      if (rows != 0) {
        part.start[0] = b.start[0] + rows * k / cuts;
        part.extent[0] = rows * (k + 1) / cuts - rows * k / cuts;
      }
      out.push_back({holders[k], std::move(part)});
    }
  }
  return out;
}

std::vector<box> tensor_layout::boxes_of_process(std::size_t process) const {
  const std::size_t local = devices() / processes();
  std::vector<box> out;
  for (std::size_t d = process * local; d < (process + 1) * local; ++d) {
    box b = block_of(d);
    if (std::find(out.begin(), out.end(), b) == out.end()) out.push_back(std::move(b));
  }
  return out;
}

namespace detail {

void copy_region(const std::byte* from, const box& from_box, std::byte* to, const box& to_box, const box& region,
                 std::size_t bytes) {
  const std::size_t rank = region.extent.size();
  if (region.volume() == 0) return;
  if (rank == 0) {
    std::memcpy(to, from, bytes);
    return;
  }
  // Row-major strides (in elements) of both arrays; rows of the last dimension are contiguous in both.
  std::vector<std::uint64_t> from_stride(rank), to_stride(rank);
  from_stride[rank - 1] = to_stride[rank - 1] = 1;
  for (std::size_t d = rank - 1; d-- > 0;) {
    from_stride[d] = from_stride[d + 1] * from_box.extent[d + 1];
    to_stride[d] = to_stride[d + 1] * to_box.extent[d + 1];
  }
  const std::uint64_t row = region.extent[rank - 1] * bytes;
  std::vector<std::uint64_t> at(rank, 0);  // the position inside the region, the last dimension left at 0
  for (;;) {
    std::uint64_t f = 0, t = 0;
    for (std::size_t d = 0; d < rank; ++d) {
      f += (region.start[d] + at[d] - from_box.start[d]) * from_stride[d];
      t += (region.start[d] + at[d] - to_box.start[d]) * to_stride[d];
    }
    std::memcpy(to + t * bytes, from + f * bytes, row);
    std::size_t d = rank - 1;
    while (d-- > 0) {
      if (++at[d] < region.extent[d]) break;
      at[d] = 0;
    }
    if (d == static_cast<std::size_t>(-1)) return;
  }
}

std::optional<box> overlap(const box& a, const box& b) {
  box o{std::vector<std::uint64_t>(a.start.size()), std::vector<std::uint64_t>(a.start.size())};
  for (std::size_t d = 0; d < a.start.size(); ++d) {
    const std::uint64_t lo = std::max(a.start[d], b.start[d]);
    const std::uint64_t hi = std::min(a.start[d] + a.extent[d], b.start[d] + b.extent[d]);
    if (hi <= lo) return std::nullopt;
    o.start[d] = lo;
    o.extent[d] = hi - lo;
  }
  return o;
}

std::size_t process_of_mesh(std::size_t mesh_processes, std::string_view who) {
  const kernels::process_transport& run = kernels::processes();
  if (mesh_processes != 1 && mesh_processes != run.count)
    throw std::invalid_argument(std::string(who) + ": the mesh spans " + std::to_string(mesh_processes) +
                                " processes, the run has " + std::to_string(run.count) +
                                "; fix: start the run with mpirun -np " + std::to_string(mesh_processes) +
                                " (and tessel::distributed::init), or use a mesh of the run's processes");
  return run.index;
}

std::string step_name(std::uint64_t step) { return "step-" + step_digits(step); }

std::string process_file_name(std::size_t process, std::size_t count) {
  return "process-" + std::to_string(process) + "-of-" + std::to_string(count) + ".safetensors";
}

std::string block_name(const std::string& tensor, const box& where) {
  std::string s = tensor + "@";
  for (std::size_t d = 0; d < where.start.size(); ++d) {
    if (d) s += ',';
    s += std::to_string(where.start[d]);
  }
  return s;
}

std::uint64_t block_hash(const std::byte* data, std::size_t n) {
  hasher h;
  h.word(n);
  h.bytes(data, n);
  return h.value();
}

}  // namespace detail

sharded_snapshot& sharded_snapshot::set(std::string key, std::string value) {
  if (key.starts_with("tessel."))
    throw std::invalid_argument("tessel::io::sharded_snapshot::set: the key '" + key + "' is reserved (\"tessel.\" prefix)");
  metadata_[std::move(key)] = std::move(value);
  return *this;
}

sharded_snapshot& sharded_snapshot::set_key(random::key k) {
  metadata_["tessel.rng_key"] = detail::key_text(k);
  return *this;
}

void sharded_snapshot::add_leaf(const std::string& name, std::string dtype, std::size_t element_bytes,
                                const tensor_layout& layout, const std::byte* data, std::size_t process) {
  for (const tensor_entry& t : tensors_)
    if (t.name == name)
      throw std::invalid_argument("tessel::io::sharded_snapshot::add: a tensor named '" + name + "' exists already");
  tensors_.push_back({name, std::move(dtype), element_bytes, layout});
  const box whole{std::vector<std::uint64_t>(layout.dims.size(), 0), layout.dims};
  for (const tensor_layout::piece& p : layout.pieces()) {
    if (p.process != process) continue;
    block b{tensors_.size() - 1, p.where, {}};
    b.bytes.resize(b.where.volume() * element_bytes);
    detail::copy_region(data, whole, b.bytes.data(), b.where, b.where, element_bytes);
    blocks_.push_back(std::move(b));
  }
}

namespace detail {

// What one process tells the others at each stage of a save: whether it succeeded (else why), and after
// writing, its file's size and every block's offset and hash.
struct save_report {
  static constexpr std::size_t message_bytes = 240;
  std::size_t blocks;  // the most blocks any process writes

  std::size_t size() const { return 16 + message_bytes + 16 * blocks; }
};

class save_exchange {
 public:
  save_exchange(std::uint64_t program, std::size_t max_blocks) : program_(program), report_{max_blocks} {}

  // Every process's record of this stage, in process order; `failure` empty means success.
  std::vector<std::vector<std::byte>> exchange(const std::string& failure, std::uint64_t file_bytes,
                                               const std::vector<std::pair<std::uint64_t, std::uint64_t>>& blocks) const {
    const kernels::process_transport& run = kernels::processes();
    std::vector<std::byte> mine(report_.size());
    const std::uint64_t ok = failure.empty() ? 1 : 0;
    std::memcpy(mine.data(), &ok, 8);
    std::memcpy(mine.data() + 8, &file_bytes, 8);
    std::memcpy(mine.data() + 16, failure.data(), std::min(failure.size(), save_report::message_bytes - 1));
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      std::memcpy(mine.data() + 16 + save_report::message_bytes + 16 * i, &blocks[i].first, 8);
      std::memcpy(mine.data() + 16 + save_report::message_bytes + 16 * i + 8, &blocks[i].second, 8);
    }
    std::vector<std::vector<std::byte>> all;
    if (run.count == 1 || run.all_gather == nullptr) {
      all.push_back(std::move(mine));
      return all;
    }
    std::vector<std::byte> received(report_.size() * run.count);
    run.all_gather(program_, mine.data(), mine.size(), received.data());
    for (std::size_t p = 0; p < run.count; ++p)
      if (p == run.index) all.push_back(mine);
      else all.emplace_back(received.begin() + static_cast<std::ptrdiff_t>(p * report_.size()),
                            received.begin() + static_cast<std::ptrdiff_t>((p + 1) * report_.size()));
    return all;
  }

  static bool ok(const std::vector<std::byte>& r) {
    std::uint64_t v;
    std::memcpy(&v, r.data(), 8);
    return v == 1;
  }
  static std::uint64_t file_bytes(const std::vector<std::byte>& r) {
    std::uint64_t v;
    std::memcpy(&v, r.data() + 8, 8);
    return v;
  }
  static std::string message(const std::vector<std::byte>& r) {
    const char* text = reinterpret_cast<const char*>(r.data() + 16);
    return std::string(text, strnlen(text, save_report::message_bytes));
  }
  static std::pair<std::uint64_t, std::uint64_t> block(const std::vector<std::byte>& r, std::size_t i) {
    std::pair<std::uint64_t, std::uint64_t> v;
    std::memcpy(&v.first, r.data() + 16 + save_report::message_bytes + 16 * i, 8);
    std::memcpy(&v.second, r.data() + 16 + save_report::message_bytes + 16 * i + 8, 8);
    return v;
  }

 private:
  std::uint64_t program_;
  save_report report_;
};

// Throws in every process if any process failed this stage, naming the first that did.
void require_all(const std::vector<std::vector<std::byte>>& reports, const std::string& prefix, std::string_view stage) {
  for (std::size_t p = 0; p < reports.size(); ++p)
    if (!save_exchange::ok(reports[p]))
      throw checkpoint_error(prefix + "process " + std::to_string(p) + " of " + std::to_string(reports.size()) +
                             " failed to " + std::string(stage) + ": " + save_exchange::message(reports[p]) +
                             "; the checkpoints already committed are untouched");
}

void write_dims(std::string& out, const std::vector<std::uint64_t>& dims) {
  out += '[';
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(dims[i]);
  }
  out += ']';
}

template <class F>
std::string failure_of(F&& f) {
  try {
    f();
    return {};
  } catch (const std::exception& e) {
    return e.what()[0] ? e.what() : "unknown error";
  }
}

// Writes this process's file of blocks (synced); `placed` gets every block's offset in it and its hash.
// Returns the file's size.
std::uint64_t write_blocks(const std::filesystem::path& file, const sharded_snapshot& s, std::size_t me, std::size_t count,
                           std::vector<std::pair<std::uint64_t, std::uint64_t>>& placed) {
  safetensors_file f;
  for (const sharded_snapshot::block& b : s.blocks()) {
    const sharded_snapshot::tensor_entry& e = s.tensors()[b.tensor];
    f.tensors.push_back({block_name(e.name, b.where), e.dtype, b.where.extent, b.bytes});
  }
  f.metadata["tessel.format"] = std::string(sharded_checkpoint_format);
  f.metadata["tessel.step"] = std::to_string(s.step());
  f.metadata["tessel.process"] = std::to_string(me) + " of " + std::to_string(count);
  const std::vector<std::byte> bytes = serialize_safetensors(f);
  std::uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  std::uint64_t at = 8 + header;
  for (const sharded_snapshot::block& b : s.blocks()) {
    placed.emplace_back(at, block_hash(b.bytes.data(), b.bytes.size()));
    at += b.bytes.size();
  }
  write_file_atomically(file, [&](output_file& out) { out.write(std::span<const std::byte>(bytes)); });
  return bytes.size();
}

// index.json: the metadata, every process's file and its size, every tensor with its blocks (file, box,
// offset and hash as their writers reported them).
std::string index_json(const sharded_snapshot& s, const std::map<std::string, std::string>& metadata,
                       const std::vector<std::vector<std::pair<std::size_t, box>>>& blocks_of,
                       const std::vector<std::vector<std::byte>>& written) {
  const std::size_t count = written.size();
  std::string index = "{\"format\":";
  json::write_string(index, sharded_checkpoint_format);
  index += ",\"step\":" + std::to_string(s.step()) + ",\"processes\":" + std::to_string(count) + ",\"metadata\":{";
  bool first = true;
  for (const auto& [k, v] : metadata) {
    if (!first) index += ',';
    first = false;
    json::write_string(index, k);
    index += ':';
    json::write_string(index, v);
  }
  index += "},\"files\":[";
  for (std::size_t p = 0; p < count; ++p) {
    if (p) index += ',';
    index += "{\"name\":";
    json::write_string(index, process_file_name(p, count));
    index += ",\"bytes\":" + std::to_string(save_exchange::file_bytes(written[p])) + "}";
  }
  index += "],\"tensors\":[";
  for (std::size_t t = 0; t < s.tensors().size(); ++t) {
    const sharded_snapshot::tensor_entry& e = s.tensors()[t];
    index += t ? ",\n" : "\n";
    index += "{\"name\":";
    json::write_string(index, e.name);
    index += ",\"dtype\":";
    json::write_string(index, e.dtype);
    index += ",\"shape\":";
    write_dims(index, e.layout.dims);
    index += ",\"blocks\":[";
    bool first_block = true;
    for (std::size_t p = 0; p < count; ++p)
      for (std::size_t i = 0; i < blocks_of[p].size(); ++i) {
        if (blocks_of[p][i].first != t) continue;
        const box& where = blocks_of[p][i].second;
        const auto [offset, hash] = save_exchange::block(written[p], i);
        index += first_block ? "" : ",";
        first_block = false;
        index += "{\"file\":" + std::to_string(p) + ",\"start\":";
        write_dims(index, where.start);
        index += ",\"shape\":";
        write_dims(index, where.extent);
        index += ",\"offset\":" + std::to_string(offset) + ",\"hash\":\"" + hex64(hash) + "\"}";
      }
    index += "]}";
  }
  index += "\n]}\n";
  return index;
}

// After the commit of `step_saved`: the newest `keep` committed steps stay (of this run, when it is named;
// never deleting one newer than `step_saved`), damaged ones of a named run go, and what interrupted saves left.
void prune_sharded(const std::filesystem::path& dir, std::uint64_t step_saved, const sharded_save_options& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::uint64_t> kept;
  for (const std::uint64_t step : sharded_steps(dir)) {
    if (options.run.empty() || step == step_saved) {
      kept.push_back(step);
      continue;
    }
    try {
      const sharded_checkpoint c = read_sharded(dir / step_name(step));
      if (c.has(checkpoint_run_key) && c.get(checkpoint_run_key) == options.run) kept.push_back(step);
    } catch (const std::exception&) {
      fs::remove_all(dir / step_name(step), ec);  // damaged: never usable, whatever its step
    }
  }
  for (std::size_t i = 0; i + options.keep < kept.size() && kept[i] < step_saved; ++i)
    fs::remove_all(dir / step_name(kept[i]), ec);
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("step-") && (name.ends_with(".partial") || name.ends_with(".replaced")))
      fs::remove_all(entry.path(), ec);
  }
}

}  // namespace detail

void save_sharded(const std::filesystem::path& dir, const sharded_snapshot& s, sharded_save_options options) {
  namespace fs = std::filesystem;
  const kernels::process_transport& run = kernels::processes();
  const std::size_t me = run.index, count = run.count;
  const std::string step_dir = detail::step_name(s.step());
  const fs::path final_path = dir / step_dir, staging = dir / (step_dir + ".partial");
  const std::string prefix = "tessel::io::save_sharded: " + quoted(final_path) + " not saved: ";
  if (options.keep == 0) throw std::invalid_argument("tessel::io::save_sharded: keep must be at least 1");

  // Every process knows every process's blocks (the layouts say), and the fingerprint of what is saved
  // makes processes that save different trees or layouts refuse at the first exchange.
  fingerprint program;
  program.add("tessel.io.save_sharded");
  program.add(s.step());
  std::vector<std::vector<std::pair<std::size_t, box>>> blocks_of(count);  // per process: (tensor, box)
  for (std::size_t t = 0; t < s.tensors().size(); ++t) {
    const sharded_snapshot::tensor_entry& e = s.tensors()[t];
    program.add(e.name);
    program.add(e.dtype);
    for (const std::uint64_t d : e.layout.dims) program.add(d);
    for (const std::size_t a : e.layout.mesh) program.add(a);
    program.add(e.layout.process_axes);
    for (const auto& axes : e.layout.cuts) {
      program.add(axes.size());
      for (const std::size_t a : axes) program.add(a);
    }
    for (const tensor_layout::piece& p : e.layout.pieces()) blocks_of[p.process].emplace_back(t, p.where);
  }
  std::size_t max_blocks = 0;
  for (const auto& b : blocks_of) max_blocks = std::max(max_blocks, b.size());
  if (blocks_of[me].size() != s.blocks().size())
    throw std::logic_error(prefix + "the snapshot holds " + std::to_string(s.blocks().size()) +
                           " blocks, its layouts give this process " + std::to_string(blocks_of[me].size()));
  const detail::save_exchange exchange(program.value, max_blocks);

  // 1. A fresh staging directory (what an interrupted save of this step left is removed).
  std::string failure;
  if (me == 0)
    failure = detail::failure_of([&] {
      fs::create_directories(dir);
      fs::remove_all(staging);
      fs::create_directory(staging);
    });
  detail::require_all(exchange.exchange(failure, 0, {}), prefix, "create " + quoted(staging));

  // 2. Every process writes its blocks, synced, and reports where each one is and its hash.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> placed;
  std::uint64_t file_bytes = 0;
  failure = detail::failure_of(
      [&] { file_bytes = detail::write_blocks(staging / detail::process_file_name(me, count), s, me, count, placed); });
  const auto written = exchange.exchange(failure, file_bytes, placed);
  detail::require_all(written, prefix, "write its blocks");

  // 3. Process 0 writes the index and commits by renaming the directory, then prunes.
  failure.clear();
  if (me == 0)
    failure = detail::failure_of([&] {
      std::map<std::string, std::string> metadata = s.metadata();
      if (!options.run.empty()) metadata[std::string(checkpoint_run_key)] = options.run;
      const std::string index = detail::index_json(s, metadata, blocks_of, written);
      write_file_atomically(staging / "index.json", [&](output_file& out) { out.write(index); });

      const fs::path replaced = dir / (step_dir + ".replaced");
      fs::remove_all(replaced);
      if (fs::exists(final_path)) fs::rename(final_path, replaced);
      fs::rename(staging, final_path);
      io::detail::sync_directory(final_path);
      std::error_code ec;
      fs::remove_all(replaced, ec);

      detail::prune_sharded(dir, s.step(), options);
    });
  detail::require_all(exchange.exchange(failure, 0, {}), prefix, "commit the checkpoint");
}

const std::string& sharded_checkpoint::get(std::string_view key) const {
  return detail::metadata_entry(metadata, key, path, "tessel::io::sharded_checkpoint::get");
}

random::key sharded_checkpoint::key() const {
  return detail::key_of_metadata(metadata, path, "tessel::io::sharded_checkpoint::key");
}

std::vector<std::byte> sharded_checkpoint::read_block(const stored_tensor& t, const stored_block& b,
                                                      std::size_t element_bytes) const {
  const stored_file& sf = files[b.file];
  const std::filesystem::path p = path / sf.name;
  const std::string name = detail::block_name(t.name, b.where);
  input_file in(p, "tessel::io::sharded_checkpoint::load");
  if (in.size() != sf.bytes)
    in.fail("has " + std::to_string(in.size()) + " bytes, the index records " + std::to_string(sf.bytes) +
            ": truncated or replaced after the save");
  std::vector<std::byte> bytes(b.where.volume() * element_bytes);
  in.seek(b.offset);
  in.read_exact(bytes, "block '" + name + "'");
  bytes_read_ += bytes.size();
  if (const std::uint64_t h = detail::block_hash(bytes.data(), bytes.size()); h != b.hash)
    in.fail("corrupted: block '" + name + "' (" + std::to_string(bytes.size()) + " bytes at offset " +
            std::to_string(b.offset) + ") hashes to " + detail::hex64(h) + ", the index records " +
            detail::hex64(b.hash));
  return bytes;
}

void sharded_checkpoint::fill(const std::vector<request>& requests, std::size_t process) const {
  std::vector<std::string> problems;
  std::vector<bool> used(tensors.size(), false);
  std::vector<std::size_t> found(requests.size(), tensors.size());
  for (std::size_t r = 0; r < requests.size(); ++r) {
    const request& q = requests[r];
    const safetensors_dtype* info = find_safetensors_dtype(q.dtype);
    const std::string program = std::string(info ? info->tessel_name : std::string_view(q.dtype)) + dims_text(q.dims);
    std::size_t at = tensors.size();
    for (std::size_t i = 0; i < tensors.size(); ++i)
      if (tensors[i].name == q.name) at = i;
    if (at == tensors.size()) {
      problems.push_back("tensor '" + q.name + "' (" + program + ") is missing");
      continue;
    }
    used[at] = true;
    const stored_tensor& t = tensors[at];
    const safetensors_dtype* stored = find_safetensors_dtype(t.dtype);
    const std::string file = std::string(stored ? stored->tessel_name : std::string_view(t.dtype)) + dims_text(t.dims);
    const bool dtype_ok = t.dtype == q.dtype, shape_ok = t.dims == q.dims;
    if (!dtype_ok || !shape_ok) {
      problems.push_back("tensor '" + q.name + "': the program has " + program + ", the checkpoint " + file + " (" +
                         (dtype_ok ? "" : "dtype") + (!dtype_ok && !shape_ok ? " and " : "") + (shape_ok ? "" : "shape") +
                         " differ)");
      continue;
    }
    found[r] = at;
  }
  for (std::size_t i = 0; i < used.size(); ++i)
    if (!used[i]) {
      const safetensors_dtype* stored = find_safetensors_dtype(tensors[i].dtype);
      problems.push_back("tensor '" + tensors[i].name + "' (" +
                         std::string(stored ? stored->tessel_name : std::string_view(tensors[i].dtype)) +
                         dims_text(tensors[i].dims) + ") is in the checkpoint but not in the program");
    }
  if (!problems.empty()) detail::throw_mismatch("tessel::io::sharded_checkpoint::load", path, problems);
  for (std::size_t r = 0; r < requests.size(); ++r) {
    const request& q = requests[r];
    const stored_tensor& t = tensors[found[r]];
    const box whole{std::vector<std::uint64_t>(q.dims.size(), 0), q.dims};
    const std::size_t layout_process = q.layout.processes() == 1 ? 0 : process;
    std::map<std::size_t, std::vector<std::byte>> read;  // stored block -> its bytes, each read once
    for (const box& needed : q.layout.boxes_of_process(layout_process)) {
      for (std::size_t i = 0; i < t.blocks.size(); ++i) {
        const std::optional<box> part = detail::overlap(needed, t.blocks[i].where);
        if (!part) continue;
        auto it = read.find(i);
        if (it == read.end()) it = read.emplace(i, read_block(t, t.blocks[i], q.element_bytes)).first;
        detail::copy_region(it->second.data(), t.blocks[i].where, q.data, whole, *part, q.element_bytes);
      }
    }
  }
}

void sharded_checkpoint::consolidate(const std::filesystem::path& file) const {
  safetensors_file out;
  for (const stored_tensor& t : tensors) {
    const safetensors_dtype* info = find_safetensors_dtype(t.dtype);
    safetensors_entry e{t.name, t.dtype, t.dims, {}};
    const box whole{std::vector<std::uint64_t>(t.dims.size(), 0), t.dims};
    e.bytes.resize(whole.volume() * info->size);
    for (const stored_block& b : t.blocks)
      detail::copy_region(read_block(t, b, info->size).data(), b.where, e.bytes.data(), whole, b.where, info->size);
    out.tensors.push_back(std::move(e));
  }
  out.metadata = metadata;
  out.metadata["tessel.format"] = std::string(checkpoint_format);
  out.metadata["tessel.step"] = std::to_string(step);
  out.metadata["tessel.checksum"] = detail::checkpoint_checksum(out);
  write_safetensors(file, out);
}

namespace detail {

// The reader of index.json: every field checked, every block inside its tensor and its file, and the blocks
// of each tensor tiling it exactly (disjoint, covering every element), so that load can trust the boxes.
sharded_checkpoint parse_index(const std::filesystem::path& dir, std::string_view text) {
  const std::string where = "tessel::io::read_sharded: " + quoted(dir / "index.json");
  const auto fail = [&](const std::string& what) -> void { throw checkpoint_error(where + ": " + what); };
  const json::value root = json::parse(text, where, {.max_depth = 6});
  const auto field = [&](const json::value& v, std::string_view key, json::kind k, const std::string& of) -> const json::value& {
    const json::value* f = v.type == json::kind::object ? v.find(key) : nullptr;
    if (!f || f->type != k)
      fail(of + " has no " + std::string(json::kind_name(k)) + " '" + std::string(key) + "'");
    return *f;
  };
  const auto integer = [&](const json::value& v, std::string_view key, const std::string& of) {
    const json::value& f = field(v, key, json::kind::number, of);
    if (!f.integer) fail(of + ": '" + std::string(key) + "' is not a whole number");
    return *f.integer;
  };
  const auto dims = [&](const json::value& v, std::string_view key, const std::string& of) {
    std::vector<std::uint64_t> out;
    for (const json::value& d : field(v, key, json::kind::array, of).items) {
      if (d.type != json::kind::number || !d.integer) fail(of + ": '" + std::string(key) + "' holds a value that is not a whole number");
      out.push_back(*d.integer);
    }
    return out;
  };

  sharded_checkpoint c;
  c.path = dir;
  if (field(root, "format", json::kind::string, "the index").text != sharded_checkpoint_format)
    fail("format is '" + root.find("format")->text + "', expected '" + std::string(sharded_checkpoint_format) + "'");
  c.step = integer(root, "step", "the index");
  c.processes = static_cast<std::size_t>(integer(root, "processes", "the index"));
  for (const json::member& m : field(root, "metadata", json::kind::object, "the index").members) {
    if (m.val.type != json::kind::string) fail("metadata '" + m.key + "' is not text");
    c.metadata[m.key] = m.val.text;
  }
  for (const json::value& f : field(root, "files", json::kind::array, "the index").items) {
    const std::string name = field(f, "name", json::kind::string, "a file").text;
    if (name != process_file_name(c.files.size(), c.processes))
      fail("file " + std::to_string(c.files.size()) + " is named '" + name + "', expected '" +
           process_file_name(c.files.size(), c.processes) + "'");
    c.files.push_back({name, integer(f, "bytes", "file '" + name + "'")});
  }
  if (c.files.size() != c.processes)
    fail("lists " + std::to_string(c.files.size()) + " files for " + std::to_string(c.processes) + " processes");
  for (const json::value& t : field(root, "tensors", json::kind::array, "the index").items) {
    sharded_checkpoint::stored_tensor st;
    st.name = field(t, "name", json::kind::string, "a tensor").text;
    const std::string of = "tensor '" + st.name + "'";
    for (const auto& other : c.tensors)
      if (other.name == st.name) fail(of + " is listed twice");
    st.dtype = field(t, "dtype", json::kind::string, of).text;
    const safetensors_dtype* info = find_safetensors_dtype(st.dtype);
    if (!info) fail(of + ": unknown dtype '" + st.dtype + "'");
    st.dims = dims(t, "shape", of);
    std::uint64_t total = 1, covered = 0, stored = 0;
    for (const sharded_checkpoint::stored_file& f : c.files) stored += f.bytes;
    for (const std::uint64_t d : st.dims) {
      if (d != 0 && total > stored / d) fail(of + " " + dims_text(st.dims) + " holds more elements than its files have bytes");
      total *= d;
    }
    for (const json::value& b : field(t, "blocks", json::kind::array, of).items) {
      sharded_checkpoint::stored_block sb;
      sb.file = static_cast<std::size_t>(integer(b, "file", of + "'s block"));
      sb.where = {dims(b, "start", of + "'s block"), dims(b, "shape", of + "'s block")};
      const std::string block = "block '" + block_name(st.name, sb.where) + "'";
      if (sb.file >= c.files.size()) fail(block + " is in file " + std::to_string(sb.file) + ", which the index does not list");
      if (sb.where.start.size() != st.dims.size() || sb.where.extent.size() != st.dims.size())
        fail(block + " has another rank than its tensor " + dims_text(st.dims));
      for (std::size_t d = 0; d < st.dims.size(); ++d)
        if (sb.where.start[d] > st.dims[d] || sb.where.extent[d] > st.dims[d] - sb.where.start[d])
          fail(block + " of shape " + dims_text(sb.where.extent) + " reaches beyond its tensor " + dims_text(st.dims));
      sb.offset = integer(b, "offset", block);
      const std::string& hash = field(b, "hash", json::kind::string, block).text;
      if (hash.size() != 16 || hash.find_first_not_of("0123456789abcdef") != std::string::npos)
        fail(block + ": hash '" + hash + "' is not 16 hex digits");
      sb.hash = std::stoull(hash, nullptr, 16);
      const std::uint64_t bytes = sb.where.volume() * info->size;
      if (sb.offset > c.files[sb.file].bytes || bytes > c.files[sb.file].bytes - sb.offset)
        fail(block + " (" + std::to_string(bytes) + " bytes at offset " + std::to_string(sb.offset) + ") lies beyond its file '" +
             c.files[sb.file].name + "' (" + std::to_string(c.files[sb.file].bytes) + " bytes)");
      for (const auto& other : st.blocks)
        if (overlap(other.where, sb.where) && sb.where.volume() != 0)
          fail(block + " overlaps block '" + block_name(st.name, other.where) + "'");
      covered += sb.where.volume();
      st.blocks.push_back(std::move(sb));
    }
    if (covered != total)
      fail(of + " " + dims_text(st.dims) + ": its blocks cover " + std::to_string(covered) + " of its " + std::to_string(total) +
           " elements");
    c.tensors.push_back(std::move(st));
  }
  return c;
}

}  // namespace detail

sharded_checkpoint read_sharded(const std::filesystem::path& dir) {
  input_file in(dir / "index.json", "tessel::io::read_sharded");
  if (in.size() > safetensors_max_header_bytes)
    in.fail("is " + std::to_string(in.size()) + " bytes, more than an index may be (" +
            std::to_string(safetensors_max_header_bytes) + ")");
  std::string text(in.size(), '\0');
  in.read_exact(std::as_writable_bytes(std::span(text.data(), text.size())), "the index");
  return detail::parse_index(dir, text);
}

std::vector<std::uint64_t> sharded_steps(const std::filesystem::path& dir) {
  std::vector<std::uint64_t> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() != 5 + 12 || !name.starts_with("step-")) continue;
    if (const auto step = detail::parse_u64(std::string_view(name).substr(5, 12))) out.push_back(*step);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<sharded_checkpoint> latest_sharded(const std::filesystem::path& dir) {
  std::vector<std::string> skipped;
  const std::vector<std::uint64_t> steps = sharded_steps(dir);
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    const std::filesystem::path p = dir / detail::step_name(*it);
    try {
      sharded_checkpoint c = read_sharded(p);
      if (c.step != *it)
        throw checkpoint_error("tessel::io::read_sharded: " + quoted(p) + ": the directory says step " + std::to_string(*it) +
                               ", its index records step " + std::to_string(c.step));
      c.skipped = std::move(skipped);
      return c;
    } catch (const std::exception& e) {  // format_error, checkpoint_error, bad_alloc
      skipped.push_back(p.string() + ": " + e.what());
    }
  }
  return std::nullopt;
}

}  // namespace tessel::io
