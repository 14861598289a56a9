#include "learner/checkpoint.hpp"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <c10/util/Exception.h>
#include <torch/cuda.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>

#include "base/remove_tree.hpp"
#include "policy/text/json.hpp"

namespace caf_agent::learner {
namespace {

namespace fs = std::filesystem;

constexpr const char* format_name = "caf-agent-learner-checkpoint";

std::string step_dir_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", static_cast<long long>(step));
  return buf;
}

status fsync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return fail("cannot open " + path.string() + " to fsync it");
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return fail("fsync failed on " + path.string());
  return {};
}

/// fsyncs every file below `dir`, then the directories themselves (deepest first).
status fsync_tree(const fs::path& dir) {
  std::vector<fs::path> dirs{dir};
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_directory())
      dirs.push_back(entry.path());
    else if (auto ok = fsync_path(entry.path()); !ok)
      return ok;
  }
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it)
    if (auto ok = fsync_path(*it); !ok) return ok;
  return {};
}

status write_bytes(const fs::path& path, const void* data, size_t bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!out.flush()) return fail("cannot write " + path.string());
  return {};
}

result<std::string> read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail("cannot read " + path.string());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// The default generators: the CPU's and each CUDA device's (name, generator).
std::vector<std::pair<std::string, at::Generator>> generators() {
  std::vector<std::pair<std::string, at::Generator>> out{
      {"rng_cpu.bin", at::globalContext().defaultGenerator(c10::Device(c10::kCPU))}};
  for (int64_t i = 0; i < static_cast<int64_t>(torch::cuda::device_count()); ++i)
    out.emplace_back("rng_cuda" + std::to_string(i) + ".bin",
                     at::globalContext().defaultGenerator(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(i))));
  return out;
}

std::string shape_text(c10::IntArrayRef s) {
  std::ostringstream out;
  out << s;
  return out.str();
}

/// Same names and shapes in `loaded` as in `current`; `what` names the file in errors.
status same_layout(const policy::tensor_map& current, const policy::tensor_map& loaded, const std::string& what) {
  for (const auto& [name, t] : current) {
    auto it = loaded.find(name);
    if (it == loaded.end()) return fail(what + " lacks tensor '" + name + "' (a checkpoint of another model?)");
    if (it->second.sizes() != t.sizes())
      return fail(what + ": tensor '" + name + "' has shape " + shape_text(it->second.sizes()) +
                  ", the model being trained has " + shape_text(t.sizes()));
  }
  for (const auto& [name, t] : loaded)
    if (!current.count(name)) return fail(what + " has tensor '" + name + "' that the model being trained lacks");
  return {};
}

status write_state(const fs::path& dir, const checkpoint_cursor& cursor, const std::vector<checkpoint_part>& parts,
                   const std::vector<std::string>& rng_files) {
  policy::json_object optimizers, rng;
  for (const auto& p : parts)
    if (p.optimizer) optimizers.emplace_back(p.name, policy::json_value(p.optimizer->steps()));
  policy::json_array files;
  for (const auto& f : rng_files) files.emplace_back(f);
  policy::json_object state{{"format", format_name},
                            {"version", checkpoint_version},
                            {"step", cursor.step},
                            {"data_cursor", cursor.data_cursor},
                            {"optimizer_steps", std::move(optimizers)},
                            {"rng", std::move(files)}};
  const std::string text = policy::dump_json(policy::json_value(std::move(state))) + "\n";
  return write_bytes(dir / "trainer_state.json", text.data(), text.size());
}

status save_into(const fs::path& dir, const checkpoint_cursor& cursor, const std::vector<checkpoint_part>& parts) {
  for (const auto& p : parts) {
    if (p.model == nullptr || p.name.empty()) return fail("save_checkpoint: a part without a name or model");
    if (auto ok = p.model->save((dir / p.name).string()); !ok) return ok.error();
    if (p.optimizer)
      if (auto ok =
              policy::write_safetensors((dir / (p.name + ".optimizer.safetensors")).string(), p.optimizer->state());
          !ok)
        return ok.error();
  }
  std::vector<std::string> rng_files;
  for (auto& [file, gen] : generators()) {
    std::lock_guard<std::mutex> lock(gen.mutex());
    auto state = gen.get_state().contiguous();
    if (auto ok = write_bytes(dir / file, state.data_ptr(), static_cast<size_t>(state.nbytes())); !ok) return ok;
    rng_files.push_back(file);
  }
  return write_state(dir, cursor, parts, rng_files);
}

/// Atomically replaces `root/latest` with `name`.
status point_latest(const fs::path& root, const std::string& name) {
  const fs::path tmp = root / ".latest.tmp";
  const std::string text = name + "\n";
  if (auto ok = write_bytes(tmp, text.data(), text.size()); !ok) return ok;
  if (auto ok = fsync_path(tmp); !ok) return ok;
  std::error_code ec;
  fs::rename(tmp, root / "latest", ec);
  if (ec) return fail("cannot rename " + tmp.string() + ": " + ec.message());
  return fsync_path(root);
}

result<fs::path> resolve(const fs::path& path) {
  if (fs::exists(path / "trainer_state.json")) return path;
  if (!fs::exists(path / "latest")) return fail(path.string() + " is neither a checkpoint nor a root with 'latest'");
  auto name = read_text(path / "latest");
  if (!name) return name.error();
  std::string n = name.value();
  while (!n.empty() && (n.back() == '\n' || n.back() == ' ')) n.pop_back();
  if (n.empty() || n.find('/') != std::string::npos) return fail(path.string() + "/latest is corrupt");
  return path / n;
}

}  // namespace

