#include "policy/model/safetensors.hpp"

#include <bit>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "policy/text/json.hpp"

namespace caf_agent::policy {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

// Rationale: a header larger than 100 MB is corrupt (real ones are a few hundred KB even for
// sharded 70B checkpoints); the bound keeps a garbage length from allocating gigabytes.
constexpr uint64_t max_header_bytes = 100ull << 20;

const char* dtype_name(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat32:
      return "F32";
    case torch::kBFloat16:
      return "BF16";
    case torch::kFloat16:
      return "F16";
    default:
      return nullptr;
  }
}

std::optional<torch::ScalarType> dtype_of(const std::string& name) {
  if (name == "F32") return torch::kFloat32;
  if (name == "BF16") return torch::kBFloat16;
  if (name == "F16") return torch::kFloat16;
  return std::nullopt;
}

// One header entry, validated against the data region's size.
struct entry {
  std::string name;
  torch::ScalarType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

result<entry> parse_entry(const std::string& name, const json_value& v, uint64_t data_bytes) {
  const json_value* dtype = v.find("dtype");
  const json_value* shape = v.find("shape");
  const json_value* offsets = v.find("data_offsets");
  if (!dtype || !dtype->is_string() || !shape || !shape->is_array() || !offsets || !offsets->is_array() ||
      offsets->as_array().size() != 2)
    return fail("tensor '" + name + "' needs dtype, shape and data_offsets [begin, end]");
  auto type = dtype_of(dtype->as_string());
  if (!type) return fail("tensor '" + name + "' has unsupported dtype " + dtype->as_string() + " (F32, BF16, F16)");
  entry e{name, *type, {}, 0, 0};
  uint64_t numel = 1;
  for (const auto& dim : shape->as_array()) {
    if (!dim.is_integer() || dim.as_integer() < 0) return fail("tensor '" + name + "' has a bad shape");
    e.shape.push_back(dim.as_integer());
    numel *= static_cast<uint64_t>(dim.as_integer());
  }
  const auto& o = offsets->as_array();
  if (!o[0].is_integer() || !o[1].is_integer() || o[0].as_integer() < 0 || o[1].as_integer() < o[0].as_integer())
    return fail("tensor '" + name + "' has bad data_offsets");
  e.begin = static_cast<uint64_t>(o[0].as_integer());
  e.end = static_cast<uint64_t>(o[1].as_integer());
  if (e.end > data_bytes) return fail("tensor '" + name + "' lies past the end of the file (truncated?)");
  if (e.end - e.begin != numel * c10::elementSize(e.dtype))
    return fail("tensor '" + name + "': data_offsets span does not match dtype and shape");
  return e;
}

std::string escape(const std::string& s) {
  std::string out;
  append_json_string(out, s);
  return out;
}

}  // namespace

result<tensor_map> read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail("cannot open " + path);
  std::error_code ec;
  const uint64_t file_bytes = std::filesystem::file_size(path, ec);
  uint64_t header_bytes = 0;
  if (ec || file_bytes < 8 || !in.read(reinterpret_cast<char*>(&header_bytes), 8))
    return fail(path + ": too short for a safetensors file");
  if (header_bytes > max_header_bytes || header_bytes > file_bytes - 8)
    return fail(path + ": header length " + std::to_string(header_bytes) + " exceeds the file (corrupt or truncated)");
  std::string header(header_bytes, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(header_bytes))) return fail(path + ": cannot read header");
  auto parsed = parse_json(header);
  if (!parsed) return fail(path + ": corrupt header: " + parsed.error().message);
  if (!parsed.value().is_object()) return fail(path + ": header is not a JSON object");
  const uint64_t data_bytes = file_bytes - 8 - header_bytes;
  tensor_map out;
  for (const auto& [name, value] : parsed.value().as_object()) {
    if (name == "__metadata__") continue;
    auto e = parse_entry(name, value, data_bytes);
    if (!e) return fail(path + ": " + e.error().message);
    auto tensor = torch::empty(e.value().shape, torch::TensorOptions().dtype(e.value().dtype));
    in.seekg(static_cast<std::streamoff>(8 + header_bytes + e.value().begin));
    const auto bytes = static_cast<std::streamsize>(e.value().end - e.value().begin);
    if (!in.read(static_cast<char*>(tensor.data_ptr()), bytes))
      return fail(path + ": cannot read data of tensor '" + name + "'");
    if (!out.emplace(name, std::move(tensor)).second) return fail(path + ": duplicate tensor '" + name + "'");
  }
  return out;
}

