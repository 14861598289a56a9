// tool_common: see tool_common.hpp.
#include "policy/model/tool_common.hpp"

#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

namespace caf_agent::policy::tool {

std::vector<int64_t> parse_ids(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(std::stoll(item));
  return out;
}

model_dtype model_dtype_of(const args& a) {
  return named_arg(a, "dtype", model_dtype::float32);
}

torch::ScalarType dtype_of(const args& a) {
  return scalar_type_of(model_dtype_of(a));
}

int write_floats(const torch::Tensor& values, const std::string& path) {
  auto cpu = values.to(torch::kCPU, torch::kFloat32).contiguous();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(cpu.data_ptr()), static_cast<std::streamsize>(cpu.nbytes()));
  if (!out.flush()) {
    std::cerr << "cannot write " << path << "\n";
    return 1;
  }
  return 0;
}

torch::Tensor read_floats(const std::string& path, int64_t count) {
  std::ifstream in(path, std::ios::binary);
  auto out = torch::empty({count}, torch::kFloat32);
  in.read(static_cast<char*>(out.data_ptr()), static_cast<std::streamsize>(count * 4));
  if (!in || in.peek() != std::char_traits<char>::eof())
    throw std::runtime_error(path + " does not hold exactly " + std::to_string(count) + " fp32 values");
  return out;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (static_cast<unsigned char>(ch) >= 0x20) out += ch;
  }
  return out + "\"";
}

}  // namespace caf_agent::policy::tool