result<std::string> save_checkpoint(const std::string& root, const checkpoint_cursor& cursor,
                                    const std::vector<checkpoint_part>& parts) {
  const fs::path root_dir(root);
  const std::string name = step_dir_name(cursor.step);
  const fs::path final_dir = root_dir / name;
  const fs::path tmp_dir = root_dir / ("." + name + ".tmp-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::create_directories(root_dir, ec);
  if (ec) return fail("cannot create " + root + ": " + ec.message());
  if (fs::exists(final_dir)) return fail("checkpoint " + final_dir.string() + " already exists");
  base::remove_tree(tmp_dir.string());
  fs::create_directories(tmp_dir, ec);
  if (ec) return fail("cannot create " + tmp_dir.string() + ": " + ec.message());
  try {
    if (auto ok = save_into(tmp_dir, cursor, parts); !ok) {
      base::remove_tree(tmp_dir.string());
      return ok.error();
    }
  } catch (const c10::Error& e) {
    base::remove_tree(tmp_dir.string());
    return fail(std::string("save_checkpoint: ") + e.what_without_backtrace());
  }
  if (auto ok = fsync_tree(tmp_dir); !ok) return ok.error();
  fs::rename(tmp_dir, final_dir, ec);
  if (ec) return fail("cannot rename " + tmp_dir.string() + " to " + final_dir.string() + ": " + ec.message());
  if (auto ok = fsync_path(root_dir); !ok) return ok.error();
  if (auto ok = point_latest(root_dir, name); !ok) return ok.error();
  return final_dir.string();
}

result<checkpoint_cursor> load_checkpoint(const std::string& path, const std::vector<checkpoint_part>& parts) {
  auto dir = resolve(fs::path(path));
  if (!dir) return dir.error();
  const fs::path d = dir.value();
  auto text = read_text(d / "trainer_state.json");
  if (!text) return text.error();
  auto state = policy::parse_json(text.value());
  if (!state || !state.value().is_object()) return fail((d / "trainer_state.json").string() + " is not a JSON object");
  const auto& s = state.value();
  auto integer = [&](const char* key, int64_t& out) -> status {
    const auto* v = s.find(key);
    if (!v || !v->is_integer()) return fail((d / "trainer_state.json").string() + ": '" + key + "' must be an integer");
    out = v->as_integer();
    return {};
  };
  const auto* format = s.find("format");
  if (!format || !format->is_string() || format->as_string() != format_name)
    return fail(d.string() + " is not a learner checkpoint (trainer_state.json format)");
  int64_t version = 0;
  checkpoint_cursor cursor;
  for (auto [key, out] : {std::pair<const char*, int64_t*>{"version", &version},
                          {"step", &cursor.step},
                          {"data_cursor", &cursor.data_cursor}})
    if (auto ok = integer(key, *out); !ok) return ok.error();
  if (version != checkpoint_version)
    return fail(d.string() + " has checkpoint version " + std::to_string(version) + ", this build reads " +
                std::to_string(checkpoint_version));
  // Read and check everything first, so that a bad part changes nothing at all.
  std::vector<policy::tensor_map> weights(parts.size()), moments(parts.size());
  std::vector<int64_t> steps(parts.size(), 0);
  const auto* opt_steps = s.find("optimizer_steps");
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto& p = parts[i];
    auto w = policy::read_checkpoint_tensors((d / p.name).string());
    if (!w) return fail("checkpoint part '" + p.name + "': " + w.error().message);
    if (auto ok = same_layout(p.model->named_parameters(), w.value(), d.string() + "/" + p.name); !ok)
      return ok.error();
    weights[i] = std::move(w.value());
    if (!p.optimizer) continue;
    const std::string file = (d / (p.name + ".optimizer.safetensors")).string();
    auto m = policy::read_safetensors(file);
    if (!m) return m.error();
    if (auto ok = same_layout(p.optimizer->state(), m.value(), file); !ok) return ok.error();
    moments[i] = std::move(m.value());
    const auto* n = opt_steps && opt_steps->is_object() ? opt_steps->find(p.name) : nullptr;
    if (!n || !n->is_integer()) return fail(d.string() + ": no optimizer step count for '" + p.name + "'");
    steps[i] = n->as_integer();
  }
  std::vector<std::pair<at::Generator, torch::Tensor>> rng;
  for (auto& [file, gen] : generators()) {
    auto bytes = read_text(d / file);
    if (!bytes) return fail(d.string() + " lacks " + file + " (saved on a machine with fewer GPUs?)");
    auto t = torch::empty({static_cast<int64_t>(bytes.value().size())}, torch::kUInt8);
    std::memcpy(t.data_ptr(), bytes.value().data(), bytes.value().size());
    rng.emplace_back(gen, t);
  }
  try {
    for (size_t i = 0; i < parts.size(); ++i) {
      if (auto ok = parts[i].model->assign(weights[i]); !ok) return ok.error();
      if (parts[i].optimizer)
        if (auto ok = parts[i].optimizer->load_state(moments[i], steps[i]); !ok) return ok.error();
    }
    for (auto& [gen, t] : rng) {
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(t);
    }
  } catch (const c10::Error& e) {
    return fail(std::string("load_checkpoint: ") + e.what_without_backtrace());
  }
  return cursor;
}

}  // namespace caf_agent::learner