status write_safetensors(const std::string& path, const tensor_map& tensors) {
  std::vector<torch::Tensor> cpu;
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  uint64_t offset = 0;
  try {
    for (const auto& [name, tensor] : tensors) {
      const char* dtype = dtype_name(tensor.scalar_type());
      if (dtype == nullptr) return fail("cannot save tensor '" + name + "': dtype must be F32, BF16 or F16");
      cpu.push_back(tensor.detach().to(torch::kCPU).contiguous());
      const uint64_t bytes = cpu.back().nbytes();
      header += "," + escape(name) + ":{\"dtype\":\"" + dtype + "\",\"shape\":[";
      for (int64_t i = 0; i < tensor.dim(); ++i) header += (i ? "," : "") + std::to_string(tensor.size(i));
      header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + bytes) + "]}";
      offset += bytes;
    }
  } catch (const c10::Error& e) {
    return fail("cannot copy tensors for saving: " + std::string(e.what_without_backtrace()));
  }
  header += "}";
  // Rationale: pad with spaces so the data starts 8-byte aligned, as the reference writer does.
  header.append((8 - header.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const uint64_t header_bytes = header.size();
  out.write(reinterpret_cast<const char*>(&header_bytes), 8);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (const auto& t : cpu) out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
  if (!out.flush()) return fail("cannot write " + path);
  return {};
}

result<tensor_map> read_checkpoint_tensors(const std::string& model_dir) {
  namespace fs = std::filesystem;
  const fs::path dir(model_dir);
  if (fs::exists(dir / "model.safetensors")) return read_safetensors((dir / "model.safetensors").string());
  const fs::path index_path = dir / "model.safetensors.index.json";
  std::ifstream in(index_path, std::ios::binary);
  if (!in) return fail(model_dir + ": neither model.safetensors nor model.safetensors.index.json exists");
  std::ostringstream text;
  text << in.rdbuf();
  auto index = parse_json(text.str());
  if (!index) return fail(index_path.string() + ": " + index.error().message);
  const json_value* weight_map = index.value().find("weight_map");
  if (!weight_map || !weight_map->is_object()) return fail(index_path.string() + ": no weight_map object");
  std::set<std::string> shards;
  for (const auto& [name, file] : weight_map->as_object()) {
    if (!file.is_string() || file.as_string().find('/') != std::string::npos)
      return fail(index_path.string() + ": weight_map entry '" + name + "' must name a file in the directory");
    shards.insert(file.as_string());
  }
  tensor_map out;
  for (const auto& shard : shards) {
    auto part = read_safetensors((dir / shard).string());
    if (!part) return part.error();
    out.merge(part.value());
  }
  for (const auto& [name, file] : weight_map->as_object())
    if (!out.count(name)) return fail(index_path.string() + ": tensor '" + name + "' is not in " + file.as_string());
  return out;
}

status write_checkpoint_tensors(const std::string& model_dir, const tensor_map& tensors, int64_t max_shard_bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(model_dir, ec);
  if (ec) return fail("cannot create " + model_dir + ": " + ec.message());
  int64_t total = 0;
  std::vector<tensor_map> shards(1);
  int64_t shard_bytes = 0;
  for (const auto& [name, tensor] : tensors) {
    const int64_t bytes = static_cast<int64_t>(tensor.nbytes());
    if (max_shard_bytes > 0 && shard_bytes > 0 && shard_bytes + bytes > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().emplace(name, tensor);
    shard_bytes += bytes;
    total += bytes;
  }
  // A stale file of the other layout would shadow or contradict the new one.
  fs::remove(fs::path(model_dir) / (shards.size() == 1 ? "model.safetensors.index.json" : "model.safetensors"), ec);
  if (shards.size() == 1) return write_safetensors((fs::path(model_dir) / "model.safetensors").string(), tensors);
  std::string weight_map;
  char file[64];
  for (size_t i = 0; i < shards.size(); ++i) {
    std::snprintf(file, sizeof file, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
    if (auto s = write_safetensors((fs::path(model_dir) / file).string(), shards[i]); !s) return s;
    for (const auto& [name, tensor] : shards[i])
      weight_map += std::string(weight_map.empty() ? "" : ",") + escape(name) + ":" + escape(file);
  }
  std::ofstream index(fs::path(model_dir) / "model.safetensors.index.json", std::ios::trunc);
  index << "{\"metadata\":{\"total_size\":" << total << "},\"weight_map\":{" << weight_map << "}}\n";
  if (!index.flush()) return fail("cannot write the index in " + model_dir);
  return {};
}

}  // namespace caf_agent::policy
